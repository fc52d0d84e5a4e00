"""Wrap a bare write loc passed to a KV write door (KV101's fix).

`pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)` becomes
`pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)`; the
cross-attention idiom becomes `KVWriteLoc.for_layer(fb, layer)` and a slice
`KVWriteLoc(<slice>, <mark>=fb.<batch mark>)`. The `KVWriteLoc` import is added
once when the file lacks it.

`kvlint fix --select KV101` runs it. To run it with LibCST's own runner, put a
`.libcst.codemod.yaml` next to the code whose `modules` list names this
package (`modules: ['codemods']`, with kvlint installed), then::

    python -m libcst.tool codemod wrap_write_loc.WrapWriteLocCommand PATH

The contract (mark spelling, import module) is read and learned the same way
`kvlint check` does, from the `[tool.kvlint]` configuration found from the
working directory.
"""

from __future__ import annotations

from codemods._rule_fix import RuleFixCommand


class WrapWriteLocCommand(RuleFixCommand):
    DESCRIPTION = "Wrap bare batch locs passed to KV write doors in a marked KVWriteLoc (KV101)."
    CODES = ("KV101",)
