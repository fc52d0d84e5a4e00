"""Counting the worker pools a module starts, each still a real pool."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def counted_pools(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[Any]:
    """The `ProcessPoolExecutor`s `module` starts from here on."""
    pools: list[Any] = []
    real = module.ProcessPoolExecutor

    def counted(*args: Any, **kwargs: Any) -> Any:
        pools.append(real(*args, **kwargs))
        return pools[-1]

    monkeypatch.setattr(module, "ProcessPoolExecutor", counted)
    return pools
