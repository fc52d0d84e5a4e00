from __future__ import annotations

import os
from pathlib import Path

import pytest
from corpus import CorpusCheck, CorpusRoundTrip, kvlint_json, round_trip, sglang_srt_or_skip

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist, session fixtures are per worker: one group keeps the
    # corpus tests on one worker, so the tree is checked and fixed once.
    for item in items:
        if item.get_closest_marker("corpus") is not None:
            item.add_marker(pytest.mark.xdist_group("corpus"))


@pytest.fixture(scope="session")
def srt() -> Path:
    """The real `sglang/srt` tree (downloaded once per machine), or a skip saying why not."""
    return sglang_srt_or_skip()


@pytest.fixture(scope="session")
def srt_round_trip(srt: Path, tmp_path_factory: pytest.TempPathFactory) -> CorpusRoundTrip:
    """The session's one round trip over the real tree; its `first` is the cold check."""
    return round_trip(srt, tmp_path_factory.mktemp("srt-round-trip") / "srt")


@pytest.fixture(scope="session")
def srt_whole_check(srt: Path, tmp_path_factory: pytest.TempPathFactory) -> CorpusCheck:
    """A cold check that parses every file whole (as --report-unused-ignores must),
    of the untouched tree: its paths read as the round trip's."""
    config = tmp_path_factory.mktemp("srt-whole") / "kvlint.toml"
    config.write_text("")
    return kvlint_json(srt, "--jobs", "2", "--no-cache", "--report-unused-ignores", "--config", str(config), ".")
