"""Give an unmarked `KVWriteLoc(...)` of a batch's raw loc its mark (KV102's fix).

`KVWriteLoc(forward_batch.out_cache_loc, swa)` becomes
`KVWriteLoc.for_batch(forward_batch, swa_loc=swa)` (positional sub-pool locs
become keywords in the class's field order); the cross-attention idiom becomes
`for_layer(fb, layer, ...)`, and a slice gains `<mark>=fb.<batch mark>`.
`KVWriteLoc(...)` of any other loc is reported by `kvlint check` and left alone.

`kvlint fix --select KV102` runs it. With LibCST's runner (a
`.libcst.codemod.yaml` whose `modules` lists `codemods`)::

    python -m libcst.tool codemod mark_write_loc.MarkWriteLocCommand PATH
"""

from __future__ import annotations

from codemods._rule_fix import RuleFixCommand


class MarkWriteLocCommand(RuleFixCommand):
    DESCRIPTION = "Build unmarked KVWriteLoc(...) of a batch's raw loc with the batch's mark (KV102)."
    CODES = ("KV102",)
