"""`kvlint check -v` says on stderr what each phase did, how long it took, and what it skipped."""

from __future__ import annotations

import logging
from pathlib import Path

from click.testing import CliRunner

from kvlint.cli import main

BARE = "def f(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"


def invoke(*args: str) -> str:
    try:
        result = CliRunner().invoke(main, ["check", *args])
    finally:
        logging.getLogger("kvlint").setLevel(logging.WARNING)
    assert result.exit_code in (0, 1), result.output
    return result.stderr


def test_verbose_names_every_phase_with_its_time(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "plain.py").write_text("x = 1\n")
    err = invoke("-v", "--no-cache", "-q", ".")
    for phase in ("discover", "read", "contract", "cache", "rules", "prefilter", "check", "total"):
        assert f"kvlint: {phase}" in err, phase
    assert "2 files in scope" in err
    assert "1 files hold a selected rule's trigger words; 1 do not and are not parsed" in err
    assert "not parsed plain.py" not in err


def test_very_verbose_names_each_file_it_did_not_parse(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "plain.py").write_text("x = 1\n")
    err = invoke("-vv", "--no-cache", "-q", ".")
    assert "not parsed plain.py: no selected rule's trigger words" in err


def test_without_verbose_stderr_has_no_phase_lines(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    assert "kvlint: discover" not in invoke("--no-cache", "-q", ".")
