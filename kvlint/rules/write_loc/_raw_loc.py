"""What the write-loc rules share: finding a door's loc argument, recognising a
batch's raw loc (directly or through local aliases), and spelling `KVWriteLoc`
the way the file already does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import libcst as cst

from kvlint.api.contract import LOC_KEYWORDS, Contract
from kvlint.analysis.dataflow import Definition, function_flow
from kvlint.analysis.index import module_index
from kvlint.api.rule import FileContext

# The loc a layer writes when it is a cross-attention layer; never translated,
# so on its own it is not a batch's raw loc.
ENCODER_LOC = "encoder_out_cache_loc"
CROSS_ATTENTION_FLAG = "is_cross_attention"
# Alias chains (`a = fb.out_cache_loc; b = a; ...`) are followed this deep.
_MAX_ALIAS_DEPTH = 8


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


@dataclass(frozen=True)
class RawLoc:
    """A value that is a batch's raw loc on every path that reaches it.

    `form` says which rewrite keeps its ids: "batch" (the whole loc:
    `for_batch`), "slice" (part of it: wrap with the batch's mark), "layer"
    (the cross-attention idiom: `for_layer`), or "mixed" (raw on every path,
    but the paths disagree, so no single rewrite is right).
    """

    batch: cst.BaseExpression
    form: str
    layer: Optional[cst.BaseExpression] = None


def raw_loc(
    ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int = 0
) -> Optional[RawLoc]:
    """What `expr` is, if every value it can hold is a batch's raw loc.

    A local name is followed through its reaching definitions in `function`;
    one definition that is anything else (a translator call, a parameter, an
    unpacked tuple) makes it unknown, never raw.
    """
    contract = ctx.contract
    if isinstance(expr, cst.Attribute) and expr.attr.value in contract.loc_attributes:
        return RawLoc(expr.value, "batch")
    if isinstance(expr, cst.Subscript) and raw_loc_batch(expr, contract) is not None:
        return RawLoc(expr.value.value, "slice")  # type: ignore[attr-defined]
    if isinstance(expr, cst.IfExp):
        return _cross_attention_idiom(ctx, expr) or _both_branches(ctx, expr, function, depth)
    if isinstance(expr, cst.Name) and function is not None and depth < _MAX_ALIAS_DEPTH:
        return _alias(ctx, expr, function, depth)
    return None


def _cross_attention_idiom(ctx: FileContext, expr: cst.IfExp) -> Optional[RawLoc]:
    """`fb.out_cache_loc if not layer.is_cross_attention else fb.encoder_out_cache_loc`, either order."""
    test, body, orelse = expr.test, expr.body, expr.orelse
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, body, orelse = test.expression, orelse, body
    # Now `test` must be the positive flag, `body` the encoder loc, `orelse` the batch loc.
    if not (isinstance(test, cst.Attribute) and test.attr.value == CROSS_ATTENTION_FLAG):
        return None
    if not (isinstance(body, cst.Attribute) and body.attr.value == ENCODER_LOC):
        return None
    if not (isinstance(orelse, cst.Attribute) and orelse.attr.value in ctx.contract.loc_attributes):
        return None
    if not _same(ctx, body.value, orelse.value):
        return None
    return RawLoc(orelse.value, "layer", test.value)


def _both_branches(
    ctx: FileContext, expr: cst.IfExp, function: Optional[cst.FunctionDef], depth: int
) -> Optional[RawLoc]:
    branches = [raw_loc(ctx, branch, function, depth + 1) for branch in (expr.body, expr.orelse)]
    return _agree(ctx, branches)


def _alias(ctx: FileContext, name: cst.Name, function: cst.FunctionDef, depth: int) -> Optional[RawLoc]:
    definitions = function_flow(ctx, function).reaching(name)
    if not definitions:
        return None
    idiom = _statement_idiom(ctx, function, definitions)
    if idiom is not None:
        return idiom
    found = []
    for definition in definitions:
        if definition.kind not in ("assign", "walrus") or definition.value is None:
            return None
        found.append(raw_loc(ctx, definition.value, function, depth + 1))
    return _agree(ctx, found)


def _statement_idiom(
    ctx: FileContext, function: cst.FunctionDef, definitions: frozenset[Definition]
) -> Optional[RawLoc]:
    """The cross-attention idiom as an `if`/`else` statement, either order:

    `if layer.is_cross_attention: loc = fb.encoder_out_cache_loc` / `else: loc = fb.out_cache_loc`.
    """
    by_form: dict[str, Definition] = {}
    for definition in definitions:
        value = definition.value
        if definition.kind != "assign" or not isinstance(value, cst.Attribute):
            return None
        form = "encoder" if value.attr.value == ENCODER_LOC else "batch"
        if form == "batch" and value.attr.value not in ctx.contract.loc_attributes:
            return None
        by_form[form] = definition
    if len(by_form) != 2 or len(definitions) != 2:
        return None
    encoder, batch = by_form["encoder"], by_form["batch"]
    assert isinstance(encoder.value, cst.Attribute) and isinstance(batch.value, cst.Attribute)
    if not _same(ctx, encoder.value.value, batch.value.value):
        return None
    for statement in _cross_attention_ifs(function):
        test = statement.test
        positive = not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not))
        flag = test if positive else test.expression  # type: ignore[attr-defined]
        assert isinstance(flag, cst.Attribute) and isinstance(statement.orelse, cst.Else)
        cross, plain = (statement.body, statement.orelse.body)
        if not positive:
            cross, plain = plain, cross
        if _holds(cross, encoder.target) and _holds(plain, batch.target):
            return RawLoc(batch.value.value, "layer", flag.value)
    return None


def _cross_attention_ifs(function: cst.FunctionDef) -> list[cst.If]:
    """`if [not] X.is_cross_attention: ... else: ...` statements in `function`."""
    found: list[cst.If] = []

    class Finder(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            test = node.test
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test = test.expression
            if (
                isinstance(test, cst.Attribute)
                and test.attr.value == CROSS_ATTENTION_FLAG
                and isinstance(node.orelse, cst.Else)
            ):
                found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    function.visit(Finder())
    return found


def _holds(block: cst.CSTNode, target: cst.CSTNode) -> bool:
    holds = False

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal holds
            holds = holds or node is target
            return not holds

    block.visit(Finder())
    return holds


def _agree(ctx: FileContext, found: Sequence[Optional[RawLoc]]) -> Optional[RawLoc]:
    """One RawLoc for several paths: the common one, "mixed" when they differ, None if any is not raw."""
    if not found or any(item is None for item in found):
        return None
    first = found[0]
    assert first is not None
    for other in found[1:]:
        assert other is not None
        same_layer = (first.layer is None) == (other.layer is None) and (
            first.layer is None or _same(ctx, first.layer, other.layer)  # type: ignore[arg-type]
        )
        if other.form != first.form or not _same(ctx, other.batch, first.batch) or not same_layer:
            return RawLoc(first.batch, "mixed")
    return first


def _same(ctx: FileContext, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return a.deep_equals(b) or ctx.source_of(a).strip() == ctx.source_of(b).strip()


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
    return cst.Call(func=cst.Attribute(cls, cst.Name(factory)), args=with_commas(args)), imports


def marked_call(
    ctx: FileContext, loc: cst.BaseExpression, batch: cst.BaseExpression
) -> tuple[cst.Call, tuple[tuple[str, str], ...]]:
    """`KVWriteLoc(loc, <mark>=batch.<batch mark>)`: a loc that keeps the batch's mark."""
    cls, imports = write_loc_spelling(ctx)
    return cst.Call(func=cls, args=with_commas([cst.Arg(loc), mark_argument(ctx, batch)])), imports


def mark_argument(ctx: FileContext, batch: cst.BaseExpression) -> cst.Arg:
    """`<mark>=batch.<batch mark>`."""
    return keyword_argument(ctx.contract.mark, cst.Attribute(batch, cst.Name(ctx.contract.batch_mark)))


def keyword_argument(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )


def factory_for(
    ctx: FileContext, loc: RawLoc, extra: Sequence[cst.Arg] = ()
) -> Optional[tuple[cst.Call, tuple[tuple[str, str], ...], str]]:
    """The factory call that carries `loc` with its mark, its imports and a description; None if none fits."""
    contract = ctx.contract
    if loc.form == "batch":
        factory, args = contract.batch_factory, [cst.Arg(loc.batch)]
    elif loc.form == "layer" and contract.layer_factory and loc.layer is not None:
        factory, args = contract.layer_factory, [cst.Arg(loc.batch), cst.Arg(loc.layer)]
    else:
        return None
    call, imports = factory_call(ctx, factory, [*args, *extra])
    shown = ", ".join(ctx.code_for(arg.value) for arg in args) + (", ..." if extra else "")
    return call, imports, f"pass `{contract.write_loc_class}.{factory}({shown})`"


def unfit_form_clause(ctx: FileContext, loc: RawLoc) -> str:
    """Why no factory carries `loc` with its mark, where its form is why ("" otherwise)."""
    if loc.form == "layer" and not ctx.contract.layer_factory:
        return "; the contract has no layer factory, so wrap each branch's loc with its own mark"
    if loc.form == "mixed":
        return "; its definitions differ, so state the mark where it is built"
    return ""


def with_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """`args` separated by ", ", the last without a trailing comma."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [arg.with_changes(comma=comma if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT) for i, arg in enumerate(args)]
