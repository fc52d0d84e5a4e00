"""What the write-loc rules share: finding a door's loc argument, recognising a
batch's raw loc, and spelling `KVWriteLoc` the way the file already does."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.contract import LOC_KEYWORDS, Contract
from kvlint.index import ModuleIndex, build_index
from kvlint.rule import FileContext


def module_index(ctx: FileContext) -> ModuleIndex:
    return ctx.analysis("module-index", lambda: build_index(ctx.module))


def loc_argument(call: cst.Call, loc_index: int) -> Optional[cst.Arg]:
    """The argument in the door's loc slot: keyword `loc`/`loc_info`, or positional `loc_index`.

    A `*args` at or before the slot hides which value lands there: no answer.
    """
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in LOC_KEYWORDS:
            return arg
    position = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            continue
        if arg.star == "*":
            return None
        if position == loc_index:
            return arg
        position += 1
    return None


def raw_loc_batch(expr: cst.BaseExpression, contract: Contract) -> Optional[cst.BaseExpression]:
    """For `fb.out_cache_loc` (or a subscript of it) the batch expression `fb`; else None."""
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Attribute) and expr.attr.value in contract.loc_attributes:
        return expr.value
    return None


def write_loc_spelling(ctx: FileContext) -> tuple[cst.BaseExpression, tuple[tuple[str, str], ...]]:
    """How this file names the write-loc class, and the import a fix must add, if any."""
    cls = ctx.contract.write_loc_class
    index = module_index(ctx)
    if any(klass.name.value == cls for klass in index.classes):
        return cst.Name(cls), ()
    for local, origin in index.imports.items():
        if origin.rsplit(".", 1)[-1] == cls:
            return cst.Name(local), ()
    for local, origin in index.imports.items():
        if origin == ctx.contract.write_loc_module and "." not in local:
            return cst.Attribute(cst.Name(local), cst.Name(cls)), ()
    return cst.Name(cls), ((ctx.contract.write_loc_module, cls),)


def factory_call(
    ctx: FileContext, factory: str, args: list[cst.Arg]
) -> tuple[cst.Call, tuple[tuple[str, str], ...]]:
    """`KVWriteLoc.<factory>(args...)` spelled for this file."""
    cls, imports = write_loc_spelling(ctx)
    return cst.Call(func=cst.Attribute(cls, cst.Name(factory)), args=_commas(args)), imports


def marked_call(
    ctx: FileContext, loc: cst.BaseExpression, batch: cst.BaseExpression
) -> tuple[cst.Call, tuple[tuple[str, str], ...]]:
    """`KVWriteLoc(loc, <mark>=batch.<batch mark>)`: a loc that keeps the batch's mark."""
    cls, imports = write_loc_spelling(ctx)
    mark = cst.Arg(
        cst.Attribute(batch, cst.Name(ctx.contract.batch_mark)),
        keyword=cst.Name(ctx.contract.mark),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return cst.Call(func=cls, args=_commas([cst.Arg(loc), mark])), imports


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [arg.with_changes(comma=comma if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT) for i, arg in enumerate(args)]
