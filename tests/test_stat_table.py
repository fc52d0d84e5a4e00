"""The stat table: a file whose stat is unchanged since it was hashed is not read again, and
nothing a stat cannot vouch for (an edit, a racily clean file, a file gone before its bytes
are asked for) is ever answered from what the table holds."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import kvlint.running.reading
from kvlint.api.config import load_config
from kvlint.api.types import Applicability
from kvlint.store.result_cache import digest
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.store.stat_table import RACY_NS, STAT_FILE, StatTable
from outcomes import run_summary
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
MARKED = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb), k, v)\n"
CONTEXT = {f"ctx_{number}.py": f"def helper_{number}(x):\n    return x + {number}\n" for number in range(5)}


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "other.py").write_text(BARE)
    for name, text in CONTEXT.items():
        (in_tmp / name).write_text(text)
    return in_tmp


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs take place 10 s after the files were written: outside the racy window, as in real use."""
    monkeypatch.setattr(kvlint.running.reading, "time_ns", lambda: time.time_ns() + 10 * 10**9)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files whose bytes are read, in order."""
    read: list[str] = []
    real = Path.read_bytes

    def counting(path: Path) -> bytes:
        read.append(path.name)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", counting)
    return read


def lint(*paths: str, **options: Any) -> RunResult:
    options.setdefault("cache", True)
    options.setdefault("jobs", 1)
    return run(load_config(), RunOptions(paths=tuple(Path(path) for path in paths) or (Path("."),), **options))


def test_a_warm_run_reads_no_file(tree: Path, later: None, reads: list[str]) -> None:
    cold = lint(prove=True)
    reads.clear()
    warm = lint(prove=True)
    assert reads == []
    assert run_summary(warm) == run_summary(cold) == run_summary(lint(prove=True, cache=False))
    assert [finding.path for finding in warm.findings] == ["bad.py", "other.py"]


def test_a_pre_commit_run_reads_only_the_edited_file(tree: Path, later: None, reads: list[str]) -> None:
    lint()
    (tree / "bad.py").write_text(MARKED)
    reads.clear()
    result = lint("bad.py")
    assert reads == ["bad.py"]
    assert result.findings == []
    assert run_summary(result) == run_summary(lint("bad.py", cache=False))


def test_a_file_edited_at_the_same_size_with_its_mtime_set_back_is_read_again(
    tree: Path, later: None, reads: list[str]
) -> None:
    lint()
    before = os.stat(tree / "bad.py")
    same_size = BARE.replace("fb.out_cache_loc", "fb.marked_loc_id")
    assert len(same_size) == len(BARE)
    (tree / "bad.py").write_text(same_size)
    os.utime(tree / "bad.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    reads.clear()
    result = lint()
    assert reads == ["bad.py"]
    assert [finding.path for finding in result.findings] == ["other.py"]


def test_a_file_hashed_within_the_racy_window_is_read_again(tree: Path, reads: list[str]) -> None:
    # No `later`: the files were written just now, so a second write of the same size within
    # the same timestamp tick could leave their stat as it is.
    lint()
    reads.clear()
    lint()
    assert sorted(reads) == sorted(["bad.py", "other.py", *CONTEXT])


def test_the_table_keeps_no_digest_for_a_file_changed_less_than_the_racy_window_before_its_stat(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    info = os.stat(tmp_path / "a.py")
    changed = max(info.st_mtime_ns, info.st_ctime_ns)
    table = StatTable(tmp_path)
    table.record("a.py", info, digest(b"x = 1\n"), stat_at_ns=changed + RACY_NS - 1)
    assert table.digest("a.py", info) is None
    table.record("a.py", info, digest(b"x = 1\n"), stat_at_ns=changed + RACY_NS)
    assert table.digest("a.py", info) == digest(b"x = 1\n")
    table.save()
    assert StatTable(tmp_path).digest("a.py", info) == digest(b"x = 1\n")


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"not a pickle"),
        lambda path: path.write_bytes(path.read_bytes()[:20]),
        lambda path: path.write_bytes(pickle.dumps((1, {"bad.py": ("no", "signature")}))),
        lambda path: path.write_bytes(pickle.dumps(["another", "format"])),
    ],
    ids=["garbage", "truncated", "malformed-entry", "foreign"],
)
def test_a_damaged_table_is_ignored_and_rewritten(
    tree: Path, later: None, reads: list[str], damage: Callable[[Path], None]
) -> None:
    cold = lint()
    damage(tree / ".kvlint_cache" / STAT_FILE)
    reads.clear()
    assert run_summary(lint()) == run_summary(cold)
    assert len(reads) == 2 + len(CONTEXT)
    reads.clear()
    assert run_summary(lint()) == run_summary(cold)
    assert reads == []


def test_without_the_cache_every_file_is_read_and_no_table_written(tree: Path, later: None, reads: list[str]) -> None:
    lint(cache=False)
    assert sorted(reads) == sorted(["bad.py", "other.py", *CONTEXT])
    assert not (tree / ".kvlint_cache" / STAT_FILE).exists()


def test_a_file_changed_after_the_table_vouched_for_it_starts_the_run_over(
    tree: Path, later: None, caplog: pytest.LogCaptureFixture
) -> None:
    # The race: the stat is taken before an edit that lands before the bytes are asked for.
    lint()
    (tree / "ctx_1.py").write_text(BARE)
    table = tree / ".kvlint_cache" / STAT_FILE
    version, entries = pickle.loads(table.read_bytes())
    (key,) = [key for key in entries if key.endswith("ctx_1.py")]
    entries[key] = (_signature(tree / "ctx_1.py"), entries[key][1])
    table.write_bytes(pickle.dumps((version, entries)))
    # A contract learned again reads every file, ctx_1.py with it.
    (tree / ".kvlint_cache" / "contract.pickle").unlink()
    with caplog.at_level("DEBUG", logger="kvlint"):
        result = lint("bad.py")
    assert "ctx_1.py changed while kvlint ran: reading every file again" in caplog.text
    assert run_summary(result) == run_summary(lint("bad.py", cache=False))
    assert [finding.path for finding in lint().findings] == ["bad.py", "ctx_1.py", "other.py"]


def test_a_context_file_gone_before_its_bytes_are_asked_for_is_left_out_as_before(
    tree: Path, later: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lint()
    (tree / ".kvlint_cache" / "contract.pickle").unlink()
    real = Path.read_bytes

    def gone(path: Path) -> bytes:
        if path.name == "ctx_2.py":
            raise FileNotFoundError(2, "No such file or directory")
        return real(path)

    # Its stat still answers (the table vouches for it); reading it fails, as for a file deleted meanwhile.
    monkeypatch.setattr(Path, "read_bytes", gone)
    with caplog.at_level("DEBUG", logger="kvlint"):
        result = lint("bad.py")
    assert "ctx_2.py could not be read again" in caplog.text
    assert run_summary(result) == run_summary(lint("bad.py", cache=False))


def test_fix_reads_the_file_it_rewrites_from_a_warm_tree(tree: Path, later: None) -> None:
    lint()
    result = lint(fix=Applicability.SAFE)
    assert sorted(result.fixed) == ["bad.py", "other.py"]
    assert all(original == BARE.encode() for original, _fixed in result.fixed.values())


def _signature(path: Path) -> tuple[int, int, int, int, int]:
    info = os.stat(path)
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)
