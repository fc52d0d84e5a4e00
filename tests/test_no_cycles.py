"""A file's check leaves no reference cycle: its LibCST tree is freed as soon as the check ends.

A cycle through the tree (an analysis referring back to the context that caches it, a
recursive closure holding the walk's path) kept the whole tree alive until the cyclic
collector's next pass, which then walked all of it: most of the collector's time in a
cold run over sglang/srt.
"""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.running.engine import RunOptions, run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_checking_the_examples_leaves_no_libcst_node_to_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    gc.collect()
    gc.disable()
    try:
        result = run(load_config(), RunOptions(paths=(Path("examples"),), jobs=1, cache=False))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(item).__module__ for item in gc.garbage if type(item).__module__.startswith(("libcst", "kvlint"))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # The run did check files with every kind of rule, layout and data flow included.
    assert {finding.code for finding in result.findings} >= {"KV101", "KV102", "KV201", "KV202", "KV301"}
    assert left == []
