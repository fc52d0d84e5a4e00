"""Whether a file could hold a write-loc finding, read from CPython's tree before LibCST parses it.

KV101-KV103 follow a loc inside one function only (`kvlint.analysis.dataflow`
never leaves it), so each finding sits in one unit next to the names its check
starts from: a door call and the batch's loc attribute, or a call of a helper
with a fact (KV101); a write-loc construction (KV102); a door's own body
unwrapping its incoming loc (KV103). A unit is an outermost function with the
functions nested in it, or the module- and class-level code. Each rule's
`may_flag` asks about units: a unit whose text lacks the rule's words is not
walked (words cost far less than a walk); one that has them is walked once,
and the three rules, asking about the same file in a row, share that walk.
Names are matched, not resolved: a superset of what the checks follow, so no
finding is lost.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Optional

from kvlint.analysis.ast_walk import FUNCTIONS, Function, children, code_units
from kvlint.api.contract import LOC_KEYWORDS, Contract


@dataclass
class UnitNodes:
    """What one walk of a unit found."""

    # Calls by the callee's trailing name (`a.b.c(...)` -> "c"), as the rules' module index files them.
    calls: dict[str, list[ast.Call]] = field(default_factory=dict)
    attributes: set[str] = field(default_factory=set)
    # Every function defined in the unit (itself and those nested in it), by name.
    functions: dict[str, list[Function]] = field(default_factory=dict)
    imports: list[ast.alias] = field(default_factory=list)
    # Callee names of the calls whose result is assigned to a name (`x = f(...)`, `x := f(...)`):
    # a name the data flow follows to a helper's return.
    assigned_calls: set[str] = field(default_factory=set)


class Unit:
    def __init__(self, roots: list[ast.AST], text: Optional[bytes]) -> None:
        self._roots = roots
        # The source lines of a function unit; None for the module- and class-level code, which
        # is spread over the file (and short): it is always walked.
        self._text = text
        self._nodes: Optional[UnitNodes] = None

    def holds_any(self, words: Iterable[bytes]) -> bool:
        """Whether the unit's text may hold one of `words`."""
        return self._text is None or any(word in self._text for word in words)

    def nodes(self) -> UnitNodes:
        if self._nodes is None:
            self._nodes = walk(self._roots)
        return self._nodes


# The three rules ask about the same file in a row: (tree, its units).
_last_units: list[tuple[ast.Module, list[Unit]]] = []


def file_units(data: bytes, tree: ast.Module) -> list[Unit]:
    """The file's units (`kvlint.analysis.ast_walk.code_units`)."""
    for cached_tree, cached_units in list(_last_units):
        if cached_tree is tree:
            return cached_units
    units = [Unit(roots, text) for roots, text in code_units(data, tree)]
    _last_units[:] = [(tree, units)]
    return units


def encoded(words: Iterable[str]) -> tuple[bytes, ...]:
    return tuple(word.encode() for word in words)


def callee(call: ast.Call) -> Optional[str]:
    """The trailing name of what `call` calls, or None (a call of a call, a subscript)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def ast_loc_argument(call: ast.Call, loc_index: int) -> Optional[ast.expr]:
    """`_raw_loc.loc_argument` on CPython's tree: the keyword `loc`/`loc_info`, else the positional
    argument `loc_index`; None where a `*args` at or before the slot hides it."""
    for keyword in call.keywords:
        if keyword.arg in LOC_KEYWORDS:
            return keyword.value
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if position == loc_index:
            return arg
    return None


class MayBeRawLoc:
    """KV101's test of an expression in a unit: whether `raw_loc` or `returned_raw` may take it
    for the batch's raw loc."""

    def __init__(self, contract: Contract, helper_names: frozenset[str], nodes: UnitNodes) -> None:
        self.loc_attributes = contract.loc_attributes
        self.helper_names = helper_names
        self.has_loc = not nodes.attributes.isdisjoint(contract.loc_attributes)
        # A name is raw through its definitions in the function: the loc attribute, or a helper's return.
        self.names_may_be_raw = self.has_loc or not nodes.assigned_calls.isdisjoint(helper_names)

    def holds(self, expr: Optional[ast.expr]) -> bool:
        if isinstance(expr, ast.Subscript):
            expr = expr.value if isinstance(expr.value, ast.Attribute) else None
        if isinstance(expr, ast.Attribute):
            return expr.attr in self.loc_attributes
        if isinstance(expr, ast.IfExp):
            return self.has_loc
        if isinstance(expr, ast.Name):
            return self.names_may_be_raw
        return isinstance(expr, ast.Call) and callee(expr) in self.helper_names


def helper_arguments(call: ast.Call) -> list[ast.expr]:
    """The arguments `_through_helpers` matches to a helper's parameters: not `*args`, not `**mapping`."""
    return [*(arg for arg in call.args if not isinstance(arg, ast.Starred)),
            *(keyword.value for keyword in call.keywords if keyword.arg is not None)]


def walk(roots: list[ast.AST]) -> UnitNodes:
    found = UnitNodes()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            name = callee(node)
            if name is not None:
                found.calls.setdefault(name, []).append(node)
        elif isinstance(node, ast.Attribute):
            found.attributes.add(node.attr)
        elif isinstance(node, FUNCTIONS):
            found.functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.alias):
            found.imports.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.value, ast.Call):
            name = callee(node.value)
            if name is not None:
                found.assigned_calls.add(name)
        stack.extend(children(node))
    return found
