"""Under load: whole-tree runs of the real corpus on two workers stay within a
memory bound."""

from __future__ import annotations

import pytest
from corpus import CorpusCheck, CorpusRoundTrip

pytestmark = pytest.mark.corpus

# A run holds every file's bytes (36 MB) plus one parsed file per worker;
# measured peak on sglang/srt is a few hundred MB per process.
MAX_RSS_BYTES = 1_500_000_000


def test_whole_tree_runs_on_two_workers_keep_memory_bounded(
    srt_round_trip: CorpusRoundTrip, srt_whole_check: CorpusCheck
) -> None:
    # Two cold whole-tree runs of the session, one parsing every file whole. That
    # they agree finding for finding is test_fragment's corpus test.
    for run in (srt_round_trip.first, srt_whole_check):
        assert run.report["errors"] == []
        assert run.report["files_in_scope"] == len(srt_round_trip.before)
        assert 0 < run.peak_rss_bytes < MAX_RSS_BYTES, f"peak RSS {run.peak_rss_bytes / 1e6:.0f} MB"
