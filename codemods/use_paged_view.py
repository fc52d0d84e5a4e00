"""Rewrite stride-silent `.view(-1, page_size, ...)` on paged KV to the paged_view helpers.

The rewrite is KV201's fix: `x.view(-1, ps, R)` -> `paged_row_view(x, ps)`,
`x.view(-1, ps, H, D)` -> `paged_kv_view(x, ps, H, D)`,
`x.view(-1, ps, *x.shape[1:])` -> `paged_view(x, ps)`, importing the helper
from the contract's `paged-helpers-module`. `kvlint fix --select KV201` runs
the same rewrite; this command is its entry point for LibCST's runner::

    python -m libcst.tool codemod use_paged_view.UsePagedViewCommand PATH
"""

from __future__ import annotations

from codemods._rule_fix import RuleFixCommand


class UsePagedViewCommand(RuleFixCommand):
    DESCRIPTION = "Page paged-KV tensors with paged_view / paged_row_view / paged_kv_view instead of .view (KV201)."
    CODES = ("KV201",)
