"""KV201/KV202 one call away: paged KV handed to a helper that pages or packs its parameter.

The project index (`kvlint.analysis.project_index`) knows which parameters of
a helper are the tensor of a layout-sensitive call, in the helper itself or
down any chain of helpers it passes them to unchanged: a `.view(-1, page_size,
*row)` page split, or a `.contiguous()`/`.flatten`/`.reshape` that packs a
copy. The hazard exists only where the caller passes paged KV, so it is
reported there, at the argument as it appears in the call, and the message
names the helper and the file:line of the call it relies on.

The argument must be paged KV by a fact (a buffer accessor's result, a slice
or tensor-keeping call of one, a helper returning paged KV), not by the name
fallback alone. A page split whose page size is another parameter of the
helper counts when the caller's argument there names a page size. A merge of
dim 0 with the next one (`.flatten(0, 1)`, `.reshape(-1, ...)`) and a page
split at the literal page size 1 (`.view(-1, 1, D)`) count where dim 0 of the
argument holds slots: on a page view or a page-split pool's `(pages,
page_size, ...)` buffer they merge pages back into token rows, a view.

There is no fix at the call: the `.view` or copy is the helper's, so
rewriting the argument would leave it in place (and a paged argument would be
paged twice); the helper's own rewrite must hold for every caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import libcst as cst

from kvlint.analysis.helper_calls import argument_for, helper_fact
from kvlint.analysis.index import module_index
from kvlint.api.helpers import MERGES_DIM0, HelperFact, ParamLayout
from kvlint.api.rule import FileContext
from kvlint.rules.layout._paged_kv import NAMED, SLOTS, paged_kv
from kvlint.rules.layout._view_shape import is_page_size

NO_FIX_AT_CALL = (
    "no fix at this call: the helper makes that call, so rewriting the argument would leave it in place; "
    "fix it in the helper, for every caller"
)


@dataclass(frozen=True)
class HelperUse:
    """Paged KV `argument` passed to `fact`'s helper, which uses it as `layout` says."""

    argument: cst.BaseExpression
    function: Optional[cst.FunctionDef]
    fact: HelperFact
    layout: ParamLayout

    def relied_on(self) -> str:
        where = self.layout.where
        return f"the helper `{self.fact.helper}` ({where.what} at {where.shown()})"


def helper_uses(ctx: FileContext, kinds: tuple[str, ...]) -> Iterator[HelperUse]:
    """Each argument of a helper call that is paged KV used, in the helper, as one of `kinds`."""
    if not ctx.helpers:
        return
    names = {
        spelling[-1]
        for (_klass, spelling), fact in ctx.helpers.by_call.items()
        if any(layout.kind in kinds for layout in fact.layout)
    }
    tracker = paged_kv(ctx)
    for site in module_index(ctx).calls(*sorted(names)):
        fact = helper_fact(ctx, site.call, site.function)
        if fact is None:
            continue
        reported: set[int] = set()
        for layout in fact.layout:
            argument = argument_for(site.call, layout.param, layout.position)
            if layout.kind not in kinds or argument is None or id(argument) in reported:
                continue
            held = tracker.layout(argument, site.function)
            if held is None or held[0] == NAMED:
                continue
            # Both read dim 0 as slots: on a page-split buffer they merge or flatten pages instead.
            if (layout.kind == MERGES_DIM0 or layout.unit_page) and held[0] != SLOTS:
                continue
            if layout.page_param:
                page = argument_for(site.call, layout.page_param, layout.page_position)
                if page is None or not is_page_size(page):
                    continue
            reported.add(id(argument))
            yield HelperUse(argument, site.function, fact, layout)

