"""What a KV201 finding on a `.view` says: the stride it keeps silent, and why there may be no fix."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.api.rule import FileContext
from kvlint.rules.layout._aliases import constant_page_size
from kvlint.rules.layout._pool_origin import STRIDED, PoolOrigin


def view_message(ctx: FileContext, tensor: cst.BaseExpression, page_size: cst.BaseExpression,
                 function: Optional[cst.FunctionDef]) -> str:
    """The finding on `tensor.view(-1, page_size, ...)`, up to its fix."""
    fixed = constant_page_size(ctx, page_size, function)
    # Only page size 1 gives the `.view` other strides than the helpers; a size the module fixes above it cannot.
    at_one = (
        f"its page size is fixed at {fixed} here, where the helpers return these very strides, so the "
        f"rewrite states the stride and a kernel reading the shape alone still needs a stride-parity test"
        if fixed is not None and fixed > 1
        else "at page size 1 the page dim gets the row stride instead of the slot stride"
    )
    return (
        f"`{ctx.code_for(tensor)}.view(...)` pages paged KV without saying which stride it keeps: on a "
        f"token-major pool the in-page stride is the whole entry, not what the shape suggests, and "
        f"{at_one}; nothing raises. Page it with `paged_view`, `paged_row_view` or `paged_kv_view`"
    )


def no_fix_clause(ctx: FileContext, tensor: cst.BaseExpression, origin: Optional[PoolOrigin]) -> str:
    """Why no fix is offered where dim 0 of `tensor` is not known to hold slots."""
    if origin is not None and origin.verdict != STRIDED:
        why = origin.why()
    else:
        why = "it is neither a buffer accessor's per-layer `(slots, ...)` result nor a view of one"
    return f"; no fix: kvlint cannot tell whether dim 0 of `{ctx.code_for(tensor)}` holds slots ({why}), and the helpers assume it does"
