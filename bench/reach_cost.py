"""What deciding reach costs, as a share of a cold check of a real tree.

    python bench/reach_cost.py [TREE] [--runs 5]

TREE defaults to the pinned `sglang/srt` (`tests/corpus.py`). Each round runs one cold
`kvlint check --no-cache --format json .` in TREE (wall time, interpreter start included)
and, in this process, learns the tree's contract with the admission step timed on its own:
reading the unified-memory gates, the backend registry, and every place naming a backend
class, in a fresh interpreter each round (learning remembers what it read, by content, within a
process). Before that step the per-file word filters are built untimed: pool pairing, which
runs whether or not reach does, builds them too, so they are not reach's cost. Giving each
finding its reach afterwards is one dictionary lookup per finding, also not timed. Rounds
alternate the two, so machine noise falls on both; the figure is the median admission time
over the median cold check.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests"))

from corpus import CorpusUnavailable, python_files, sglang_srt  # noqa: E402

import kvlint.learn.contract as learning  # noqa: E402
from kvlint.api.config import Config  # noqa: E402
from kvlint.learn.tree import spelled_words  # noqa: E402


def cold_check(tree: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "json", "."],
                   cwd=tree, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def admission_time(tree: Path) -> float:
    """Seconds the admission step of one whole learning took."""
    sources = {tree / name: data for name, data in python_files(tree).items()}
    timed: list[float] = []
    learn_admission = learning.learn_admission

    def timed_admission(scope, learned) -> None:
        for data in sources.values():
            spelled_words(data)
        started = time.perf_counter()
        learn_admission(scope, learned)
        timed.append(time.perf_counter() - started)

    learning.learn_admission = timed_admission
    try:
        learning.learn_contract(Config(), sources)
    finally:
        learning.learn_admission = learn_admission
    return timed[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    try:
        tree = (options.tree or sglang_srt()).resolve()
    except CorpusUnavailable as exc:
        sys.exit(f"bench: {exc}")
    checks, admissions = [], []
    fresh = multiprocessing.get_context("spawn")
    for _ in range(options.runs):
        checks.append(cold_check(tree))
        with fresh.Pool(1) as worker:
            admissions.append(worker.apply(admission_time, (tree,)))
    check, admission = statistics.median(checks), statistics.median(admissions)
    print(f"tree: {tree}, {options.runs} rounds")
    print(f"cold check        {check:7.3f} s  (min {min(checks):.3f}, max {max(checks):.3f})")
    print(f"admission learned {admission:7.3f} s  (min {min(admissions):.3f}, max {max(admissions):.3f})")
    print(f"reach / cold check {admission / check:6.1%}")


if __name__ == "__main__":
    main()
