"""Branches a class's constructor rules out: no finding is reported in code that cannot run.

`assert self.use_mla is False` in `__init__` (the XPU backend: "doesn't support MLA yet") makes
every `if self.use_mla:` body, and every `else` of `if not self.use_mla:`, in the class's own
methods dead code: a door call or a paging view there never runs. The assert holds for the
class's instances only while nothing binds the attribute again, so it counts only where

* it is a statement of `__init__` itself (not under a branch, a loop or a `try`);
* no later statement of `__init__`, and no other method of the class, binds the attribute
  (`self.x = ...`, `self.x += ...`, an unpacking, `setattr(self, "x", ...)`);
* no class of the same file derives from the class (a subclass's constructor may skip the
  assert, or bind the attribute after it).

Tests are read three-valued: `self.x`, `not ...`, `... is True`/`is False` (and `==`, `!=`, `is
not`), `and`, `or`; anything else is unknown and rules nothing out. The bindings are read from
the whole file (CPython's `ast`): the rules may have parsed a skeleton of it whose other methods
are cut down to `pass` (`FileContext.whole_tree`).
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from kvlint.api.rule import FileContext

# What an assert states of an attribute: its truth, and whether it is exactly that bool.
_Known = tuple[bool, bool]


def ruled_out(ctx: FileContext) -> frozenset[int]:
    """The ids of the nodes (of `ctx.module`) in branches their class's constructor rules out."""
    candidates = [node for node in ctx.module.body if isinstance(node, cst.ClassDef) and _asserts(node)]
    if not candidates:
        return frozenset()
    whole = ctx.whole_tree()
    dead: set[int] = set()
    for klass in candidates:
        flags = _invariants(whole, klass.name.value)
        if flags:
            for method in _methods(klass):
                if method.name.value != "__init__":
                    _collect_dead(method.body, flags, dead)
    return frozenset(dead)


def _asserts(klass: cst.ClassDef) -> bool:
    """Whether the class's `__init__` has an `assert` statement of its own (a cheap look first)."""
    init = next((method for method in _methods(klass) if method.name.value == "__init__"), None)
    return init is not None and any(_is_assert(statement) for statement in _statements(init))


def _methods(klass: cst.ClassDef) -> list[cst.FunctionDef]:
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
    return [statement for statement in body if isinstance(statement, cst.FunctionDef)]


def _statements(function: cst.FunctionDef) -> list[cst.BaseStatement]:
    return list(function.body.body) if isinstance(function.body, cst.IndentedBlock) else []


def _is_assert(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(isinstance(small, cst.Assert) for small in statement.body)


def _invariants(whole: ast.Module, name: str) -> dict[str, _Known]:
    """What the constructor of the module-level class `name` asserts of its attributes, as it stands."""
    classes = [node for node in whole.body if isinstance(node, ast.ClassDef)]
    klass = next((node for node in classes if node.name == name), None)
    if klass is None or any(_base_name(base) == name for other in classes for base in other.bases):
        return {}
    methods = [node for node in klass.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    init = next((method for method in methods if method.name == "__init__"), None)
    if init is None:
        return {}
    found: dict[str, _Known] = {}
    for index, statement in enumerate(init.body):
        if not isinstance(statement, ast.Assert):
            continue
        stated = _stated(statement.test)
        if stated is None:
            continue
        attribute, known = stated
        later = init.body[index + 1:]
        others = [method for method in methods if method is not init]
        # "*": `setattr(self, name, ...)` with a name kvlint cannot read may bind any attribute.
        if not any({attribute, "*"} & _bound(node) for node in (*later, *others)):
            found[attribute] = known
    return found


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def _stated(test: ast.expr) -> Optional[tuple[str, _Known]]:
    """`self.x` / `not self.x` / `self.x is False` (`==`, `is True`): the attribute and what holds."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _stated(test.operand)
        return None if inner is None or inner[1][1] else (inner[0], (not inner[1][0], False))
    attribute = _self_attribute(test)
    if attribute:
        return attribute, (True, False)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)):
        attribute, right = _self_attribute(test.left), test.comparators[0]
        if attribute and isinstance(right, ast.Constant) and isinstance(right.value, bool):
            return attribute, (right.value, True)
    return None


def _self_attribute(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return ""


def _bound(node: ast.AST) -> set[str]:
    """The `self` attributes `node` binds, `setattr(self, "x", ...)` included."""
    bound: set[str] = set()
    for inner in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(inner, ast.Assign):
            targets = inner.targets
        elif isinstance(inner, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = [inner.target]
        elif isinstance(inner, (ast.For, ast.AsyncFor)):
            targets = [inner.target]
        elif isinstance(inner, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in inner.items if item.optional_vars is not None]
        elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in ("setattr", "delattr"):
            if inner.args and isinstance(inner.args[0], ast.Name) and inner.args[0].id == "self":
                name = inner.args[1] if len(inner.args) > 1 else None
                bound.add(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "*")
        elif isinstance(inner, ast.Delete):
            targets = inner.targets
        for target in targets:
            bound.update(_self_attribute(part) for part in ast.walk(target) if _self_attribute(part))  # type: ignore[arg-type]
    return bound


def _collect_dead(node: cst.CSTNode, flags: dict[str, _Known], dead: set[int]) -> None:
    for child in node.children:
        if isinstance(child, (cst.If, cst.IfExp)):
            held = _holds(child.test, flags)
            ruled = child.body if held is False else child.orelse if held is True else None
            if ruled is not None:
                _mark(ruled, dead)
        _collect_dead(child, flags, dead)


def _mark(node: cst.CSTNode, dead: set[int]) -> None:
    todo = [node]
    while todo:
        current = todo.pop()
        dead.add(id(current))
        todo.extend(current.children)


def _holds(test: cst.BaseExpression, flags: dict[str, _Known]) -> Optional[bool]:
    """Whether `test` holds under what the constructor asserts; None where that does not decide it."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _holds(test.expression, flags)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _holds(test.left, flags), _holds(test.right, flags)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else True if left is right is True else None
        return True if True in (left, right) else False if left is right is False else None
    attribute = _cst_self_attribute(test)
    if attribute in flags:
        return flags[attribute][0]
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        attribute = _cst_self_attribute(test.left)
        comparator = target.comparator
        if attribute in flags and isinstance(comparator, cst.Name) and comparator.value in ("True", "False"):
            truth, exact = flags[attribute]
            if not exact:
                return None
            same = truth is (comparator.value == "True")
            if isinstance(target.operator, (cst.Is, cst.Equal)):
                return same
            if isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
                return not same
    return None


def _cst_self_attribute(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return ""
