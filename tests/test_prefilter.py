"""The prefilter: a file without a selected rule's trigger words is never parsed.

Every rule's INVALID examples passing its own prefilter is tested with the
examples themselves (tests/test_rule_examples.py); here: the semantics of the
groups, what the engine does with them, and that a skipped file costs no parser.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.contract import Contract
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.api.triggers import encode_groups, passes
from kvlint.running.registry import all_rules
from importtime import imported_libcst

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
BROKEN_WITHOUT_TRIGGERS = "def broken(:\n    pass\n"
BROKEN_WITH_TRIGGERS = "def broken(:\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"


def lint(**options: object) -> RunResult:
    return run(load_config(), RunOptions(paths=(Path("."),), **options))  # type: ignore[arg-type]


def test_a_file_needs_one_word_of_every_group() -> None:
    groups = encode_groups([["out_cache_loc"], ["set_kv_buffer", "set_mla_kv_buffer"]])
    assert passes(b"x.set_mla_kv_buffer(l, fb.out_cache_loc)", groups)
    assert not passes(b"x.set_mla_kv_buffer(l, loc)", groups)
    assert not passes(b"fb.out_cache_loc", groups)
    assert passes(b"anything", ())


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_rule_declares_groups_that_can_pass_and_can_fail(rule: type) -> None:
    """No group may be empty (the rule would never run) and there must be one (else every file is parsed)."""
    groups = rule.trigger_groups(load_config().tbo, Contract()) if hasattr(rule, "extract") else rule.trigger_groups(Contract())
    assert groups, f"{rule.code} declares no trigger words: every file would be parsed"
    assert all(group and all(word for word in group) for group in groups), f"{rule.code} has an empty group"


def test_a_file_without_trigger_words_is_in_scope_but_not_parsed(in_tmp: Path) -> None:
    (in_tmp / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    (in_tmp / "bad.py").write_text(BARE)
    result = lint()
    assert (result.files_in_scope, result.files_parsed) == (2, 1)
    assert [finding.path for finding in result.findings] == ["bad.py"]


def test_a_syntax_error_counts_only_where_a_rule_would_have_looked(in_tmp: Path) -> None:
    (in_tmp / "skipped.py").write_text(BROKEN_WITHOUT_TRIGGERS)
    (in_tmp / "checked.py").write_text(BROKEN_WITH_TRIGGERS)
    result = lint()
    assert [(finding.path, finding.code) for finding in result.findings] == [("checked.py", "KV000")]


def test_triggers_follow_the_selection(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    assert lint(select=("KV2",)).files_parsed == 0
    assert lint(select=("KV101",)).files_parsed == 1


def test_triggers_follow_the_configured_contract(in_tmp: Path) -> None:
    (in_tmp / "kvlint.toml").write_text('[contract]\nwrite-doors = {store_kv = 1}\n')
    (in_tmp / "bad.py").write_text(BARE.replace("set_kv_buffer", "store_kv"))
    result = lint(select=("KV101",))
    assert result.files_parsed == 1
    assert [finding.code for finding in result.findings] == ["KV101"]


def importing_run(cwd: Path, *args: str) -> str:
    """The `-X importtime` report of a `kvlint check` that must exit clean."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kvlint", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_changed_clean_file_is_skipped_without_importing_libcst(in_tmp: Path) -> None:
    """The pre-commit case: the cache remembers the trigger words, so no rule module is imported."""
    plain = in_tmp / "plain.py"
    plain.write_text("def add(a, b):\n    return a + b\n")
    importing_run(in_tmp, ".")
    plain.write_text("def add(a, b):\n    return b + a\n")
    assert not imported_libcst(importing_run(in_tmp, "plain.py"))
