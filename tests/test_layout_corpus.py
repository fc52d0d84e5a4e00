"""The layout rules on the real `sglang/srt` tree: no crash, and silent where upstream already migrated.

Upstream moved its main attention backends to the paged_view helpers and
stated the head-regroup exclusion with an `is_contiguous()` assert; kvlint
must agree that those files are clean, and still flag the backends that
kept `.view(-1, page_size, ...)`.
"""

from __future__ import annotations

import libcst as cst
import pytest
from corpus import CorpusRoundTrip

from kvlint.analysis.index import callee_name
from kvlint.api.contract import PAGED_HELPERS

MIGRATED = (
    "layers/attention/flashattention_backend.py",
    "layers/attention/trtllm_mha_backend.py",
    "layers/attention/trtllm_mla_backend.py",
    "layers/attention/flashmla_backend.py",
    "layers/attention/cutedsl_mla_backend.py",
    "mem_cache/layout/paged_view.py",
)


def layout_findings(srt_round_trip: CorpusRoundTrip) -> list[dict]:
    return [finding for finding in srt_round_trip.first.report["findings"] if finding["code"].startswith("KV2")]


@pytest.mark.corpus
def test_layout_rules_run_over_the_whole_tree_without_errors(srt_round_trip: CorpusRoundTrip) -> None:
    assert srt_round_trip.first.report["errors"] == []
    assert srt_round_trip.first.report["files_in_scope"] > 2000
    assert layout_findings(srt_round_trip)


@pytest.mark.corpus
def test_backends_upstream_migrated_to_paged_view_are_clean(srt_round_trip: CorpusRoundTrip) -> None:
    flagged = {finding["path"] for finding in layout_findings(srt_round_trip)}
    assert all(path in srt_round_trip.before for path in MIGRATED)
    assert flagged.isdisjoint(MIGRATED)


@pytest.mark.corpus
def test_every_kv201_fix_is_a_paged_helper_call_that_parses(srt_round_trip: CorpusRoundTrip) -> None:
    fixes = [f["fix"] for f in layout_findings(srt_round_trip) if f["code"] == "KV201" and f["fix"] is not None]
    assert fixes
    for fix in fixes:
        call = cst.parse_expression(fix["replacement"])
        assert isinstance(call, cst.Call) and callee_name(call) in PAGED_HELPERS, fix["replacement"]
