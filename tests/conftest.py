from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run inside an empty temporary directory (no kvlint config above it is read)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvlint.toml").write_text("")
    return tmp_path


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("NO_COLOR", "1")
