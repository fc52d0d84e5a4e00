"""Facts across functions and files (the project index): multi-file trees, one fact each."""

from __future__ import annotations

import gc
import subprocess
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

from kvlint.analysis.project_index import ModuleMap
from kvlint.api.config import load_config
from kvlint.api.types import Applicability, Finding
from kvlint.processes import pool
from kvlint.running import engine, project_facts
from kvlint.running.engine import RunOptions, run

T = TypeVar("T")

BASE = (
    "class AttnBase:\n"
    "    def _kv_write_loc(self, forward_batch):\n"
    "        if self.capturing:\n"
    "            return self.capture_loc\n"
    "        return forward_batch.out_cache_loc\n"
    "\n"
    "    def _store(self, layer, loc, k, v):\n"
    "        self.pool.set_kv_buffer(layer, loc, k, v)\n"
)
SUB = (
    "from eng.attn.base import AttnBase\n\n\n"
    "class MLA(AttnBase):\n"
    "    def forward(self, layer, forward_batch, k, k_rope):\n"
    "        pool = forward_batch.token_to_kv_pool\n"
    "        pool.set_mla_kv_buffer(layer, self._kv_write_loc(forward_batch), k, k_rope)\n"
)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check(root: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[Finding]:
    monkeypatch.chdir(root)
    options.setdefault("jobs", 1)
    options.setdefault("paths", (Path("."),))
    return run(load_config(), RunOptions(**options)).findings


def codes(findings: list[Finding]) -> list[tuple[str, str, int]]:
    return [(finding.code, finding.path, finding.line) for finding in findings]


def test_an_inherited_helper_in_another_file_returning_the_raw_loc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": SUB})
    [finding] = check(tmp_path, monkeypatch)
    assert (finding.code, finding.path, finding.line) == ("KV101", "eng/attn/mla.py", 7)
    assert "`AttnBase._kv_write_loc`" in finding.message and "eng/attn/base.py:5" in finding.message
    # One return is a capture buffer: rewriting the helper is not safe, and the message says why.
    assert finding.fix is None and "also returns other values" in finding.message


def test_an_override_that_marks_wins_over_the_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = SUB + (
        "\n    def _kv_write_loc(self, forward_batch):\n"
        "        return KVWriteLoc.for_batch(forward_batch)\n"
    )
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": override})
    assert check(tmp_path, monkeypatch) == []


def test_a_base_reached_through_an_intermediate_class_without_trigger_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    middle = "from eng.attn.base import AttnBase\n\n\nclass Middle(AttnBase):\n    page_size = 1\n"
    sub = SUB.replace("from eng.attn.base import AttnBase", "from eng.attn.middle import Middle").replace(
        "MLA(AttnBase)", "MLA(Middle)"
    )
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/middle.py": middle, "eng/attn/mla.py": sub})
    assert codes(check(tmp_path, monkeypatch)) == [("KV101", "eng/attn/mla.py", 7)]


@pytest.mark.parametrize(
    "imports, call",
    [
        ("from eng.helpers import loc_of", "loc_of(fb)"),
        ("import eng.helpers as h", "h.loc_of(fb)"),
        ("from eng import helpers", "helpers.loc_of(fb)"),
        ("from .helpers import loc_of", "loc_of(fb)"),
    ],
)
def test_an_imported_module_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, imports: str, call: str) -> None:
    helper = "def loc_of(fb):\n    return fb.out_cache_loc\n"
    caller = f"{imports}\n\n\ndef write(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, {call}, k, v)\n"
    write(tmp_path, {"eng/__init__.py": "", "eng/helpers.py": helper, "eng/caller.py": caller})
    finding, in_helper = check(tmp_path, monkeypatch)
    assert (finding.path, finding.line) == ("eng/caller.py", 5)
    assert "`loc_of`" in finding.message and "eng/helpers.py:2" in finding.message
    # Every return is raw and every caller hands the result to a door: the fix is in the helper.
    assert finding.fix is None and "the fix is in the helper" in finding.message
    assert (in_helper.path, in_helper.line) == ("eng/helpers.py", 2)
    assert in_helper.fix is not None and in_helper.fix.applicability == Applicability.SAFE
    assert in_helper.fix.replacement == "KVWriteLoc.for_batch(fb)"


HELPER_MODULE = "def loc_of(fb, n=None):\n    if n is None:\n        return fb.out_cache_loc\n    return fb.out_cache_loc[:n]\n"
DOOR_CALLER = (
    "from eng.helpers import loc_of\n\n\n"
    "def write(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, loc_of(fb), k, v)\n"
)


def test_the_helper_return_fix_rewrites_the_helper_and_silences_its_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = DOOR_CALLER.replace("def write(", "def write_again(").replace("loc_of(fb), k, v)", "loc_of(fb, 4), k, v)")
    write(tmp_path, {"eng/helpers.py": HELPER_MODULE, "eng/caller.py": DOOR_CALLER, "eng/other.py": other})
    found = check(tmp_path, monkeypatch)
    assert codes(found) == [("KV101", "eng/caller.py", 5), ("KV101", "eng/helpers.py", 3), ("KV101", "eng/helpers.py", 4),
                            ("KV101", "eng/other.py", 5)]
    monkeypatch.chdir(tmp_path)
    result = run(load_config(), RunOptions(paths=(Path("."),), fix=Applicability.SAFE, jobs=1))
    assert set(result.fixed) == {"eng/helpers.py"}
    fixed = result.fixed["eng/helpers.py"][1].decode()
    assert "return KVWriteLoc.for_batch(fb)\n" in fixed
    assert "return KVWriteLoc(fb.out_cache_loc[:n], id_space=fb.out_cache_loc_id_space)\n" in fixed
    (tmp_path / "eng/helpers.py").write_text(fixed)
    assert check(tmp_path, monkeypatch) == []


def test_no_helper_return_fix_when_a_caller_uses_the_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = "from eng.helpers import loc_of\n\n\ndef count(fb):\n    return loc_of(fb).shape[0]\n"
    write(tmp_path, {"eng/helpers.py": HELPER_MODULE, "eng/caller.py": DOOR_CALLER, "eng/other.py": other})
    [finding] = check(tmp_path, monkeypatch)
    assert finding.path == "eng/caller.py" and finding.fix is None
    assert "one does" in finding.message


def test_a_chain_of_three_helpers_across_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "eng/a.py": "from eng.b import second\n\n\ndef first(fb):\n    return second(fb)\n",
        "eng/b.py": "from eng.c import third\n\n\ndef second(fb):\n    return third(fb)\n",
        "eng/c.py": "def third(fb):\n    loc = fb.out_cache_loc\n    return loc\n",
        "eng/use.py": "from eng.a import first\n\n\ndef w(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, first(fb), k, v)\n",
    })
    [finding] = check(tmp_path, monkeypatch)
    assert finding.path == "eng/use.py" and "`first`" in finding.message and "eng/c.py:3" in finding.message


def test_recursion_and_cycles_terminate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "eng/rec.py": (
            "def a(fb, n):\n    return b(fb, n)\n\n\n"
            "def b(fb, n):\n    if n:\n        return a(fb, n - 1)\n    return fb.out_cache_loc\n\n\n"
            "def loop(fb):\n    return loop(fb)\n"
        ),
        "eng/use.py": (
            "from eng.rec import a, loop\n\n\n"
            "def w(pool, layer, fb, k, v):\n"
            "    pool.set_kv_buffer(layer, a(fb, 3), k, v)\n"
            "    pool.set_kv_buffer(layer, loop(fb), k, v)\n"
        ),
    })
    assert codes(check(tmp_path, monkeypatch)) == [("KV101", "eng/use.py", 5)]


def test_a_callee_that_cannot_be_resolved_is_no_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        # Two files could be `helpers`: ambiguous, so unresolved; `elsewhere` is not in the tree.
        "a/helpers.py": "def loc_of(fb):\n    return fb.out_cache_loc\n",
        "b/helpers.py": "def loc_of(fb):\n    return fb.out_cache_loc\n",
        "use.py": (
            "from helpers import loc_of\nfrom elsewhere import other\n\n\n"
            "def w(pool, layer, fb, k, v):\n"
            "    pool.set_kv_buffer(layer, loc_of(fb), k, v)\n"
            "    pool.set_kv_buffer(layer, other(fb), k, v)\n"
            "    pool.set_kv_buffer(layer, self_less(fb), k, v)\n"
        ),
    })
    assert check(tmp_path, monkeypatch) == []


def test_a_loc_parameter_that_reaches_a_door(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = SUB.replace(
        "pool.set_mla_kv_buffer(layer, self._kv_write_loc(forward_batch), k, k_rope)",
        "self._store(layer, forward_batch.out_cache_loc, k, k_rope)",
    )
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": sub})
    [finding] = check(tmp_path, monkeypatch)
    assert (finding.code, finding.line, finding.column) == ("KV101", 7, 28)
    assert "`set_kv_buffer` at eng/attn/base.py:8" in finding.message
    assert finding.fix is not None and finding.fix.applicability == Applicability.SAFE
    assert finding.fix.replacement == "KVWriteLoc.for_batch(forward_batch)"


def test_a_loc_parameter_the_helper_also_uses_as_a_tensor_has_an_unsafe_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = BASE.replace("        self.pool.set_kv_buffer(layer, loc, k, v)\n",
                        "        n = loc.shape[0]\n        self.pool.set_kv_buffer(layer, loc, k[:n], v)\n")
    sub = SUB.replace(
        "pool.set_mla_kv_buffer(layer, self._kv_write_loc(forward_batch), k, k_rope)",
        "self._store(layer, loc=forward_batch.out_cache_loc, k=k, v=k_rope)",
    )
    write(tmp_path, {"eng/attn/base.py": base, "eng/attn/mla.py": sub})
    [finding] = check(tmp_path, monkeypatch)
    assert finding.fix is not None and finding.fix.applicability == Applicability.UNSAFE
    assert "also uses `loc`" in finding.message


PAGED_HELPERS = (
    "def key_cache_of(pool, layer):\n"
    "    return pool.get_key_buffer(layer.layer_id)\n\n\n"
    "def value_rows_of(pool, layer):\n"
    "    return pool.get_value_buffer(layer.layer_id).detach()[:, :, :512]\n"
)


def test_a_helper_returning_paged_kv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {
        "eng/pools.py": PAGED_HELPERS,
        "eng/backend.py": (
            "from eng.pools import key_cache_of, value_rows_of\n\n\n"
            "class Backend:\n"
            "    def forward(self, layer, pool):\n"
            "        k = key_cache_of(pool, layer)\n"
            "        k_pages = k.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"
            "        v_pages = value_rows_of(pool, layer).view(-1, self.page_size, 1, 512)\n"
            "        rows = key_cache_of(pool, layer).reshape(-1, 8)\n"
            "        return k_pages, v_pages, rows\n"
        ),
    })
    found = check(tmp_path, monkeypatch)
    assert codes(found) == [("KV201", "eng/backend.py", 7), ("KV201", "eng/backend.py", 8), ("KV202", "eng/backend.py", 9)]
    direct, sliced, copy = found
    assert "`key_cache_of`" in direct.message and "eng/pools.py:2" in direct.message
    # The helper returns the accessor's own `(slots, ...)` result: the same fix as a direct view.
    assert direct.fix is not None and "paged_kv_view" in direct.fix.replacement
    # A slice of a tensor-kept buffer: paged KV still, but what its dim 0 holds is not known, so no fix.
    assert "`value_rows_of`" in sliced.message and "eng/pools.py:6" in sliced.message and sliced.fix is None
    assert "`key_cache_of`" in copy.message


@pytest.mark.parametrize(
    "kept",
    ["kv.to(q.dtype)", "kv.type(torch.bfloat16)", "kv.detach()", "kv.requires_grad_()",
     "kv.view(torch.uint8)", "torch.Tensor.to(kv, q.dtype)"],
)
def test_tensor_keeping_calls_keep_the_paged_kv_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: str) -> None:
    write(tmp_path, {"backend.py": (
        "import torch\n\n\n"
        "def forward(q, layer, pool, page_size):\n"
        "    kv = pool.get_key_buffer(layer.layer_id)\n"
        f"    kv_cache = {kept}\n"
        "    return kv_cache[:, :, :512].view(-1, page_size, 1, 512)\n"
    )})
    assert codes(check(tmp_path, monkeypatch)) == [("KV201", "backend.py", 7)]


def test_a_call_that_is_not_tensor_keeping_ends_the_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"backend.py": (
        "def forward(q, layer, pool, page_size):\n"
        "    kv_cache = pool.get_key_buffer(layer.layer_id).clone()\n"
        "    return kv_cache.view(-1, page_size, 1, 512)\n"
    )})
    assert check(tmp_path, monkeypatch) == []


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


TBO_BATCH = (
    "from dataclasses import dataclass\n\n\n"
    "@dataclass\nclass ForwardBatch:\n    out_cache_loc: object\n    out_cache_loc_id_space: str = 'virtual'\n"
)
TBO_BUILDER = (
    "from eng.batch import ForwardBatch\n\n\n"
    "def filter_batch(batch, *, start, end):\n"
    "    output_dict = dict()\n"
    "    output_dict['out_cache_loc'] = batch.out_cache_loc[start:end]\n"
    "    return ForwardBatch(**output_dict)\n"
)


@pytest.mark.parametrize("cache", [True, False])
def test_changed_and_hook_runs_report_for_a_file_what_the_whole_tree_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: bool
) -> None:
    """The helper, the batch class's builder and the contract live in files `--changed` leaves out."""
    write(tmp_path, {
        "pyproject.toml": "[tool.kvlint]\n",
        "eng/attn/base.py": BASE,
        "eng/attn/mla.py": SUB,
        "eng/batch.py": TBO_BATCH,
        "eng/tbo.py": TBO_BUILDER,
        "eng/pool.py": "class KVWriteLoc:\n    loc: object\n    physical: bool\n",
    })
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    whole = check(tmp_path, monkeypatch, cache=cache)
    assert {finding.code for finding in whole} == {"KV101", "KV301"}
    for changed in ("eng/attn/mla.py", "eng/batch.py"):
        with open(tmp_path / changed, "a") as handle:
            handle.write("# touched\n")
        expected = [f.to_json() for f in check(tmp_path, monkeypatch, cache=cache) if f.path == changed]
        assert expected, changed
        changed_run = check(tmp_path, monkeypatch, cache=cache, changed="HEAD")
        assert [f.to_json() for f in changed_run] == expected
        # The pre-commit hook names the file: the same findings.
        hook = check(tmp_path, monkeypatch, cache=cache, paths=(Path(changed),))
        assert [f.to_json() for f in hook] == expected
        _git(tmp_path, "checkout", "--", changed)


def test_a_helper_edited_to_mark_invalidates_its_callers_cached_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": SUB})
    assert len(check(tmp_path, monkeypatch, cache=True)) == 1
    assert len(check(tmp_path, monkeypatch, cache=True)) == 1
    marked = BASE.replace("return forward_batch.out_cache_loc", "return KVWriteLoc.for_batch(forward_batch)")
    (tmp_path / "eng/attn/base.py").write_text(marked)
    # mla.py did not change; its result rested on the helper's fact, which did.
    assert check(tmp_path, monkeypatch, cache=True) == []


def test_the_index_summarised_in_worker_processes_gives_the_same_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough seeded files to summarise in workers: the views, so the findings, are those of one process."""
    files = {"eng/attn/base.py": BASE}
    for n in range(12):
        files[f"eng/attn/sub{n}.py"] = SUB.replace("class MLA", f"class MLA{n}")
    write(tmp_path, files)
    one = codes(check(tmp_path, monkeypatch, jobs=1))
    assert len([code for code in one if code[0] == "KV101"]) == 12
    summarised: list[int] = []

    mapped = pool.RoundPool.map

    def counted(rounds: pool.RoundPool, function: Any, arguments: list[Any]) -> list[Any]:
        summarised.append(len(arguments))
        return mapped(rounds, function, arguments)

    monkeypatch.setattr(pool.RoundPool, "map", counted)
    assert codes(check(tmp_path, monkeypatch, jobs=2)) == one
    # The first round reads the 13 seeded files; no later round reads another.
    assert [count for count in summarised if count] == [13] and pool.MIN_FILES_FOR_WORKERS <= 13


def test_the_files_a_later_round_reads_are_summarised_in_workers_ahead_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten files without a seed word name the seeded helper: the second round reads them, in workers."""
    files = {"eng/c.py": "def third(fb):\n    loc = fb.out_cache_loc\n    return loc\n"}
    for n in range(10):
        files[f"eng/mid{n}.py"] = f"from eng.c import third\n\n\ndef second{n}(fb):\n    return third(fb)\n"
        files[f"eng/use{n}.py"] = (
            f"from eng.mid{n} import second{n}\n\n\n"
            f"def w(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, second{n}(fb), k, v)\n"
        )
    write(tmp_path, files)
    one = codes(check(tmp_path, monkeypatch, jobs=1))
    assert len(one) == 10
    summarised: list[set[str]] = []

    mapped = pool.RoundPool.map
    pools: list[int] = []

    in_round = False

    def recorded(rounds: pool.RoundPool, function: Any, arguments: list[Any]) -> list[Any]:
        nonlocal in_round
        summarised.append({args[0] for args in arguments})
        in_round = True
        try:
            return mapped(rounds, function, arguments)
        finally:
            in_round = False

    class CountedPool(ProcessPoolExecutor):
        """Counts the pools the index's rounds start (the check's own pool comes after)."""

        def __init__(self, max_workers: int) -> None:
            if in_round:
                pools.append(max_workers)
            super().__init__(max_workers=max_workers)

    monkeypatch.setattr(pool.RoundPool, "map", recorded)
    monkeypatch.setattr(pool, "ProcessPoolExecutor", CountedPool)
    assert codes(check(tmp_path, monkeypatch, jobs=2)) == one
    middle = {f"eng/mid{n}.py" for n in range(10)}
    assert middle in summarised and all(not (files & middle) for files in summarised if files != middle)
    # The round of the seeded file and the round of the ten middle files: one pool, started by the larger.
    assert len([files for files in summarised if files]) >= 2 and pools == [2]


def test_work_mapped_over_a_broken_pool_is_done_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __init__(self, max_workers: int) -> None:
            pass

        def map(self, *args: object, **kwargs: object) -> list[object]:
            raise BrokenProcessPool("a worker died")

        def shutdown(self, wait: bool) -> None:
            pass

    monkeypatch.setattr(pool, "ProcessPoolExecutor", Broken)
    arguments = [(n, n + 1) for n in range(10)]
    with pool.RoundPool(jobs=2) as rounds:
        assert rounds.map(pow, arguments) == [pow(*args) for args in arguments]
        # A later round does not try the broken pool again.
        monkeypatch.setattr(pool, "ProcessPoolExecutor", None)
        assert rounds.map(pow, arguments) == [pow(*args) for args in arguments]


def test_the_index_hands_the_collector_back_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The index pauses the collector while it builds (its trees make no cycle); the check after it
    # makes LibCST's trees, which do, so it must find the collector on again.
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": SUB})
    collecting_at_check = _at_check(monkeypatch, gc.isenabled)
    assert codes(check(tmp_path, monkeypatch)) == [("KV101", "eng/attn/mla.py", 7)]
    assert collecting_at_check == [True] and gc.isenabled()


@pytest.mark.parametrize("cache", [False, True])
def test_what_the_run_keeps_is_frozen_before_the_checks_and_handed_back_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: bool
) -> None:
    # The contract and the index live to the run's end: out of the collector's walks while the
    # files are checked (and before workers fork), back in them once the run is over.
    write(tmp_path, {"eng/attn/base.py": BASE, "eng/attn/mla.py": SUB})
    frozen_at_check = _at_check(monkeypatch, gc.get_freeze_count)
    assert codes(check(tmp_path, monkeypatch, cache=cache)) == [("KV101", "eng/attn/mla.py", 7)]
    assert frozen_at_check[0] > 0 and gc.get_freeze_count() == 0


def _at_check(monkeypatch: pytest.MonkeyPatch, read: Callable[[], T]) -> list[T]:
    """What `read()` gives each time the run starts checking files."""
    seen: list[T] = []
    real_check_all = engine.check_all

    def recording_check_all(*args: Any, **kwargs: Any) -> Any:
        seen.append(read())
        return real_check_all(*args, **kwargs)

    monkeypatch.setattr(engine, "check_all", recording_check_all)
    return seen


def test_a_module_name_is_the_one_file_its_longest_trailing_parts_match() -> None:
    modules = ModuleMap(["sglang/srt/layers/x.py", "other/layers/x.py", "sglang/srt/mem/pool.py",
                         "sglang/srt/mem/__init__.py", "nn.py", "a/utils.py", "b/utils.py"])
    assert modules.path_of("sglang.srt.layers.x") == "sglang/srt/layers/x.py"
    assert modules.path_of("pkg.sglang.srt.layers.x") == "sglang/srt/layers/x.py"
    assert modules.path_of("sglang.srt.mem.pool") == "sglang/srt/mem/pool.py"
    assert modules.path_of("mem.pool") == "sglang/srt/mem/pool.py"
    assert modules.path_of("sglang.srt.mem") == "sglang/srt/mem/__init__.py"
    # Two files end in `layers.x`: ambiguous, never a guess; two parts at least, so not `nn.py`.
    assert modules.path_of("layers.x") is None
    assert modules.path_of("torch.nn") is None
    assert modules.path_of("nn") == "nn.py"
    assert modules.path_of("utils") is None and modules.path_of("a.utils") == "a/utils.py"
    assert modules.path_of("") is None and modules.path_of("x.y.missing") is None
