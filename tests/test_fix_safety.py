"""`kvlint fix` writes atomically, keeps what it does not mean to change, and
never overwrites an edit it did not see."""

from __future__ import annotations

import inspect
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import kvlint.running.engine
import kvlint.fix.writer
from kvlint.cli import main
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

SEPARATE_STDERR = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner).parameters else {}
BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


def fix(*args: str) -> Result:
    return CliRunner(**SEPARATE_STDERR).invoke(main, ["fix", "--no-cache", *args], catch_exceptions=False)


@pytest.fixture
def target(in_tmp: Path) -> Path:
    path = in_tmp / "attn.py"
    path.write_text(BARE)
    return path


def test_failure_at_the_rename_keeps_the_original_and_is_reported(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kvlint.fix.writer.os, "replace", failing_replace)
    result = fix(".")
    assert result.exit_code == 2
    assert "attn.py: error: write failed, original kept: No space left on device" in result.stderr
    assert target.read_text() == BARE
    assert sorted(p.name for p in target.parent.iterdir()) == ["attn.py", "kvlint.toml"], "temp file left behind"


def test_file_edited_after_the_check_is_not_overwritten(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = kvlint.running.engine.run

    def run_then_user_edits(*args, **kwargs):
        result = real_run(*args, **kwargs)
        target.write_text(BARE + "# edited meanwhile\n")
        return result

    monkeypatch.setattr(kvlint.running.engine, "run", run_then_user_edits)
    result = fix(".")
    assert result.exit_code == 2
    assert "attn.py: error: file changed since it was read; not overwritten" in result.stderr
    assert target.read_text() == BARE + "# edited meanwhile\n"


def test_edit_landing_while_the_temp_file_is_written_is_not_overwritten(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def fsync_then_user_edits(fd: int) -> None:
        real_fsync(fd)
        target.write_text(BARE + "# edited at the last moment\n")

    monkeypatch.setattr(kvlint.fix.writer.os, "fsync", fsync_then_user_edits)
    result = fix(".")
    assert result.exit_code == 2
    assert "file changed since it was read" in result.stderr
    assert target.read_text().endswith("# edited at the last moment\n")


def test_file_deleted_before_the_write_is_reported(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = kvlint.running.engine.run

    def run_then_delete(*args, **kwargs):
        result = real_run(*args, **kwargs)
        target.unlink()
        return result

    monkeypatch.setattr(kvlint.running.engine, "run", run_then_delete)
    result = fix(".")
    assert result.exit_code == 2
    assert "attn.py: error: file vanished since it was read" in result.stderr
    assert not target.exists()


@pytest.mark.parametrize(
    ("original", "encoding"),
    [
        (BARE, "utf-8"),
        (BARE.replace("\n", "\r\n"), "utf-8"),
        (BARE.rstrip("\n"), "utf-8"),
        ("# -*- coding: latin-1 -*-\n# déjà vu\n" + BARE, "latin-1"),
        ("\ufeff" + BARE, "utf-8"),
    ],
    ids=["lf", "crlf", "no_trailing_newline", "latin1_cookie", "bom"],
)
def test_encoding_newlines_trailing_newline_and_mode_are_kept(in_tmp: Path, original: str, encoding: str) -> None:
    path = in_tmp / "attn.py"
    path.write_bytes(original.encode(encoding))
    path.chmod(0o750)
    result = fix(".")
    assert result.exit_code == 0, result.stderr
    data = path.read_bytes()
    text = data.decode(encoding)
    assert "KVWriteLoc.for_batch(forward_batch)" in text
    assert text.endswith("\n") == original.endswith("\n")
    assert ("\r\n" in text) == ("\r\n" in original)
    assert text.replace("\r\n", "").count("\n") == 0 or "\r\n" not in original
    if "déjà" in original:
        assert "# déjà vu" in text
    assert data.startswith(b"\xef\xbb\xbf") == original.startswith("\ufeff")
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_read_only_file_is_reported_not_crashed_on(in_tmp: Path, target: Path) -> None:
    (in_tmp / "other.py").write_text(BARE)
    target.chmod(0o444)
    result = fix(".")
    assert result.exit_code == 2
    assert "attn.py: error: file is read-only; not fixed" in result.stderr
    assert target.read_text() == BARE
    assert "KVWriteLoc.for_batch" in (in_tmp / "other.py").read_text()


def test_fixing_through_a_symlink_keeps_the_link(in_tmp: Path, target: Path) -> None:
    link = in_tmp / "link.py"
    link.symlink_to(target)
    result = fix("link.py")
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink()
    assert "KVWriteLoc.for_batch" in target.read_text()


def test_diff_writes_nothing(target: Path) -> None:
    result = fix("--diff", ".")
    assert result.exit_code == 1
    assert "+    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)" in result.stdout
    assert target.read_text() == BARE
