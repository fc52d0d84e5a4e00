"""KV101 one call away: a raw loc reaching a write door through a helper the project index resolved.

Two shapes, both reported in the caller:

* a door's loc argument is a helper call (or a local every definition of
  which is one) whose helper may return the batch's raw loc;
* a helper call passes the batch's raw loc (directly, through a local alias,
  or as another helper's result) as a parameter that reaches a door's loc
  argument unmarked.

The message names the helper called and the file:line of the fact it rests
on: where the raw loc is returned, or which door the parameter reaches.
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from kvlint.analysis.dataflow import function_flow
from kvlint.analysis.helper_calls import helper_fact
from kvlint.analysis.index import ModuleIndex, callee_name
from kvlint.api.helpers import HelperFact
from kvlint.api.rule import FileContext, Replacement
from kvlint.api.types import Applicability
from kvlint.rules.write_loc._api_words import factory_named, the_mark
from kvlint.rules.write_loc._raw_loc import factory_for, loc_argument, marked_call, raw_loc

# (flagged node, message, fix)
Report = tuple["cst.CSTNode", str, Optional[Replacement]]


def returned_raw(
    ctx: FileContext, value: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int = 0
) -> Optional[HelperFact]:
    """The helper whose result `value` is, when that helper may return the batch's raw loc."""
    if isinstance(value, cst.Call):
        fact = helper_fact(ctx, value, function)
        return fact if fact is not None and fact.returns_raw is not None else None
    if isinstance(value, cst.Name) and function is not None and depth < 8:
        definitions = function_flow(ctx, function).reaching(value)
        if not definitions:
            return None
        facts = []
        for definition in definitions:
            if definition.kind not in ("assign", "walrus") or definition.value is None:
                return None
            facts.append(returned_raw(ctx, definition.value, function, depth + 1))
        return facts[0] if facts and all(facts) else None
    return None


def door_reports(ctx: FileContext, index: ModuleIndex) -> Iterator[Report]:
    """Write doors whose loc is a helper's raw return."""
    for door, loc_index in ctx.contract.write_doors:
        for site in index.calls(door):
            arg = loc_argument(site.call, loc_index)
            if arg is None:
                continue
            fact = returned_raw(ctx, arg.value, site.function)
            if fact is None or fact.returns_raw is None:
                continue
            shown = ctx.code_for(arg.value)
            where = fact.returns_raw
            message = (
                f"`{door}` receives `{shown}`: the helper `{fact.helper}` {where.what} at {where.shown()}, "
                f"the batch's raw loc, so {the_mark(ctx.contract)} is lost; {_no_fix_why(ctx, fact)}"
            )
            yield arg.value, message, None


def return_reports(ctx: FileContext, index: ModuleIndex) -> Iterator[Report]:
    """In a helper's own file: its raw returns, when every return is raw or marked and every caller in
    the tree passes the result straight to a write door, so returning the factory is safe."""
    if not ctx.helpers.defined:
        return
    for function, klass in index.functions:
        fact = ctx.helpers.defined.get((klass.name.value if klass is not None else "", function.name.value))
        if fact is None:
            continue
        for value in _returned_values(function):
            loc = raw_loc(ctx, value, function)
            if loc is None:
                continue
            message = (
                f"`{fact.helper}` returns the batch's raw `{ctx.code_for(value)}`, and every caller in the tree "
                f"passes it straight to a write door's loc: {the_mark(ctx.contract)} is lost there"
            )
            yield value, message, _wrap(ctx, value, loc)


def _returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    class Returns(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                found.append(node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    function.visit(Returns())
    return found


def parameter_reports(ctx: FileContext, index: ModuleIndex) -> Iterator[Report]:
    """Helper calls passing the batch's raw loc as a parameter that reaches a door unmarked."""
    doors = {door for door, _ in ctx.contract.write_doors}
    for name, sites in index.calls_by_name.items():
        if name in doors:
            continue
        for site in sites:
            fact = helper_fact(ctx, site.call, site.function)
            if fact is None or not fact.params:
                continue
            yield from _arguments(ctx, site.call, site.function, fact)


def _arguments(ctx: FileContext, call: cst.Call, function: Optional[cst.FunctionDef], fact: HelperFact) -> Iterator[Report]:
    position = 0
    for arg in call.args:
        if arg.star:
            return
        keyword = arg.keyword.value if arg.keyword is not None else None
        param = fact.door_param(position, keyword)
        if keyword is None:
            position += 1
        if param is None:
            continue
        loc = raw_loc(ctx, arg.value, function)
        through = returned_raw(ctx, arg.value, function) if loc is None else None
        if loc is None and through is None:
            continue
        shown = ctx.code_for(arg.value)
        what = f"the batch's raw `{shown}`" if through is None else f"`{shown}` (which may return the batch's raw loc)"
        message = (
            f"`{callee_name(call)}` (`{fact.helper}`) receives {what} as `{param.param}`, which reaches "
            f"{param.where.what} at {param.where.shown()} unmarked: {the_mark(ctx.contract)} is lost"
        )
        fix = _wrap(ctx, arg.value, loc) if loc is not None else None
        if fix is not None and not param.only_doors:
            fix = Replacement(fix.target, fix.new, Applicability.UNSAFE, fix.description + " (unsafe: the helper also "
                              f"uses `{param.param}` as a tensor)", fix.imports)
            message += f"; `{fact.helper}` also uses `{param.param}` other than as a door's loc, so the fix is unsafe"
        elif fix is None:
            message += "; no fix: mark the loc where it is built"
        yield arg.value, message, fix


def _wrap(ctx: FileContext, value: cst.BaseExpression, loc: object) -> Optional[Replacement]:
    form = getattr(loc, "form", "")
    if form == "slice":
        new, imports = marked_call(ctx, value, loc.batch)  # type: ignore[attr-defined]
        return Replacement(value, new, Applicability.SAFE, "wrap the slice with the batch's mark", imports)
    factory = factory_for(ctx, loc)  # type: ignore[arg-type]
    if factory is None:
        return None
    call, imports, description = factory
    return Replacement(value, call, Applicability.SAFE, description, imports)


def _no_fix_why(ctx: FileContext, fact: HelperFact) -> str:
    factory = factory_named(ctx.contract)
    if not fact.returns_only_raw_or_marked:
        return (f"no fix: `{fact.helper}` also returns other values, so mark each raw return there "
                f"({factory}) and check its other callers")
    if fact.callers_only_doors:
        return (f"the fix is in the helper: `{fact.helper}` ({fact.defined.shown()}) returns "
                f"{factory} instead, safe since every caller passes its result to a door")
    return (f"no fix: return {factory} from `{fact.helper}` ({fact.defined.shown()}) once no caller "
            f"uses its result as a tensor (one does)")
