"""The project index's fact about a call in a LibCST tree: which helper it calls, and what that does.

The spelling is computed the way `kvlint.analysis.helper_summary.call_spelling`
computes it on CPython's tree, and the enclosing class is the innermost class
of the function holding the call, so the two sides meet on the same key.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.index import module_index
from kvlint.api.helpers import HelperFact
from kvlint.api.rule import FileContext


def call_spelling(func: cst.BaseExpression) -> Optional[tuple[str, ...]]:
    if isinstance(func, cst.Name):
        return ("name", func.value)
    if not isinstance(func, cst.Attribute):
        return None
    owner = func.value
    if isinstance(owner, cst.Name):
        if owner.value in ("self", "cls"):
            return (owner.value, func.attr.value)
        return ("attr", owner.value, func.attr.value)
    if isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name) and owner.func.value == "super":
        return ("super", func.attr.value)
    return None


def enclosing_class(ctx: FileContext, function: Optional[cst.FunctionDef]) -> Optional[str]:
    """The name of the class whose method `function` is (directly), or None."""
    if function is None:
        return None
    classes = ctx.analysis("method-classes", lambda: {
        id(defined): klass.name.value for defined, klass in module_index(ctx).functions if klass is not None
    })
    return classes.get(id(function))


def helper_fact(ctx: FileContext, call: cst.Call, function: Optional[cst.FunctionDef]) -> Optional[HelperFact]:
    """What the helper `call` runs is known to do, if the project index resolved it."""
    if not ctx.helpers:
        return None
    spelling = call_spelling(call.func)
    if spelling is None:
        return None
    klass = enclosing_class(ctx, function) if spelling[0] in ("self", "cls", "super") else None
    return ctx.helpers.lookup(klass, spelling)


def argument_for(call: cst.Call, param: str, position: int) -> Optional[cst.BaseExpression]:
    """What `call` passes as its callee's parameter `param` (at `position`, -1: keyword only)."""
    positional = []
    for arg in call.args:
        if arg.star or arg.keyword is not None:
            break
        positional.append(arg.value)
    if 0 <= position < len(positional):
        return positional[position]
    return next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == param), None)
