"""Under load: the real corpus, checked three times on two workers, gives the
same output each time, and memory stays bounded."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import sglang_srt_or_skip

pytestmark = pytest.mark.corpus

# A run holds every file's bytes (36 MB) plus one parsed file per worker;
# measured peak on sglang/srt is a few hundred MB per process.
MAX_RSS_BYTES = 1_500_000_000


def test_three_runs_on_two_workers_agree_and_memory_stays_bounded(tmp_path: Path) -> None:
    srt = sglang_srt_or_skip()
    (tmp_path / "kvlint.toml").write_text("")
    outputs = []
    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-m", "kvlint", "check", "--jobs", "2", "--no-cache", "--format", "json", str(srt)],
            cwd=tmp_path, capture_output=True, text=True, timeout=900,
        )
        assert result.returncode in (0, 1), result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    # ru_maxrss (KiB on Linux) of the largest child process waited for: the CLI or a worker.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert peak < MAX_RSS_BYTES, f"peak RSS {peak / 1e6:.0f} MB"
