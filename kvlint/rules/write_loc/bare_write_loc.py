"""KV101 bare-write-loc."""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Replacement, Rule
from kvlint.analysis.index import module_index
from kvlint.rules.write_loc._api_words import api_gaps, gap_message, lost_mark_phrase, made_unsafe, with_gaps
from kvlint.rules.write_loc._raw_loc import (
    RawLoc,
    factory_for,
    loc_argument,
    marked_call,
    raw_loc,
    raw_loc_batch,
    unfit_form_clause,
)
from kvlint.api.types import Applicability, Invalid, Severity, Valid
from kvlint.rules.write_loc._door_classes import door_call, refusal_ruled_out
from kvlint.rules.write_loc._candidates import MayBeRawLoc, ast_loc_argument, encoded, file_units, helper_arguments
from kvlint.rules.write_loc._through_helpers import door_reports, parameter_reports, return_reports


class BareWriteLoc(Rule):
    """A write door receives a batch's raw `out_cache_loc`, losing its id-space mark.

    ## What it does
    Flags a KV write door (`set_kv_buffer`, `set_mla_kv_buffer`, `_set_kv_buffer`,
    or any door configured in `[tool.kvlint.contract] write-doors`) whose loc
    argument is a batch's raw loc: `forward_batch.out_cache_loc`, a slice of it,
    the keyword `loc=forward_batch.out_cache_loc`, or a local name every
    reaching definition of which is one of those (including the cross-attention
    idiom `fb.out_cache_loc if not layer.is_cross_attention else
    fb.encoder_out_cache_loc`). A name with any other definition (a translator
    call, a parameter) is not flagged. Nor is a call none of whose reachable
    definitions (by the classes its receiver can be) may refuse a bare loc:
    each takes a tensor, or sits in a pool class that keeps the tree's gate
    off with every subclass (`ungated-classes` in `kvlint contract`).

    Through helpers, across functions and files (the project index): a door's
    loc that is a call of a helper which may return the batch's raw loc on
    some path (`set_mla_kv_buffer(layer, self._kv_write_loc(fb), ...)` with
    `_kv_write_loc` inherited from a base class in another file), and a helper
    call passing the batch's raw loc as a parameter that reaches a door's loc
    unmarked through any chain of helpers (`self._store(layer,
    fb.out_cache_loc, k, v)`). Both are reported in the caller, at the value
    as it appears there; the message names the helper and the file:line of
    the fact: where the raw loc is returned, or which door the parameter
    reaches. Callees are module functions, `from x import f` / `import x`
    across files, and `self`/`cls`/`super()` methods through the class
    hierarchy (an override in the subclass wins); a callee kvlint cannot
    resolve is no finding.

    ## Why is this bad?
    Under the token-major unified pool a virtual token id is in range and by
    value the same kind of integer as a physical one, so the pool cannot tell a
    skipped translation from a translated loc. The batch carries the mark
    (`out_cache_loc_id_space`); a bare tensor drops it, and a unified pool's
    write door refuses an unmarked loc (or, with its check off, writes through
    ids it cannot vouch for).

    ## Example
    ```python
    forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
    ```

    ## Use instead
    ```python
    forward_batch.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)
    ```

    ## Fix safety
    Safe. `KVWriteLoc.for_batch(fb)` wraps the same tensor and adds the batch's
    own mark; on pools that do not check the mark nothing else changes. The
    cross-attention idiom becomes `KVWriteLoc.for_layer(fb, layer)`, which picks
    the same branch and marks only the batch's loc (when the contract has no
    layer factory the finding has no fix). A slice becomes `KVWriteLoc(<slice>,
    <mark>=fb.<batch mark>)`, the same ids under the same mark. An alias the
    rewrite leaves unused is kept: removing code is the author's call. The fix
    adds the `KVWriteLoc` import when the file lacks it.

    Through a helper: a raw loc passed as a helper's door parameter gets the
    same rewrite, safe when the helper uses that parameter only as door locs
    (down its chain), unsafe otherwise (the helper may use it as a tensor). A
    helper's raw return is fixed in the helper, not the caller: when every
    return of the helper is the batch's raw loc or already marked, and every
    caller in the tree passes its result straight to a write door's loc, the
    helper's raw returns are flagged there too, with the same safe rewrite
    (`return KVWriteLoc.for_batch(fb)`, a slice keeping its ids under the
    batch's mark), and the caller's message points at it. Otherwise there is
    no fix, and the caller's message says why: the helper also returns other
    values (a capture buffer), or some caller uses the result as a tensor.

    ## Options
    `write-doors`, `loc-attributes`, `write-loc-class`, `write-loc-module`,
    `mark`, `batch-mark`, `batch-factory` in `[tool.kvlint.contract]`.

    The fix is safe only where the scanned tree defines what it calls (the
    write-loc class, its `for_batch`, its mark for a wrapped slice), or the
    installed engine the tree imports does, or the contract pins it; otherwise
    it is unsafe, and the message names the missing API and the key that pins
    it. The message speaks the tree's (or its engine's) vocabulary: its mark's
    name, and a door that refuses an unmarked loc only where one of the write
    doors checks the mark. Where nothing states the write-loc class, the
    message says which spelling kvlint assumed and how to tell it otherwise.
    """

    code = "KV101"
    name = "bare-write-loc"
    severity = Severity.ERROR
    fix_applicability = Applicability.SAFE

    VALID = [
        Valid("pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)"),
        Valid("pool.set_kv_buffer(layer, loc, k, v)"),
        Valid("pool.set_kv_buffer(layer, forward_batch.encoder_out_cache_loc, k, v)"),
        # Encoder and batch locs chosen by something other than the cross-attention flag.
        Valid(
            "def write(pool, layer, fb, k, v, use_encoder):\n"
            "    if use_encoder:\n"
            "        loc = fb.encoder_out_cache_loc\n"
            "    else:\n"
            "        loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        Valid("def set_kv_buffer(self, layer, loc, cache_k, cache_v):\n    pass\n"),
        Valid("n = forward_batch.out_cache_loc.shape[0]\npool.set_kv_buffer(layer, loc, k, v)\n"),
        Valid("pool.set_kv_buffer(layer, *args)"),
        Valid("self._set_kv_buffer(forward_batch.out_cache_loc, layer, loc, k)"),
        # A reassigned alias: the translated value reaches the door.
        Valid(
            "def write(self, pool, layer, fb, k, v):\n"
            "    loc = fb.out_cache_loc\n"
            "    loc = self._translate(loc)\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        # A loc passed through a translator call.
        Valid(
            "def write(self, pool, layer, fb, k, v):\n"
            "    loc = self._translate(fb.out_cache_loc)\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        # One branch is not a raw loc, so the name is not.
        Valid(
            "def write(backend, pool, layer, fb, k, v, draft):\n"
            "    if draft:\n"
            "        loc = backend.select_draft_step_out_cache_loc(fb)\n"
            "    else:\n"
            "        loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        # The encoder loc alone, through an alias.
        Valid(
            "def write(pool, layer, fb, k, v):\n"
            "    loc = fb.encoder_out_cache_loc\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        # An unrelated read of the batch loc that never reaches a door.
        Valid(
            "def write(pool, layer, fb, k, v, loc):\n"
            "    n = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n"
            "    return n\n"
        ),
        # A parameter is unknown, not raw.
        Valid("def write(pool, layer, out_cache_loc, k, v):\n    pool.set_kv_buffer(layer, out_cache_loc, k, v)\n"),
    ]
    INVALID = [
        Invalid(
            "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n"
            "pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n",
            expected_replacement="from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n"
            "pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n",
            line=2,
            column=27,
        ),
        Invalid(
            "import torch\n\n\ndef write(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n",
            expected_replacement="import torch\nfrom sglang.srt.mem_cache.memory_pool import KVWriteLoc\n\n\n"
            "def write(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb), k, v)\n",
        ),
        Invalid(
            "from x import KVWriteLoc as WL\npool.set_mla_kv_buffer(layer, loc=self.fb.out_cache_loc, cache_k_nope=k)\n",
            expected_replacement="from x import KVWriteLoc as WL\n"
            "pool.set_mla_kv_buffer(layer, loc=WL.for_batch(self.fb), cache_k_nope=k)\n",
        ),
        Invalid(
            "from m import KVWriteLoc\npool.set_kv_buffer(layer, forward_batch.out_cache_loc[:n], k, v)\n",
            expected_replacement="from m import KVWriteLoc\n"
            "pool.set_kv_buffer(layer, KVWriteLoc(forward_batch.out_cache_loc[:n], "
            "id_space=forward_batch.out_cache_loc_id_space), k, v)\n",
        ),
        Invalid(
            "from m import KVWriteLoc\npool.set_kv_buffer(layer, fb.out_cache_loc[:n], k, v)\n",
            expected_replacement="from m import KVWriteLoc\n"
            "pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc[:n], physical=fb.out_cache_loc_is_physical), k, v)\n",
            contract={"mark": "physical", "batch-mark": "out_cache_loc_is_physical"},
        ),
        Invalid(
            "from m import KVWriteLoc\nself._set_kv_buffer(q, layer, forward_batch.out_cache_loc, k)\n",
            expected_replacement="from m import KVWriteLoc\n"
            "self._set_kv_buffer(q, layer, KVWriteLoc.for_batch(forward_batch), k)\n",
        ),
        # A plain alias; the alias itself stays.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    cache_loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, cache_loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    cache_loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb), k, v)\n",
            line=6,
        ),
        # The cross-attention idiom, `not` test.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, forward_batch, k, v):\n"
            "    cache_loc = (\n"
            "        forward_batch.out_cache_loc\n"
            "        if not layer.is_cross_attention\n"
            "        else forward_batch.encoder_out_cache_loc\n"
            "    )\n"
            "    pool.set_kv_buffer(layer, cache_loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, forward_batch, k, v):\n"
            "    cache_loc = (\n"
            "        forward_batch.out_cache_loc\n"
            "        if not layer.is_cross_attention\n"
            "        else forward_batch.encoder_out_cache_loc\n"
            "    )\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_layer(forward_batch, layer), k, v)\n",
        ),
        # The cross-attention idiom, positive test, through a walrus.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    if (loc := fb.encoder_out_cache_loc if layer.is_cross_attention else fb.out_cache_loc) is not None:\n"
            "        pool.set_kv_buffer(layer, loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    if (loc := fb.encoder_out_cache_loc if layer.is_cross_attention else fb.out_cache_loc) is not None:\n"
            "        pool.set_kv_buffer(layer, KVWriteLoc.for_layer(fb, layer), k, v)\n",
        ),
        # The cross-attention idiom as an if/else statement (torch_native_backend's spelling).
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    if layer.is_cross_attention:\n"
            "        cache_loc = fb.encoder_out_cache_loc\n"
            "    else:\n"
            "        cache_loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, cache_loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v):\n"
            "    if layer.is_cross_attention:\n"
            "        cache_loc = fb.encoder_out_cache_loc\n"
            "    else:\n"
            "        cache_loc = fb.out_cache_loc\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_layer(fb, layer), k, v)\n",
        ),
        # Without a layer factory the idiom is reported without a fix.
        Invalid(
            "def write(pool, layer, fb, k, v):\n"
            "    loc = fb.out_cache_loc if not layer.is_cross_attention else fb.encoder_out_cache_loc\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n",
            contract={"layer-factory": ""},
        ),
        # An alias of a slice keeps its own ids under the batch's mark.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v, n):\n"
            "    loc = fb.out_cache_loc[:n]\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v, n):\n"
            "    loc = fb.out_cache_loc[:n]\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc(loc, id_space=fb.out_cache_loc_id_space), k, v)\n",
        ),
        # Both branches raw, and an alias of an alias.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v, c):\n"
            "    if c:\n"
            "        loc = fb.out_cache_loc\n"
            "    else:\n"
            "        first = fb.out_cache_loc\n"
            "        loc = first\n"
            "    pool.set_kv_buffer(layer, loc, k, v)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, k, v, c):\n"
            "    if c:\n"
            "        loc = fb.out_cache_loc\n"
            "    else:\n"
            "        first = fb.out_cache_loc\n"
            "        loc = first\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb), k, v)\n",
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return (contract.loc_attributes, tuple(door for door, _ in contract.write_doors))

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        """A unit where a door's loc argument, or an argument of a helper with a fact, may be a raw loc,
        or that defines such a helper next to the batch's loc attribute (the helper's own raw return)."""
        doors = contract.door_loc_index
        loc_words, door_words, helper_words = encoded(contract.loc_attributes), encoded(doors), encoded(helper_names)
        for unit in file_units(data, tree):
            if not (unit.holds_any(helper_words) or (unit.holds_any(loc_words) and unit.holds_any(door_words))):
                continue
            nodes = unit.nodes()
            raw = MayBeRawLoc(contract, helper_names, nodes)
            door_locs = (ast_loc_argument(call, index) for door, index in doors.items() for call in nodes.calls.get(door, ()))
            if any(raw.holds(loc) for loc in door_locs):
                return True
            helper_calls = (call for name in helper_names if name not in doors for call in nodes.calls.get(name, ()))
            if any(raw.holds(arg) for call in helper_calls for arg in helper_arguments(call)):
                return True
            if raw.has_loc and not nodes.functions.keys().isdisjoint(helper_names):
                return True
        return False

    def check(self, ctx: FileContext) -> None:
        index = module_index(ctx)
        for door, loc_index in ctx.contract.write_doors:
            for site in index.calls(door):
                arg = loc_argument(site.call, loc_index)
                if arg is None:
                    continue
                loc = raw_loc(ctx, arg.value, site.function)
                if loc is None:
                    continue
                reached = door_call(ctx, site, door)
                if not reached.is_door or not reached.may_refuse(ctx.contract) or refusal_ruled_out(ctx, site, door):
                    continue
                fix = self._fix(ctx, arg.value, loc)
                gaps = api_gaps(ctx, *self._needs(loc)) if fix is not None else []
                message = self._message(ctx, door, arg.value, loc) + gap_message(gaps)
                unsafe = reached.unsafe_because()
                if unsafe is not None:
                    # One clause where the contract's gaps already made the fix unsafe.
                    lead = "and" if gaps else "the fix is unsafe here:" if fix is not None else "no fix:"
                    message += f"; {lead} {unsafe}"
                ctx.report(arg.value, message, made_unsafe(with_gaps(fix, gaps), unsafe))
        # One call away: helpers the project index resolved, in this file or another.
        for node, message, fix in (
            *door_reports(ctx, index), *parameter_reports(ctx, index), *return_reports(ctx, index)
        ):
            ctx.report(node, message, fix)

    @staticmethod
    def _needs(loc: RawLoc) -> tuple[str, ...]:
        """The contract keys naming the APIs the fix for `loc` calls."""
        if loc.form == "slice":
            return ("write-loc-module", "mark", "batch-mark")
        return ("write-loc-module", "batch-factory")

    def _message(self, ctx: FileContext, door: str, value: cst.BaseExpression, loc: RawLoc) -> str:
        shown = ctx.code_for(value)
        what = f"the batch's raw `{shown}`" if raw_loc_batch(value, ctx.contract) is not None else (
            f"`{shown}`, the batch's raw loc"
        )
        return f"`{door}` receives {what}: {lost_mark_phrase(ctx)}{unfit_form_clause(ctx, loc)}"

    def _fix(self, ctx: FileContext, value: cst.BaseExpression, loc: RawLoc) -> Optional[Replacement]:
        contract = ctx.contract
        if loc.form == "slice":
            # Wrap the value as written (an alias keeps its own ids), under the batch's mark.
            new, imports = marked_call(ctx, value, loc.batch)
            description = f"wrap the slice as `{contract.write_loc_class}(..., {contract.mark}=...{contract.batch_mark})`"
            return Replacement(value, new, Applicability.SAFE, description, imports)
        factory = factory_for(ctx, loc)
        if factory is None:
            return None
        call, imports, description = factory
        return Replacement(value, call, Applicability.SAFE, description, imports)
