"""The real round trip on a copy of the latest sglang/srt: check, fix --unsafe,
fix again, check again, through the real command line."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import sglang_srt_or_skip
from fix_scope import changes_outside_fixes

# Upstream code has invalid escape sequences; compile() warns about them, which is not our finding.
pytestmark = [pytest.mark.corpus, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")]


def kvlint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *args, "--no-cache", "."],
        cwd=cwd, capture_output=True, text=True, timeout=900,
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*.py"))}


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    source = sglang_srt_or_skip()
    tree = tmp_path_factory.mktemp("corpus") / "srt"
    shutil.copytree(source, tree)
    (tree / "kvlint.toml").write_text("")
    before = snapshot(tree)

    first = kvlint(tree, "check", "--format", "json")
    fix = kvlint(tree, "fix", "--unsafe")
    after_fix = snapshot(tree)
    refix = kvlint(tree, "fix", "--unsafe")
    after_refix = snapshot(tree)
    last = kvlint(tree, "check", "--format", "json")
    return {
        "before": before, "first": first, "fix": fix, "after_fix": after_fix,
        "refix": refix, "after_refix": after_refix, "last": last,
    }


def test_check_completes_with_valid_json_and_no_internal_error(round_trip: dict) -> None:
    first = round_trip["first"]
    assert first.returncode in (0, 1), first.stderr
    report = json.loads(first.stdout)
    assert report["files_in_scope"] == len(round_trip["before"])
    assert report["errors"] == []
    assert all(f["code"] != "KV000" for f in report["findings"])


def test_fix_completes_and_every_file_still_parses_and_compiles(round_trip: dict) -> None:
    assert round_trip["fix"].returncode in (0, 1), round_trip["fix"].stderr
    assert "Traceback" not in round_trip["fix"].stderr
    for name, data in round_trip["after_fix"].items():
        ast.parse(data, name)
        compile(data, name, "exec", dont_inherit=True)


def test_second_fix_changes_nothing(round_trip: dict) -> None:
    assert round_trip["refix"].returncode in (0, 1), round_trip["refix"].stderr
    assert round_trip["after_refix"] == round_trip["after_fix"]


def test_files_without_a_fixable_finding_are_byte_identical(round_trip: dict) -> None:
    findings = json.loads(round_trip["first"].stdout)["findings"]
    fix_targets = {f["fix"].get("path") or f["path"] for f in findings if f["fix"] is not None}
    untouched = [name for name in round_trip["before"] if name not in fix_targets]
    assert untouched
    changed = [name for name in untouched if round_trip["after_fix"][name] != round_trip["before"][name]]
    assert changed == []


def test_check_after_fix_reports_only_findings_without_a_fix(round_trip: dict) -> None:
    report = json.loads(round_trip["last"].stdout)
    assert report["errors"] == []
    assert [f for f in report["findings"] if f["fix"] is not None] == []


def test_every_change_stays_in_the_flagged_spans_and_the_import_block(round_trip: dict) -> None:
    findings = json.loads(round_trip["first"].stdout)["findings"]
    changed = [name for name, data in round_trip["after_fix"].items() if data != round_trip["before"][name]]
    assert changed, "the corpus has fixable findings; a fix that changes nothing is a regression"
    for name in changed:
        own = [f for f in findings if f["path"] == name]
        inserted = [
            line for f in findings if f["fix"] is not None and f["fix"].get("path") == name
            for line in f["fix"]["replacement"].splitlines()
        ]
        before = round_trip["before"][name].decode("utf-8")
        after = round_trip["after_fix"][name].decode("utf-8")
        assert changes_outside_fixes(before, after, own, inserted) == [], name
