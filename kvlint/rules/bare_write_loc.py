"""KV101 bare-write-loc."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.contract import Contract
from kvlint.rule import FileContext, Replacement, Rule
from kvlint.rules._write_loc import factory_call, loc_argument, marked_call, module_index, raw_loc_batch
from kvlint.types import Applicability, Invalid, Severity, Valid


class BareWriteLoc(Rule):
    """A write door receives a batch's raw `out_cache_loc`, losing its id-space mark.

    ## What it does
    Flags a KV write door (`set_kv_buffer`, `set_mla_kv_buffer`, `_set_kv_buffer`,
    or any door configured in `[tool.kvlint.contract] write-doors`) whose loc
    argument is a batch's raw loc: `forward_batch.out_cache_loc`, a slice of it,
    or the keyword `loc=forward_batch.out_cache_loc`.

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
    own mark; on pools that do not check the mark nothing else changes. A slice
    becomes `KVWriteLoc(<slice>, <mark>=fb.<batch mark>)`, the same ids under
    the same mark. The fix adds the `KVWriteLoc` import when the file lacks it.

    ## Options
    `write-doors`, `loc-attributes`, `write-loc-class`, `write-loc-module`,
    `mark`, `batch-mark`, `batch-factory` in `[tool.kvlint.contract]`.
    """

    code = "KV101"
    name = "bare-write-loc"
    severity = Severity.ERROR
    fix_applicability = Applicability.SAFE

    VALID = [
        Valid("pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)"),
        Valid("pool.set_kv_buffer(layer, loc, k, v)"),
        Valid("pool.set_kv_buffer(layer, forward_batch.encoder_out_cache_loc, k, v)"),
        Valid("def set_kv_buffer(self, layer, loc, cache_k, cache_v):\n    pass\n"),
        Valid("n = forward_batch.out_cache_loc.shape[0]\npool.set_kv_buffer(layer, loc, k, v)\n"),
        Valid("pool.set_kv_buffer(layer, *args)"),
        Valid("self._set_kv_buffer(forward_batch.out_cache_loc, layer, loc, k)"),
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
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return (contract.loc_attributes, tuple(door for door, _ in contract.write_doors))

    def check(self, ctx: FileContext) -> None:
        index = module_index(ctx)
        for door, loc_index in ctx.contract.write_doors:
            for site in index.calls(door):
                arg = loc_argument(site.call, loc_index)
                if arg is None:
                    continue
                batch = raw_loc_batch(arg.value, ctx.contract)
                if batch is None:
                    continue
                ctx.report(
                    arg.value,
                    f"`{door}` receives the batch's raw `{ctx.code_for(arg.value)}`: the id-space mark is lost "
                    f"and a unified pool's write door refuses an unmarked loc",
                    self._fix(ctx, arg.value, batch),
                )

    def _fix(self, ctx: FileContext, loc: cst.BaseExpression, batch: cst.BaseExpression) -> Optional[Replacement]:
        contract = ctx.contract
        if isinstance(loc, cst.Subscript):
            new, imports = marked_call(ctx, loc, batch)
            description = f"wrap the slice as `{contract.write_loc_class}(..., {contract.mark}=...{contract.batch_mark})`"
        else:
            new, imports = factory_call(ctx, contract.batch_factory, [cst.Arg(batch)])
            description = f"pass `{contract.write_loc_class}.{contract.batch_factory}({ctx.code_for(batch)})`"
        return Replacement(loc, new, Applicability.SAFE, description, imports)
