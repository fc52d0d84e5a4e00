"""The summaries say what `kvlint fix` will do: how many findings a safe fix closes and how many
only `--unsafe` does, so a `Fixed 0` after a check that counted fixes is never a surprise."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

SAFE_FIX = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
# KV301: `batch_size` is not copied by the child builder; copying it is an unsafe fix.
UNSAFE_BATCH = (
    "from dataclasses import dataclass\n\n\n"
    "@dataclass\nclass ForwardBatch:\n    input_ids: object\n    batch_size: int\n"
)
UNSAFE_BUILDER = (
    "from batch import ForwardBatch\n\n\n"
    "def filter_batch(batch, *, start, end):\n"
    "    output_dict = dict()\n"
    '    output_dict["input_ids"] = batch.input_ids\n'
    "    return ForwardBatch(**output_dict)\n"
)
# KV102 without a fix: the loc is not a batch's, so only its author can state its mark.
NO_FIX = "from engine import KVWriteLoc\n\n\ndef put(pool, layer, loc, k, v):\n    pool.set_kv_buffer(layer, KVWriteLoc(loc), k, v)\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def last_line(text: str) -> str:
    return text.rstrip("\n").rsplit("\n", 1)[-1]


@pytest.fixture
def unsafe_only(in_tmp: Path) -> Path:
    (in_tmp / "batch.py").write_text(UNSAFE_BATCH)
    (in_tmp / "builder.py").write_text(UNSAFE_BUILDER)
    return in_tmp


@pytest.fixture
def safe_and_unsafe(unsafe_only: Path) -> Path:
    (unsafe_only / "bad.py").write_text(SAFE_FIX)
    return unsafe_only


def test_check_summary_counts_safe_and_unsafe_fixes(safe_and_unsafe: Path) -> None:
    code, out, _ = invoke("check", ".")
    assert code == 1
    assert last_line(out) == "2 findings (2 fixable: 1 safe, 1 with --unsafe) in 2 files; 3 files in scope"


def test_check_summary_with_only_unsafe_fixes_names_unsafe(unsafe_only: Path) -> None:
    assert last_line(invoke("check", ".")[1]) == "1 finding (1 fixable: 1 with --unsafe) in 1 files; 2 files in scope"


def test_check_summary_says_nothing_of_fixes_when_none_has_one(in_tmp: Path) -> None:
    (in_tmp / "put.py").write_text(NO_FIX)
    code, out, _ = invoke("check", ".")
    assert code == 1
    assert last_line(out) == "1 finding in 1 files; 1 files in scope"


def test_statistics_count_fixes_per_rule_as_the_summary_does(safe_and_unsafe: Path) -> None:
    (safe_and_unsafe / "put.py").write_text(NO_FIX)
    _, out, _ = invoke("check", "--statistics", "--quiet", ".")
    assert out.splitlines()[-6:] == [
        "     1  KV101  bare-write-loc  (1 fixable: 1 safe)",
        "     1  KV102  unmarked-write-loc",
        "     1  KV301  tbo-field-not-copied  (1 fixable: 1 with --unsafe)",
        "     1  reach live",
        "     2  reach unknown",
        "3 findings (2 fixable: 1 safe, 1 with --unsafe) in 3 files; 4 files in scope",
    ]


@pytest.mark.parametrize("diff, verb", [(False, "Fixed"), (True, "Would fix")], ids=["fix", "fix --diff"])
def test_fix_that_fixes_nothing_says_how_many_more_unsafe_would(unsafe_only: Path, diff: bool, verb: str) -> None:
    code, _, err = invoke("fix", *(["--diff"] if diff else []), ".")
    assert code == 1
    assert last_line(err) == f"{verb} 0 findings in 0 files (1 more with --unsafe); 1 remaining; 2 files in scope"


def test_fix_names_the_unsafe_fixes_it_left_beside_the_safe_ones_it_applied(safe_and_unsafe: Path) -> None:
    code, _, err = invoke("fix", ".")
    assert code == 1
    assert last_line(err) == "Fixed 1 findings in 1 files (1 more with --unsafe); 1 remaining; 3 files in scope"


def test_fix_unsafe_has_no_more_to_offer(safe_and_unsafe: Path) -> None:
    code, _, err = invoke("fix", "--unsafe", ".")
    assert code == 0
    assert last_line(err) == "Fixed 2 findings in 2 files; 0 remaining; 3 files in scope"
