"""A rule that crashes on one file costs that file and rule only: an internal
error naming both, exit 2 at the end, and every other file and rule still runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kvlint.running.registry
from kvlint.running.checker import CheckRequest, check_bytes
from kvlint.cli import main
from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Rule
from kvlint.rules.write_loc.bare_write_loc import BareWriteLoc
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


class CrashesOnBoom(Rule):
    """A rule with a bug that only one file triggers."""

    code = "KV999"
    name = "crashes-on-boom"

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return (("set_kv_buffer",),)

    def check(self, ctx: FileContext) -> None:
        if "BOOM" in ctx.module.code:
            raise ZeroDivisionError("the rule's own bug")


@pytest.fixture
def with_crashing_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = (*kvlint.running.registry.all_rules(), CrashesOnBoom)
    monkeypatch.setattr(kvlint.running.registry, "all_rules", lambda: rules)
    monkeypatch.setattr(kvlint.running.registry, "all_codes", lambda: ["KV000", "KV001", *(r.code for r in rules)])


def test_crash_in_one_rule_keeps_the_other_rules_findings_on_that_file() -> None:
    request = CheckRequest("boom.py", (CrashesOnBoom, BareWriteLoc), Contract())
    outcome = check_bytes(request, (BARE + "# BOOM\n").encode()).outcome
    assert [f.code for f in outcome.findings] == ["KV101"]
    (error,) = outcome.errors
    assert error.internal
    assert error.path == "boom.py"
    assert error.message == "internal error in rule KV999: ZeroDivisionError: the rule's own bug"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_crash_on_one_file_is_reported_and_every_other_file_runs(
    in_tmp: Path, with_crashing_rule: None, jobs: str
) -> None:
    # Ten files, so --jobs 2 really uses worker processes.
    for i in range(9):
        (in_tmp / f"ok{i}.py").write_text(BARE)
    (in_tmp / "boom.py").write_text(BARE + "# BOOM\n")
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--jobs", jobs, "--format", "json", "."], catch_exceptions=False
    )
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["errors"] == [
        {"path": "boom.py", "message": "internal error in rule KV999: ZeroDivisionError: the rule's own bug"}
    ]
    flagged = sorted(f["path"] for f in report["findings"] if f["code"] == "KV101")
    assert flagged == ["boom.py", *(f"ok{i}.py" for i in range(9))]


def test_fix_still_fixes_the_other_files_and_exits_two(in_tmp: Path, with_crashing_rule: None) -> None:
    (in_tmp / "ok.py").write_text(BARE)
    (in_tmp / "boom.py").write_text(BARE + "# BOOM\n")
    result = CliRunner().invoke(main, ["fix", "--no-cache", "--jobs", "1", "."], catch_exceptions=False)
    assert result.exit_code == 2
    assert "KVWriteLoc.for_batch(forward_batch)" in (in_tmp / "ok.py").read_text()
