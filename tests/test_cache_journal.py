"""The result cache's journal: a run's changes appended, read back in order, folded in on a rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.store import journal as cache_journal
from kvlint.store.result_cache import ResultCache
from kvlint.running.engine import RunOptions, run
from outcomes import run_summary

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(BARE)
    # Any journal fits: the cache files of these small trees are a few kilobytes.
    monkeypatch.setattr(cache_journal, "MAX_SHARE", 1000.0)
    return tmp_path / ".kvlint_cache"


def written(directory: Path) -> ResultCache:
    """A cache file holding a.py's entry, with no journal."""
    cache = ResultCache(directory, "key")
    cache.store_file("a.py", b"a", None, {})
    cache.save(["a.py"])
    return cache


def journal(cache: ResultCache) -> Path:
    return cache_journal.journal_of(cache._path)


def test_a_change_is_appended_and_read_back(directory: Path) -> None:
    first = written(directory)
    before = first._path.read_bytes()
    second = ResultCache(directory, "key")
    second.store_file("b.py", b"b", None, {})
    second.save(["b.py"])
    assert first._path.read_bytes() == before and journal(first).exists()
    again = ResultCache(directory, "key")
    assert again.file("a.py", b"a") is not None and again.file("b.py", b"b") is not None


def test_two_runs_loaded_together_both_append(directory: Path) -> None:
    written(directory)
    ours, theirs = ResultCache(directory, "key"), ResultCache(directory, "key")
    theirs.store_file("b.py", b"b", None, {})
    theirs.save(["b.py"])
    ours.store_file("c.py", b"c", None, {})
    ours.save(["c.py"])
    again = ResultCache(directory, "key")
    assert all(again.file(path, path[0].encode()) is not None for path in ("a.py", "b.py", "c.py"))


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_record_ends_the_journal(directory: Path, damage: str) -> None:
    first = written(directory)
    for path in ("b.py", "c.py"):
        cache = ResultCache(directory, "key")
        cache.store_file(path, path[0].encode(), None, {})
        cache.save([path])
    data = journal(first).read_bytes()
    last = len(data) - 20
    journal(first).write_bytes(data[:last] if damage == "cut" else data[:last] + bytes([data[last] ^ 1]) + data[last + 1:])
    again = ResultCache(directory, "key")
    assert again.file("b.py", b"b") is not None
    assert again.file("c.py", b"c") is None


def test_a_journal_outgrowing_its_share_is_folded_into_the_file(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = written(directory)
    second = ResultCache(directory, "key")
    second.store_file("b.py", b"b", None, {})
    second.save(["b.py"])
    monkeypatch.setattr(cache_journal, "MAX_SHARE", 0.0)
    third = ResultCache(directory, "key")
    third.store_file("c.py", b"c", None, {})
    third.save(["c.py"])
    assert not journal(first).exists()
    again = ResultCache(directory, "key")
    assert all(again.file(path, path[0].encode()) is not None for path in ("a.py", "b.py", "c.py"))


def test_a_deleted_file_rewrites_the_cache_without_its_entry(directory: Path) -> None:
    first = written(directory)
    second = ResultCache(directory, "key")
    second.store_file("b.py", b"b", None, {})
    second.save(["b.py"])
    (directory.parent / "b.py").unlink()
    third = ResultCache(directory, "key")
    third.store_file("c.py", b"c", None, {})
    third.save(["c.py"])
    assert not journal(first).exists()
    assert set(ResultCache(directory, "key")._contents.files) == {"a.py", "c.py"}


def test_a_journal_beside_an_unreadable_file_is_not_read(directory: Path) -> None:
    first = written(directory)
    second = ResultCache(directory, "key")
    second.store_file("b.py", b"b", None, {})
    second.save(["b.py"])
    first._path.write_bytes(b"not a pickle")
    assert ResultCache(directory, "key").file("b.py", b"b") is None


def test_runs_over_a_journal_report_what_a_cold_run_does(directory: Path) -> None:
    def lint(cache: bool) -> object:
        return run_summary(run(load_config(), RunOptions(paths=(Path("."),), cache=cache, jobs=1)))

    cold = lint(False)
    assert lint(True) == cold
    for edit in range(3):
        with open(directory.parent / "b.py", "a") as handle:
            handle.write(f"# edit {edit}\n")
        assert lint(True) == lint(False)
    [cache_file] = directory.glob("v*/*.pickle")
    assert cache_journal.journal_of(cache_file).exists()
    assert lint(True) == lint(False)
