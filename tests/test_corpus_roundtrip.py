"""The real round trip on a copy of sglang/srt: check, fix --unsafe, fix again,
check again, through the real command line (the session's `srt_round_trip`)."""

from __future__ import annotations

import ast

import pytest
from corpus import CorpusRoundTrip
from fix_scope import changes_outside_fixes

# Upstream code has invalid escape sequences; compile() warns about them, which is not our finding.
pytestmark = [pytest.mark.corpus, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")]


def test_check_completes_with_valid_json_and_no_internal_error(srt_round_trip: CorpusRoundTrip) -> None:
    report = srt_round_trip.first.report
    assert report["files_in_scope"] == len(srt_round_trip.before) > 2000
    assert report["errors"] == []
    assert all(f["code"] != "KV000" for f in report["findings"])


def test_fix_completes_and_every_file_it_changed_still_parses_and_compiles(srt_round_trip: CorpusRoundTrip) -> None:
    # Files it did not change are byte-identical to upstream's (the next test).
    rt = srt_round_trip
    assert rt.fix.returncode in (0, 1), rt.fix.stderr
    assert "Traceback" not in rt.fix.stderr
    changed = [name for name, data in rt.after_fix.items() if data != rt.before[name]]
    assert changed
    for name in changed:
        ast.parse(rt.after_fix[name], name)
        compile(rt.after_fix[name], name, "exec", dont_inherit=True)


def test_second_fix_changes_nothing(srt_round_trip: CorpusRoundTrip) -> None:
    assert srt_round_trip.refix.returncode in (0, 1), srt_round_trip.refix.stderr
    assert srt_round_trip.after_refix == srt_round_trip.after_fix


def test_files_without_a_fixable_finding_are_byte_identical(srt_round_trip: CorpusRoundTrip) -> None:
    rt = srt_round_trip
    fix_targets = {f["fix"].get("path") or f["path"] for f in rt.first.report["findings"] if f["fix"] is not None}
    untouched = [name for name in rt.before if name not in fix_targets]
    assert untouched
    assert [name for name in untouched if rt.after_fix[name] != rt.before[name]] == []


def test_check_after_fix_reports_only_findings_without_a_fix(srt_round_trip: CorpusRoundTrip) -> None:
    report = srt_round_trip.last.report
    assert report["errors"] == []
    assert [f for f in report["findings"] if f["fix"] is not None] == []


def test_every_change_stays_in_the_flagged_spans_and_the_import_block(srt_round_trip: CorpusRoundTrip) -> None:
    rt = srt_round_trip
    findings = rt.first.report["findings"]
    changed = [name for name, data in rt.after_fix.items() if data != rt.before[name]]
    assert changed, "the corpus has fixable findings; a fix that changes nothing is a regression"
    for name in changed:
        own = [f for f in findings if f["path"] == name]
        inserted = [
            line for f in findings if f["fix"] is not None and f["fix"].get("path") == name
            for line in f["fix"]["replacement"].splitlines()
        ]
        before = rt.before[name].decode("utf-8")
        after = rt.after_fix[name].decode("utf-8")
        assert changes_outside_fixes(before, after, own, inserted) == [], name
