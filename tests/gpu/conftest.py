"""tests/gpu needs CUDA (and torch and Triton); without them every module here
is reported as one skip whose reason says CUDA is unavailable.

The modules are not even imported then: they import torch and Triton-backed
kernels at the top, and CI has no GPU (and may have no Triton).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest

# The test modules share `kv_gpu_helpers`; make it importable whatever the
# import mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


def _skip_reason() -> Optional[str]:
    try:
        import torch
    except Exception as err:  # pragma: no cover - depends on the machine
        return f"CUDA is unavailable: torch is not importable ({err})"
    if not torch.cuda.is_available():
        return "CUDA is unavailable (torch.cuda.is_available() is False)"
    try:
        import triton  # noqa: F401
    except Exception as err:  # pragma: no cover - depends on the machine
        return f"CUDA is unavailable to the Triton kernels: triton is not importable ({err})"
    return None


SKIP_REASON = _skip_reason()


class _SkippedModule(pytest.Module):
    """A test module collected as a single skip, without importing it."""

    def collect(self) -> Any:
        pytest.skip(SKIP_REASON or "", allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    if SKIP_REASON is not None and module_path.name.startswith("test_"):
        return _SkippedModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
