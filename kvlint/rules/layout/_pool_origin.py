"""Which pool a buffer comes from, and so whether its dim 0 holds slots or pages.

A buffer accessor's per-layer result is `(slots, row)` on a pool that allocates
`(size + page_size, H, D)` and `(pages, page_size, ...)` on one that allocates
page-split buffers (`page-split-pools`, learned from what each pool class
allocates: `kvlint.learn.pools`). Which it is follows from the accessor's
receiver, as far as this file states its class:

* a constructor call, `NPUPool(...)`: that class exactly;
* an annotation: that class or a subclass; of a parameter (`pool: NPUPool`, `Optional[...]`, `X | None`,
  `"X"`), of an attribute in the class body or where it is assigned;
* a local or `self.<attr>` bound to one of those (every assignment in the
  class is read; one the file cannot type leaves the class unknown).

A value typed as a class the page-split pools derive from (`page-split-bases`)
may be either kind. A receiver of unknown class may be any pool of the tree,
but in a class built only where every pool the tree builds is page-split
(`page-split-only`: a fork's Ascend backend, whose pools are all built under
`if attention_backend == "ascend":`) it is page-split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from kvlint.analysis.closures import closure_reaching
from kvlint.analysis.own_buffers import OwnBuffers
from kvlint.analysis.index import module_index, trailing_name
from kvlint.analysis.walk import code_children
from kvlint.api.rule import FileContext

# What a buffer's dim 0 holds, by the pools it may come from.
STRIDED = "slots"
PAGE_SPLIT = "pages"
EITHER = "either"
# A pool handing out only buffers of its own, never views of the unified buffer (`kvlint.analysis.own_buffers`).
OWN = "own"
# Annotations that name no class: the value may be anything.
_UNTYPED = frozenset({"Any", "object"})
_DEPTH = 6
# A class a value may be an instance of, and whether exactly it (a constructor's result) or maybe a subclass.
Typed = frozenset[tuple[str, bool]]


@dataclass(frozen=True)
class PoolOrigin:
    """The pool classes a buffer may come from (None: the file does not say) and what that makes dim 0."""

    receiver: str
    classes: Optional[Typed]
    verdict: str
    # The page-split pool classes among them (any of the tree's, where `classes` is None).
    split: tuple[str, ...]

    def why(self) -> str:
        """Why dim 0 may hold pages, as a message clause."""
        named = ", ".join(f"`{name}`" for name in self.split[:2]) + (" and others" if len(self.split) > 2 else "")
        if self.classes is None:
            pool = f"which pool `{self.receiver}` is" if self.receiver else "which pool the buffer comes from"
            return f"kvlint cannot tell {pool}, and {named} allocate page-split `(pages, page_size, ...)` buffers"
        if self.verdict == PAGE_SPLIT:
            return f"`{self.receiver}` is {named}, whose buffers are page-split `(pages, page_size, ...)`"
        return f"`{self.receiver}` may be {named}, whose buffers are page-split `(pages, page_size, ...)`"


def pool_origin(ctx: FileContext, receiver: Optional[cst.BaseExpression], function: Optional[cst.FunctionDef]) -> PoolOrigin:
    """What the pool `receiver` (None: not in this file) is said to be, inside `function`."""
    classes = _classes(ctx, receiver, function, 0) if receiver is not None else None
    contract = ctx.contract
    split_pools, split_bases = frozenset(contract.page_split_pools), frozenset(contract.page_split_bases)
    klass = class_of(ctx, function) if function is not None else None
    owner = klass.name.value if klass is not None else ""
    # A pool of unknown class, or typed as a base, is one `function`'s class can meet, but for those
    # it never meets (`page-split-apart`); where it meets no other, it is page-split (`page-split-only`).
    met = split_pools - frozenset(dict(contract.page_split_apart).get(owner, ()))
    shown = ctx.code_for(receiver) if receiver is not None else ""
    if classes is None:
        verdict = (PAGE_SPLIT if owner in contract.page_split_only else EITHER) if met else STRIDED
        return PoolOrigin(shown, None, verdict, tuple(sorted(met)))
    if own_buffers(ctx).of(classes):
        return PoolOrigin(shown, classes, OWN, ())
    kinds: set[str] = set()
    for name, exact in classes:
        if name in split_pools:
            kinds.add(PAGE_SPLIT)
        elif name in split_bases and not exact and met:
            kinds |= {PAGE_SPLIT, STRIDED}
        else:
            kinds.add(STRIDED)
    verdict = kinds.pop() if len(kinds) == 1 else EITHER
    split = tuple(sorted({name for name, exact in classes if name in split_pools or (name in split_bases and not exact and met)}))
    return PoolOrigin(shown, classes, verdict, split)


def own_buffers(ctx: FileContext) -> OwnBuffers:
    return ctx.analysis("own-buffers", lambda: OwnBuffers(ctx.contract))


def _classes(
    ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int
) -> Optional[Typed]:
    """The classes `expr` may be an instance of, by what this file states; None where it does not."""
    if depth > _DEPTH:
        return None
    if function is not None and not isinstance(expr, cst.Name):
        asserted = _asserted(ctx, expr, function)
        if asserted is not None:
            return asserted
    if isinstance(expr, cst.Call):
        name = trailing_name(expr.func)
        return frozenset({(name, True)}) if name is not None and name[:1].isupper() else None
    if isinstance(expr, cst.Name) and function is not None:
        if expr.value == "self":
            klass = class_of(ctx, function)
            return frozenset({(klass.name.value, False)}) if klass is not None else None
        definitions, owner = closure_reaching(ctx, expr, function) or ((), function)
        if not definitions:
            return None
        found: set[tuple[str, bool]] = set()
        for definition in definitions:
            if definition.kind == "param" and definition.param is not None and definition.param.annotation is not None:
                typed = annotated(definition.param.annotation.annotation)
            elif definition.kind in ("assign", "walrus") and definition.value is not None:
                typed = _classes(ctx, definition.value, owner, depth + 1)
            else:
                typed = None
            if typed is None:
                return None
            found |= typed
        return frozenset(found)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        klass = class_of(ctx, function) if function is not None else None
        return _attribute_classes(ctx, klass, expr.attr.value, depth) if klass is not None else None
    return None


def _asserted(ctx: FileContext, expr: cst.BaseExpression, function: cst.FunctionDef) -> Optional[Typed]:
    """The classes an `assert isinstance(<expr>, C)` (or `(C, D)`) among `function`'s statements, before
    the one holding `expr`, states: `self.kv_pool = runner.token_to_kv_pool` after asserting that it is a
    `MiniMaxSparseKVPool`, which it then is, or a subclass."""
    asserts = ctx.analysis(("isinstance-asserts", id(function)), lambda: _isinstance_asserts(ctx, function))
    stated = asserts.get(ctx.code_for(expr)) if asserts else None
    if stated is None:
        return None
    typed, at = stated
    for statement in function.body.body[: at + 1]:
        stack: list[cst.CSTNode] = [statement]
        while stack:
            node = stack.pop()
            if node is expr:
                return None
            stack.extend(code_children(node))
    return typed


def _isinstance_asserts(ctx: FileContext, function: cst.FunctionDef) -> dict[str, tuple[Typed, int]]:
    """The value each first `assert isinstance(value, C)` of `function`'s own statements tests, with the
    classes and the statement's index."""
    found: dict[str, tuple[Typed, int]] = {}
    for at, statement in enumerate(function.body.body):
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            test = small.test if isinstance(small, cst.Assert) else None
            if not (isinstance(test, cst.Call) and trailing_name(test.func) == "isinstance" and len(test.args) == 2):
                continue
            kinds = test.args[1].value
            parts = [element.value for element in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
            names = {trailing_name(part) for part in parts}
            if None not in names:
                found.setdefault(ctx.code_for(test.args[0].value), (frozenset((str(name), False) for name in names), at))
    return found


def annotated(annotation: cst.BaseExpression) -> Optional[Typed]:
    """The classes an annotation allows, each maybe as a subclass (`None` left out); None where it names no class."""
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        inner = text if isinstance(text, str) else None
        return frozenset({(inner.rsplit(".", 1)[-1], False)}) if inner and inner.replace(".", "").isidentifier() else None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        left, right = annotated(annotation.left), annotated(annotation.right)
        return None if left is None or right is None else left | right
    if isinstance(annotation, cst.Subscript) and trailing_name(annotation.value) in ("Optional", "Union"):
        found: set[tuple[str, bool]] = set()
        for element in annotation.slice:
            index = element.slice
            typed = annotated(index.value) if isinstance(index, cst.Index) else None
            if typed is None:
                return None
            found |= typed
        return frozenset(found)
    name = trailing_name(annotation)
    if name == "None":
        return frozenset()
    if name is None or name in _UNTYPED:
        return None
    return frozenset({(name, False)})


def value_classes(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Typed]:
    """The classes `expr`, inside `function`, may be an instance of, as this file states them; None where it does not."""
    return _classes(ctx, expr, function, 0)


def class_of(ctx: FileContext, function: cst.FunctionDef) -> Optional[cst.ClassDef]:
    """The class `function` is a method of, or None."""
    classes = ctx.analysis("function-classes", lambda: {id(f): k for f, k in module_index(ctx).functions})
    return classes.get(id(function))


def _attribute_classes(ctx: FileContext, klass: cst.ClassDef, attribute: str, depth: int) -> Optional[Typed]:
    """The classes `self.<attribute>` may be, from every annotation and assignment of it in `klass`."""
    found: set[tuple[str, bool]] = set()
    statements = ctx.analysis(("attribute-statements", id(klass)), lambda: _attribute_statements(klass))
    for typed_as, value, method in statements.get(attribute, ()):
        if typed_as is not None:
            typed = annotated(typed_as)
        elif value is not None:
            typed = _classes(ctx, value, method, depth + 1)
        else:
            typed = None
        if typed is None:
            return None
        found |= typed
    return frozenset(found) if attribute in statements else None


if TYPE_CHECKING:
    # Not at run time: naming a LibCST class loads LibCST, which a worker defers until a file needs it.
    _Statement = tuple[Optional[cst.BaseExpression], Optional[cst.BaseExpression], Optional[cst.FunctionDef]]


def _attribute_statements(klass: cst.ClassDef) -> dict[str, list[_Statement]]:
    """Per attribute, (annotation, assigned value, method) of each statement of `klass` that types or
    assigns it: one walk of the class for all its attributes, not one per attribute asked."""
    found: dict[str, list[_Statement]] = {}
    for statement in klass.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    found.setdefault(small.target.value, []).append((small.annotation.annotation, None, None))
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        stack: list[cst.CSTNode] = [method.body]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(node, cst.AnnAssign) and (name := _self_attribute(node.target)):
                found.setdefault(name, []).append((node.annotation.annotation, None, method))
            elif isinstance(node, cst.Assign):
                for name in {_self_attribute(target.target) for target in node.targets} - {None}:
                    found.setdefault(str(name), []).append((None, node.value, method))
            elif isinstance(node, cst.AugAssign) and (name := _self_attribute(node.target)):
                found.setdefault(name, []).append((None, None, method))
            stack.extend(code_children(node))
    return found


def _self_attribute(target: cst.BaseExpression) -> Optional[str]:
    """`x` for `self.x`, else None."""
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return target.attr.value
    return None


def is_self_attribute(target: cst.BaseExpression, attribute: str) -> bool:
    return _self_attribute(target) == attribute
