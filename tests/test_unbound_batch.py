"""KV105 unbound-batch: a batch built for a capture reaches a forward with its mark unset.

The binding methods come from the tree (`kvlint.learn.binding`), so most tests
learn the contract from a small tree shaped like upstream SGLang's: `KVLocPlan.bind`
sets the mark, `bind_replay` calls it on `self`, and the translator's
`bind_runner_slots` calls it through `own_plan`'s annotated return.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvlint.api.config import Config
from kvlint.face.cli import main
from kvlint.learn.contract import learn_contract
from kvlint.rules.write_loc.unbound_batch import UnboundBatch
from kvlint.testing import run_source

BATCH_CLASS = """\
from dataclasses import dataclass


@dataclass
class ForwardBatch:
    out_cache_loc: object = None
    out_cache_loc_is_physical: bool = False

    @classmethod
    def init_new(cls, batch, runner, plan):
        ret = ForwardBatch(out_cache_loc=batch.out_cache_loc)
        runner.attn_backend.init_forward_metadata(ret)
        return ret
"""
WRITE_LOC = """\
from dataclasses import dataclass


@dataclass
class KVWriteLoc:
    loc: object
    physical: bool = False

    @classmethod
    def for_batch(cls, batch):
        return cls(batch.out_cache_loc, physical=batch.out_cache_loc_is_physical)
"""
PLAN = """\
class KVLocPlan:
    def bind(self, batch, reader, *, cols=None):
        batch.out_cache_loc = self.write_ids(reader, cols=cols)
        batch.out_cache_loc_is_physical = batch.out_cache_loc is not None

    def bind_replay(self, batch, reader, *, slots):
        self.bind(batch, reader)
        batch.out_cache_loc = slots
"""
TRANSLATOR = """\
from eng.mem_cache.kv_loc_plan import KVLocPlan


class KVIndexTranslator:
    def own_plan(self, forward_batch, *, runner_slots=False) -> KVLocPlan:
        return KVLocPlan()

    def bind_runner_slots(self, forward_batch) -> None:
        self.own_plan(forward_batch, runner_slots=True).bind(forward_batch, self)
"""
# A layer boundary's `bind` takes a batch too, and marks nothing: its callers are no binding methods.
BOUNDARY = """\
class Boundary:
    def bind(self, forward_batch, context):
        return (forward_batch, context)

    def read(self, forward_batch, context):
        return self.inner.bind(forward_batch, context)
"""
TREE = {
    "eng/model_executor/forward_batch_info.py": BATCH_CLASS,
    "eng/mem_cache/kv_loc_plan.py": PLAN,
    "eng/mem_cache/kv_index_translator.py": TRANSLATOR,
    "eng/layers/boundary.py": BOUNDARY,
    "eng/mem_cache/memory_pool.py": WRITE_LOC,
}


def capture(body: str) -> str:
    return (
        "from eng.model_executor.forward_batch_info import ForwardBatch\n\n\n"
        "class CaptureRunner:\n"
        "    def capture_one(self, rows, model, ids, positions):\n"
        "        batch = ForwardBatch(out_cache_loc=rows.cache_slots)\n"
        + "".join(f"        {line}\n" for line in body.splitlines())
    )


def findings(source: str, tree: dict[str, str] = TREE) -> list:
    files = {**tree, "proj/capture.py": source}
    contract = learn_contract(Config(), {Path(path): text.encode() for path, text in files.items()})
    return [f for f in run_source(source, [UnboundBatch], contract=contract).findings if f.code == "KV105"]


def test_learning_finds_the_binding_methods_through_self_and_an_annotated_return() -> None:
    contract = learn_contract(Config(), {Path(path): text.encode() for path, text in TREE.items()})
    assert contract.batch_mark == "out_cache_loc_is_physical"
    assert contract.binding_methods == ("bind", "bind_replay", "bind_runner_slots")
    assert contract.source_of("binding-methods") == "learned from eng/mem_cache/kv_loc_plan.py:2"


def test_a_method_handing_a_batch_to_an_unrelated_bind_is_no_binding_method() -> None:
    contract = learn_contract(Config(), {Path(path): text.encode() for path, text in TREE.items()})
    assert "read" not in contract.binding_methods


def test_an_unbound_capture_batch_passed_to_a_forward_is_reported() -> None:
    (finding,) = findings(capture("model.forward(ids, positions, batch)"))
    assert (finding.line, finding.column) == (6, 17)
    assert "reaches `model.forward(ids, positions, batch)`" in finding.message
    assert "`out_cache_loc_is_physical` never set" in finding.message


def test_a_fork_whose_batch_has_no_mark_has_nothing_to_bind() -> None:
    # A fork before the unified pool: no write-loc class, no mark field, so no pool refuses its loc.
    unmarked = {**TREE, "eng/model_executor/forward_batch_info.py": BATCH_CLASS.replace(
        "    out_cache_loc_is_physical: bool = False\n", "")}
    for path in ("eng/mem_cache/kv_loc_plan.py", "eng/mem_cache/kv_index_translator.py", "eng/mem_cache/memory_pool.py"):
        del unmarked[path]
    assert findings(capture("model.forward(ids, positions, batch)"), unmarked) == []


def test_the_same_batch_bound_first_through_a_binding_method_of_another_file_is_silent() -> None:
    assert findings(capture("self.kv_index_translator.bind_runner_slots(batch)\nmodel.forward(ids, positions, batch)")) == []
    assert findings(capture("plan.bind_replay(batch, reader, slots=rows.cache_slots)\nmodel.forward(ids, positions, batch)")) == []


def test_a_projects_own_helper_calling_a_binding_method_on_an_unknown_receiver_binds() -> None:
    """`bind_runner_slots` has one definition in the tree, so a call of it binds whatever its receiver."""
    helper = "class Capture:\n    def bind_capture(self, batch):\n        self.translator.bind_runner_slots(batch)\n"
    tree = {**TREE, "proj/helpers.py": helper}
    contract = learn_contract(Config(), {Path(path): text.encode() for path, text in tree.items()})
    assert "bind_capture" in contract.binding_methods
    assert findings(capture("self.bind_capture(batch)\nmodel.forward(ids, positions, batch)"), tree) == []


def test_bound_only_after_the_forward_is_reported() -> None:
    assert findings(capture("model.forward(ids, positions, batch)\nself.kv_index_translator.bind_runner_slots(batch)"))


def test_a_batch_handed_to_a_method_calling_an_unrelated_bind_is_still_unbound() -> None:
    assert findings(capture("self.boundary.read(batch, ctx)\nmodel.forward(ids, positions, batch)"))


def test_the_mark_assigned_directly_is_silent() -> None:
    assert findings(capture("batch.out_cache_loc_is_physical = True\nmodel.forward(ids, positions, batch)")) == []


def test_the_mark_passed_in_the_constructor_is_silent() -> None:
    source = capture("model.forward(ids, positions, batch)").replace(
        "out_cache_loc=rows.cache_slots)", "out_cache_loc=rows.cache_slots, out_cache_loc_is_physical=True)"
    )
    assert findings(source) == []


def test_a_construction_in_the_batch_classs_own_classmethod_is_silent() -> None:
    assert findings(BATCH_CLASS) == []


def test_a_construction_in_the_tbo_child_builder_is_silent() -> None:
    source = (
        "def filter_batch(batch, runner):\n"
        "    child = ForwardBatch(out_cache_loc=batch.out_cache_loc[:4])\n"
        "    runner.forward(child)\n"
    )
    assert findings(source) == []
    assert findings(source.replace("filter_batch", "split_batch"))


def test_a_batch_returned_or_stored_without_use_is_silent() -> None:
    assert findings(capture("return batch")) == []
    assert findings(capture("self.capture_batch = batch")) == []


def test_a_batch_rebound_to_another_value_is_not_followed() -> None:
    assert findings(capture("batch = self.prepare(batch)\nmodel.forward(ids, positions, batch)")) == []


def test_a_nested_run_once_forward_is_reported_only_when_nothing_binds_the_batch() -> None:
    run_once = "def run_once():\n    return model.forward(ids, positions, batch)\nself.graph.capture(run_once)"
    assert findings(capture(run_once))
    assert findings(capture("self.kv_index_translator.bind_runner_slots(batch)\n" + run_once)) == []
    assert findings(capture(run_once + "\nself.kv_index_translator.bind_runner_slots(batch)")) == []


def test_a_context_manager_named_after_forward_is_no_forward() -> None:
    assert findings(capture("with forward_context(ctx, forward_batch=batch):\n    pass")) == []


def test_kvlint_check_reports_it_across_the_tree_and_contract_lists_where_bindings_were_learned(
    tmp_path: Path,
) -> None:
    for path, text in {**TREE, "proj/capture.py": capture("model.forward(ids, positions, batch)")}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "pyproject.toml").write_text("[tool.kvlint]\n")
    runner = CliRunner()
    result = runner.invoke(main, ["check", "--no-cache", "--select", "KV105", "--format", "json", str(tmp_path)])
    report = json.loads(result.output)
    assert [(Path(f["path"]).name, f["line"]) for f in report["findings"]] == [("capture.py", 6)]
    assert result.exit_code == 1
    listed = runner.invoke(main, ["contract", str(tmp_path)]).output
    (line,) = [line for line in listed.splitlines() if line.startswith("binding-methods")]
    assert '["bind", "bind_replay", "bind_runner_slots"]' in line
    assert "[found]" in line and "kv_loc_plan.py:2" in line
