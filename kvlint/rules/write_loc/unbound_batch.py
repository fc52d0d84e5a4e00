"""KV105 unbound-batch."""

from __future__ import annotations

import ast
import libcst as cst

from kvlint.analysis.index import module_index
from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Rule
from kvlint.api.types import Invalid, Severity, Valid
from kvlint.rules.write_loc._batch_flow import BatchWalk, is_forward
from kvlint.rules.write_loc._candidates import encoded, file_units

# Upstream SGLang's spelling: the binding methods it defines, and its batch mark.
_UPSTREAM = {"binding-methods": "bind,bind_runner_slots", "batch-mark": "out_cache_loc_is_physical"}


class UnboundBatch(Rule):
    """A batch built outside the engine's own construction path reaches a forward with its mark unset.

    ## What it does
    Flags a construction of the tree's batch class with a write loc
    (`ForwardBatch(..., out_cache_loc=..., ...)`, the class from
    `[tool.kvlint.tbo] batch-class`, the loc from `loc-attributes`) when, in the
    function that builds it, the batch reaches a write door (a door call with
    the batch in its arguments) or a forward (a call handed the batch whose
    callee is named `forward`, `forward_*`, `*_forward` or
    `init_forward_metadata*`, or a model called as a module, `model` or `*_model`;
    a context manager such as `forward_context` aside) before its mark is set or bound: not passed as the
    batch mark keyword (`out_cache_loc_is_physical`, or
    `out_cache_loc_id_space`), not assigned (`batch.<mark> = ...`), and not
    handed to one of the tree's binding methods (learned: functions that set
    the mark on a parameter, such as `KVLocPlan.bind`, and those calling them,
    such as `bind_replay` and `bind_runner_slots`; `kvlint contract` lists
    them). The engine's own path is left alone: the batch class's own methods
    (`ForwardBatch.init_new`) and the two-batch-overlap child builder
    (`filter_batch`). A batch only returned or stored is not reported: its mark
    may be bound elsewhere.

    ## Why is this bad?
    The batch's mark keeps its default, "unmarked", so every loc taken from it
    (`KVWriteLoc.for_batch(batch)`) says its ids are untranslated. A unified
    pool's write door refuses it: a CUDA-graph capture over the runner's own
    slot buffer fails at capture, and with the check off the write goes through
    ids nobody vouched for.

    ## Example
    ```python
    def capture(self, rows, model, ids, positions):
        batch = ForwardBatch(forward_mode=mode, batch_size=bs, out_cache_loc=rows.cache_slots)
        model.forward(ids, positions, batch)
    ```

    ## Use instead
    ```python
    def capture(self, rows, model, ids, positions):
        batch = ForwardBatch(forward_mode=mode, batch_size=bs, out_cache_loc=rows.cache_slots)
        self.kv_index_translator.bind_runner_slots(batch)
        model.forward(ids, positions, batch)
    ```

    ## Fix safety
    No fix: which plan binds the batch (the runner's own slots, its own
    iteration's plan, or the live iteration's plan it replays) is the author's
    decision, and so is the mark a hand-built loc deserves.

    ## Options
    `batch-mark`, `loc-attributes`, `write-doors` in `[tool.kvlint.contract]`;
    `batch-class`, `child-builder` in `[tool.kvlint.tbo]`.
    """

    code = "KV105"
    name = "unbound-batch"
    severity = Severity.ERROR
    fix_applicability = None

    VALID = [
        # Bound through a learned binding method before the forward.
        Valid(
            "def capture(self, rows, model, ids, positions):\n"
            "    batch = ForwardBatch(batch_size=bs, out_cache_loc=rows.cache_slots)\n"
            "    self.kv_index_translator.bind_runner_slots(batch)\n"
            "    model.forward(ids, positions, batch)\n",
            contract=_UPSTREAM,
        ),
        # The mark assigned directly, or passed to the constructor.
        Valid(
            "def capture(self, rows, runner):\n"
            "    batch = ForwardBatch(batch_size=bs, out_cache_loc=rows.cache_slots)\n"
            "    batch.out_cache_loc_is_physical = True\n"
            "    runner.forward(batch)\n",
            contract=_UPSTREAM,
        ),
        Valid(
            "def capture(self, rows, runner):\n"
            "    batch = ForwardBatch(out_cache_loc=rows.cache_slots, out_cache_loc_is_physical=True)\n"
            "    runner.forward(batch)\n",
            contract=_UPSTREAM,
        ),
        # The engine's own construction path: the batch class's classmethod binds its plan itself.
        Valid(
            "class ForwardBatch:\n"
            "    @classmethod\n"
            "    def init_new(cls, batch, runner):\n"
            "        ret = ForwardBatch(out_cache_loc=batch.out_cache_loc)\n"
            "        runner.attn_backend.init_forward_metadata(ret)\n"
            "        return ret\n",
            contract=_UPSTREAM,
        ),
        # Returned without reaching a door or a forward: its mark may be bound by the caller.
        Valid(
            "def build(self, rows):\n"
            "    batch = ForwardBatch(out_cache_loc=rows.cache_slots)\n"
            "    return batch\n",
            contract=_UPSTREAM,
        ),
        # No write loc to mark.
        Valid(
            "def idle(self, runner):\n"
            "    batch = ForwardBatch(out_cache_loc=None)\n"
            "    runner.forward(batch)\n",
        ),
    ]
    INVALID = [
        Invalid(
            "def capture(self, rows, model, ids, positions):\n"
            "    batch = ForwardBatch(forward_mode=mode, batch_size=bs, out_cache_loc=rows.cache_slots)\n"
            "    model.forward(ids, positions, batch)\n",
            line=2,
            column=13,
            contract=_UPSTREAM,
        ),
        # Bound only after the forward ran.
        Invalid(
            "def capture(self, rows, runner):\n"
            "    self.batch = ForwardBatch(out_cache_loc=rows.cache_slots)\n"
            "    runner.forward(self.batch)\n"
            "    self.kv_index_translator.bind_runner_slots(self.batch)\n",
            contract=_UPSTREAM,
        ),
        # Straight to a write door, in the seed's spelling of the mark.
        Invalid(
            "def warm(pool, layer, rows, k, v):\n"
            "    batch = ForwardBatch(out_cache_loc=rows.cache_slots)\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(batch), k, v)\n",
        ),
        # A model called as a module runs its forward (an out-of-tree draft harness's rows).
        Invalid(
            "def draft_rows(model, ids, positions, slots):\n"
            "    batch = ForwardBatch(batch_size=4, out_cache_loc=slots)\n"
            "    return model.model(ids, positions, batch)\n",
            contract=_UPSTREAM,
        ),
        # Inside the graph's `run_once`, with nothing in the builder binding it.
        Invalid(
            "def capture(self, rows, ids, positions):\n"
            "    batch = ForwardBatch(out_cache_loc=rows.cache_slots)\n"
            "    def run_once():\n"
            "        return self.model_runner.model.forward(ids, positions, batch)\n"
            "    self._capture_graph(run_once)\n",
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return ((contract.batch_class,), contract.loc_attributes)

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        """A unit holding a construction of the batch class with a write loc and no mark keyword, and a
        call the batch could reach (a door, a forward)."""
        if not contract.has("batch-mark"):
            # A tree whose batch has no mark (a fork before the unified pool) has nothing to bind.
            return False
        reaching = set(contract.door_loc_index)
        for unit in file_units(data, tree):
            if not unit.holds_any(encoded([contract.batch_class])):
                continue
            nodes = unit.nodes()
            if not any(name in reaching or is_forward(name) for name in nodes.calls):
                continue
            names = {contract.batch_class}
            names.update(
                alias.asname for alias in nodes.imports
                if alias.asname and alias.name.rsplit(".", 1)[-1] == contract.batch_class
            )
            if any(_builds_with_loc(call, contract) for name in names for call in nodes.calls.get(name, ())):
                return True
        return False

    def check(self, ctx: FileContext) -> None:
        contract = ctx.contract
        if not contract.has("batch-mark"):
            return
        index = module_index(ctx)
        names = {contract.batch_class}
        names.update(local for local, origin in index.imports.items() if origin.rsplit(".", 1)[-1] == contract.batch_class)
        for site in index.calls(*sorted(names)):
            function, call = site.function, site.call
            if function is None or not _with_loc(call, contract):
                continue
            # The engine's own path: the class's own methods and the two-batch-overlap child builder.
            if (site.klass is not None and site.klass.name.value == contract.batch_class) or (
                function.name.value == contract.child_builder
            ):
                continue
            reached = BatchWalk(call, contract).first_unbound_reach(function)
            if reached is None:
                continue
            loc = next(arg for arg in call.args if arg.keyword is not None and arg.keyword.value in contract.loc_attributes)
            assert loc.keyword is not None
            binders = ", ".join(f"`{name}`" for name in contract.binding_methods[:3])
            how = f"bind its write plan ({binders}) or set" if binders else "set"
            ctx.report(
                call,
                f"`{contract.batch_class}(...)` with `{loc.keyword.value}={ctx.code_for(loc.value)}` reaches `{ctx.code_for(reached)}` with "
                f"`{contract.batch_mark}` never set: a unified pool's write door refuses its unmarked loc; "
                f"{how} `{contract.batch_mark}` first",
            )


def _with_loc(call: cst.Call, contract: Contract) -> bool:
    """A construction with a write loc and neither the mark keyword nor a `**mapping` that may hold it."""
    has_loc = False
    for arg in call.args:
        if arg.star == "**" or (arg.keyword is not None and arg.keyword.value == contract.batch_mark):
            return False
        if arg.keyword is not None and arg.keyword.value in contract.loc_attributes:
            has_loc = not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return has_loc


def _builds_with_loc(call: ast.Call, contract: Contract) -> bool:
    """`_with_loc` on CPython's tree."""
    has_loc = False
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg == contract.batch_mark:
            return False
        if keyword.arg in contract.loc_attributes:
            has_loc = not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None)
    return has_loc
