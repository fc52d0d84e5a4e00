"""What a local name in a view's shape stands for: `ps = self.page_size; k.view(-1, ps, H, D)`.

The shape predicates (`_view_shape`) read spelling; a local that one assignment
binds where it is read (or, for a closure variable, where the nested function
is defined) spells what that assignment's value spells. A name with
several reaching definitions (a branch, a loop), or a parameter, is left as
written: its value is not one expression.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.closures import closure_reaching
from kvlint.api.rule import FileContext
from kvlint.rules.layout._view_shape import ALIAS_DEPTH, Bound, unbound


def bound_in(ctx: FileContext, function: Optional[cst.FunctionDef]) -> Bound:
    """The `Bound` of names read inside `function` (module level: none is followed)."""
    if function is None:
        return unbound

    def bound(name: cst.Name) -> Optional[cst.BaseExpression]:
        definitions, _ = closure_reaching(ctx, name, function) or ((), function)
        if len(definitions) != 1:
            return None
        (definition,) = definitions
        return definition.value if definition.kind in ("assign", "walrus") else None

    return bound


def aliased(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> cst.BaseExpression:
    """What `expr` stands for through the function's local aliases (`ps = self.page_size`: `self.page_size`)."""
    bound = bound_in(ctx, function)
    for _ in range(ALIAS_DEPTH):
        value = bound(expr) if isinstance(expr, cst.Name) else None
        if value is None:
            break
        expr = value
    return expr


def constant_page_size(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[int]:
    """The int a page size stands for where the file fixes it: a local bound to a module constant
    (`PAGE_SIZE = 64`, assigned once at module level and never declared `global`); None otherwise."""
    expr = aliased(ctx, expr, function)
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if not isinstance(expr, cst.Name) or (function is not None and closure_reaching(ctx, expr, function) is not None):
        return None
    return _module_constant(ctx, expr.value)


def _module_constant(ctx: FileContext, name: str) -> Optional[int]:
    """The int literal `name` is bound to by the module's one top-level assignment of it."""
    if f"global {name}" in ctx.text():
        return None
    values: list[cst.BaseExpression] = []
    for statement in ctx.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                values += [small.value for target in small.targets if _is_name(target.target, name)]
            elif isinstance(small, cst.AnnAssign) and small.value is not None and _is_name(small.target, name):
                values.append(small.value)
    if len(values) != 1 or not isinstance(values[0], cst.Integer):
        return None
    return int(values[0].evaluated_value)


def _is_name(target: cst.BaseExpression, name: str) -> bool:
    return isinstance(target, cst.Name) and target.value == name
