"""The layout rules on the real `sglang/srt` tree: no crash, and silent where upstream already migrated.

Upstream moved its main attention backends to the paged_view helpers and
stated the head-regroup exclusion with an `is_contiguous()` assert; kvlint
must agree that those files are clean, and still flag the backends that
kept `.view(-1, page_size, ...)`.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from corpus import sglang_srt_or_skip

from kvlint.api.config import Config
from kvlint.running.engine import RunOptions, RunResult, run
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


@pytest.fixture(scope="module")
def layout_run() -> tuple[Path, RunResult]:
    srt = sglang_srt_or_skip()
    return srt, run(Config(), RunOptions(paths=(srt,), select=("KV2",)))


@pytest.mark.corpus
def test_layout_rules_run_over_the_whole_tree_without_errors(layout_run: tuple[Path, RunResult]) -> None:
    _, result = layout_run
    assert result.errors == []
    assert result.files_in_scope > 2000


@pytest.mark.corpus
def test_backends_upstream_migrated_to_paged_view_are_clean(layout_run: tuple[Path, RunResult]) -> None:
    srt, result = layout_run
    flagged = {Path(finding.path).resolve().relative_to(srt.resolve()).as_posix() for finding in result.findings}
    assert flagged.isdisjoint(MIGRATED)


@pytest.mark.corpus
def test_every_kv201_fix_is_a_paged_helper_call_that_parses(layout_run: tuple[Path, RunResult]) -> None:
    _, result = layout_run
    fixes = [finding.fix for finding in result.findings if finding.code == "KV201" and finding.fix is not None]
    assert fixes
    for fix in fixes:
        call = cst.parse_expression(fix.replacement)
        assert isinstance(call, cst.Call) and callee_name(call) in PAGED_HELPERS, fix.replacement
