from __future__ import annotations

import fcntl
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar

import pytest
from corpus import CorpusCheck, CorpusRoundTrip, kvlint_json, round_trip, sglang_srt_or_skip

T = TypeVar("T")

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


@pytest.fixture(scope="session")
def srt() -> Path:
    """The real `sglang/srt` tree (downloaded once per machine), or a skip saying why not."""
    return sglang_srt_or_skip()


def _once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], T]) -> T:
    """`compute(folder)` once per test run, however many pytest-xdist workers
    ask: the first computes under a lock, the others read its pickled result."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the folder all workers' temp folders share
    stored = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        folder = root / name
        folder.mkdir()
        value = compute(folder)
        stored.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture(scope="session")
def srt_round_trip(srt: Path, tmp_path_factory: pytest.TempPathFactory) -> CorpusRoundTrip:
    """The run's one round trip over the real tree; its `first` is the cold check."""
    return _once_per_run(tmp_path_factory, "srt-round-trip", lambda folder: round_trip(srt, folder / "srt"))


@pytest.fixture(scope="session")
def srt_whole_check(srt: Path, tmp_path_factory: pytest.TempPathFactory) -> CorpusCheck:
    """A cold check that parses every file whole (as --report-unused-ignores must),
    of the untouched tree: its paths read as the round trip's."""

    def whole_check(folder: Path) -> CorpusCheck:
        config = folder / "kvlint.toml"
        config.write_text("")
        return kvlint_json(srt, "--jobs", "2", "--no-cache", "--report-unused-ignores", "--config", str(config), ".")

    return _once_per_run(tmp_path_factory, "srt-whole", whole_check)
