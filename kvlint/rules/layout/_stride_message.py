"""What a KV201 finding on a `.view` says: the stride it keeps silent, and why there may be no fix."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.api.rule import FileContext
from kvlint.rules.layout._kept import helper_origin
from kvlint.rules.layout._pool_origin import STRIDED, PoolOrigin
from kvlint.rules.layout._through_helpers import NO_FIX_AT_CALL, HelperUse


def view_message(ctx: FileContext, tensor: cst.BaseExpression) -> str:
    """The finding on `tensor.view(-1, page_size, ...)`, up to its fix."""
    return (
        f"`{ctx.code_for(tensor)}.view(...)` pages paged KV without saying which stride it keeps: on a "
        f"token-major pool the in-page stride is the whole entry, not what the shape suggests, and at "
        f"page size 1 the page dim gets the row stride instead of the slot stride; nothing raises. "
        f"Page it with `paged_view`, `paged_row_view` or `paged_kv_view`"
    )


def no_fix_clause(ctx: FileContext, tensor: cst.BaseExpression, origin: Optional[PoolOrigin]) -> str:
    """Why no fix is offered where dim 0 of `tensor` is not known to hold slots."""
    if origin is not None and origin.verdict != STRIDED:
        why = origin.why()
    else:
        why = "it is neither a buffer accessor's per-layer `(slots, ...)` result nor a view of one"
    return f"; no fix: kvlint cannot tell whether dim 0 of `{ctx.code_for(tensor)}` holds slots ({why}), and the helpers assume it does"


def unsafe_fix_clauses(ctx: FileContext, maybe_pages: Optional[PoolOrigin]) -> str:
    """Why a paged-view fix is only unsafe ("" where it may be safe): `maybe_pages`, the pool dim 0 of
    the tensor may hold pages of; or no paged helper the tree defines."""
    clauses = ""
    if maybe_pages is not None:
        clauses += (
            f"; the fix is unsafe: {maybe_pages.why()}, where dim 0 holds pages and the helpers, "
            f"which assume slots, would assert or build another shape"
        )
    if not ctx.contract.has("paged-helpers-module"):
        clauses += (
            "; the scanned tree defines no paged helper (`paged_view`, `paged_row_view`, "
            "`paged_kv_view`), so the fix is unsafe: pin `paged-helpers-module` in "
            "[tool.kvlint.contract] once the helpers exist"
        )
    return clauses


def helper_message(ctx: FileContext, use: HelperUse) -> str:
    """The finding on paged KV handed to a helper that pages its parameter with a `.view`."""
    return (
        f"paged KV `{ctx.code_for(use.argument)}` is paged by {use.relied_on()} without saying which "
        f"stride it keeps: on a token-major pool the in-page stride is the whole entry, and at page size 1 "
        f"the page dim gets the row stride; nothing raises. Page it with `paged_view`, `paged_row_view` or "
        f"`paged_kv_view`; {NO_FIX_AT_CALL}" + helper_origin(ctx, use.argument, use.function)
    )
