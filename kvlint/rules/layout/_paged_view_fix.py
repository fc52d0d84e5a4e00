"""KV201's rewrite: a page-splitting `.view(...)` as the paged helper that keeps the slot stride.

`x.view(-1, ps, R)` becomes `paged_row_view(x, ps)`, `x.view(-1, ps, H, D)`
`paged_kv_view(x, ps, H, D)`, `x.view(-1, ps, *x.shape[1:])` `paged_view(x, ps)`;
with only `paged_view` defined, the row is shaped first. The helper is spelt as
the file already names it, else imported from `paged-helpers-module`. Whether
the rewrite is safe (dim 0 holds slots) is the rule's decision, not this module's.
"""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from kvlint.analysis.index import module_index
from kvlint.api.rule import FileContext, Replacement
from kvlint.api.types import Applicability


def paged_view_fix(ctx: FileContext, call: cst.Call, tensor: cst.BaseExpression) -> Optional[Replacement]:
    args = call.args
    helpers = ctx.contract.paged_helpers
    page = args[1]
    trailing = args[2:]
    if len(trailing) == 1 and _is_whole_row_of(trailing[0], tensor) and "paged_view" in helpers:
        return _replacement(ctx, call, "paged_view", [args[0].with_changes(value=tensor), _last(page, args)])
    if any(arg.star for arg in trailing):
        return None
    if len(trailing) == 1 and "paged_row_view" in helpers:
        return _replacement(ctx, call, "paged_row_view", [args[0].with_changes(value=tensor), _last(page, args)])
    if len(trailing) == 2 and "paged_kv_view" in helpers:
        return _replacement(ctx, call, "paged_kv_view", [args[0].with_changes(value=tensor), *args[1:]])
    if "paged_view" in helpers and isinstance(tensor, cst.Name):
        shaped = args[0].with_changes(value=_row_shaped(tensor, trailing))
        return _replacement(ctx, call, "paged_view", [shaped, _last(page, args)])
    return None


def _replacement(ctx: FileContext, call: cst.Call, helper: str, args: Sequence[cst.Arg]) -> Replacement:
    func, imports = _helper_spelling(ctx, helper)
    new = call.with_changes(func=func, args=args)
    description = f"use `{helper}`, which pages with the buffer's own slot stride"
    return Replacement(call, new, Applicability.SAFE, description, imports)


def _helper_spelling(ctx: FileContext, helper: str) -> tuple[cst.BaseExpression, tuple[tuple[str, str], ...]]:
    """How this file names `helper`, and the import a fix must add, if any."""
    module = ctx.contract.paged_helpers_module
    for statement in ctx.module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == helper:
            return cst.Name(helper), ()
    imports = module_index(ctx).imports
    for local, origin in imports.items():
        if origin.rsplit(".", 1)[-1] == helper and "." not in local:
            return cst.Name(local), ()
    for local, origin in imports.items():
        if origin == module and "." not in local:
            return cst.Attribute(cst.Name(local), cst.Name(helper)), ()
    return cst.Name(helper), ((module, helper),)


def _last(page: cst.Arg, args: Sequence[cst.Arg]) -> cst.Arg:
    """The page-size argument as the last one: it takes the closing argument's comma (and layout)."""
    return page.with_changes(comma=args[-1].comma)


def _is_whole_row_of(arg: cst.Arg, tensor: cst.BaseExpression) -> bool:
    """`*tensor.shape[1:]`: the trailing dims spelt as the tensor's own row."""
    value = arg.value
    if arg.star != "*" or not isinstance(value, cst.Subscript) or len(value.slice) != 1:
        return False
    shape, index = value.value, value.slice[0].slice
    return (
        isinstance(shape, cst.Attribute)
        and shape.attr.value == "shape"
        and shape.value.deep_equals(tensor)
        and isinstance(index, cst.Slice)
        and isinstance(index.lower, cst.Integer)
        and index.lower.evaluated_value == 1
        and index.upper is None
        and index.step is None
    )


def _row_shaped(tensor: cst.BaseExpression, trailing: Sequence[cst.Arg]) -> cst.Call:
    """`tensor.view(tensor.shape[0], *trailing)`: the slot dim kept, the row given its dims."""
    slots = cst.Subscript(
        cst.Attribute(tensor, cst.Name("shape")), [cst.SubscriptElement(cst.Index(cst.Integer("0")))]
    )
    dims = [cst.Arg(slots), *(cst.Arg(arg.value) for arg in trailing)]
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [arg.with_changes(comma=comma) for arg in dims[:-1]] + [dims[-1]]
    return cst.Call(cst.Attribute(tensor, cst.Name("view")), args)
