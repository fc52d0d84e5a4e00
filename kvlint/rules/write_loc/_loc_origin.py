"""Where a loc handed to `KVWriteLoc(...)` comes from, followed across one file (KV102).

Two questions, one walk:

* is the loc one the engine leaves unmarked by design (`unmarked-loc-attributes`,
  learned from the write-loc class's own factories: upstream's `for_layer`
  wraps `encoder_out_cache_loc` without the mark, since nothing translates it)?
* does a second loc (`swa_loc`, `full_loc`) come from the batch's plan (a call
  of the plan's or translator's `write_ids`, upstream `kv_loc_plan.py`), so
  that it may travel under the batch's mark (`for_batch` says so)?

A value is followed through local assignments, a runner's static buffer filled
in place (`self.buf[:n].copy_(x)`, then `self.buf[:n]` handed on, the
CUDA-graph pattern), an attribute set anywhere in the file
(`self.forward_metadata.swa_out_cache_loc = ...`, or `Metadata(name=...)`), a
method of the file it returns, and a parameter through the file's calls of its
function. Read with CPython's `ast` of the file's text, only at a KV102 site.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

import libcst as cst

from kvlint.analysis.ast_walk import line_span
from kvlint.analysis.proof_tree import own_nodes
from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext

# The plan's write ids in a sub-pool (`KVLocPlan.write_ids`, `KVIndexTranslator.write_ids`):
# the same plan as the batch's `out_cache_loc`, so the same mark.
PLAN_WRITE_IDS = "write_ids"
# Calls that make a buffer (its ids come from what fills it) or empty it: no ids of their own.
_NO_IDS = frozenset({"zeros", "empty", "zeros_like", "empty_like", "full", "full_like", "ones", "zero_", "fill_"})
# Calls that keep their receiver's ids.
_KEEPS = frozenset({"to", "long", "int", "clone", "contiguous", "view", "reshape", "flatten"})
_MAX_DEPTH = 8

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]

# Precedence when values meet: one separately produced value decides; then an unknown one.
SEPARATE, UNKNOWN, GOOD, NOTHING = "separate", "unknown", "good", "nothing"
_RANK = {SEPARATE: 0, UNKNOWN: 1, GOOD: 2, NOTHING: 3}


@dataclass(frozen=True)
class Origin:
    """SEPARATE (`what` at `line` made it), UNKNOWN, GOOD (the origin asked for) or NOTHING (None, a bare buffer)."""

    kind: str
    what: str = ""
    line: int = 0


def _meet(origins: list[Origin]) -> Origin:
    if not origins:
        return Origin(UNKNOWN)
    return min(origins, key=lambda origin: _RANK[origin.kind])


class FileOrigins:
    """One file's stores and calls, indexed once, and the two questions asked of its values."""

    def __init__(self, tree: ast.Module, contract: Contract) -> None:
        self.contract = contract
        self.functions: dict[str, list[_Function]] = {}
        self.methods: set[int] = set()
        # Values stored into an attribute of each name (`x.NAME = v`, `Cls(NAME=v)`, `x.NAME[..].copy_(v)`),
        # with the function they are in.
        self.stores: dict[str, list[tuple[ast.expr, Optional[_Function]]]] = {}
        self.calls: dict[str, list[tuple[ast.Call, Optional[_Function]]]] = {}
        self._index(tree, None)

    def _index(self, node: ast.AST, function: Optional[_Function]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(child.name, []).append(child)
                if isinstance(node, ast.ClassDef) and not any(
                    isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list
                ):
                    self.methods.add(id(child))
                inner = child
            elif isinstance(child, (ast.Assign, ast.AnnAssign)) and child.value is not None:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, ast.Attribute):
                        self.stores.setdefault(target.attr, []).append((child.value, function))
            elif isinstance(child, ast.Call):
                name = _trailing(child.func)
                if name is not None:
                    self.calls.setdefault(name, []).append((child, function))
                for keyword in child.keywords:
                    if keyword.arg is not None:
                        self.stores.setdefault(keyword.arg, []).append((keyword.value, function))
                filled = _filled(child)
                if isinstance(filled, ast.Attribute):
                    self.stores.setdefault(filled.attr, []).append((child.args[0], function))
            self._index(child, inner)

    # -- the two questions ----------------------------------------------------

    def by_design(self, expr: ast.expr, function: Optional[_Function]) -> bool:
        """Whether every value `expr` holds is a loc the engine leaves unmarked by design."""
        attributes = self.contract.unmarked_loc_attributes

        def leaf(node: ast.expr) -> Optional[Origin]:
            if isinstance(node, ast.Attribute) and node.attr in attributes:
                return Origin(GOOD)
            return None

        return self._origin(expr, function, leaf, 0, set()).kind == GOOD

    def second_loc(self, expr: ast.expr, function: Optional[_Function]) -> Origin:
        """Whether a second loc comes from the batch's plan (GOOD), is None (NOTHING), is made
        otherwise (SEPARATE, by what and where) or cannot be told (UNKNOWN)."""

        def leaf(node: ast.expr) -> Optional[Origin]:
            if isinstance(node, ast.Call) and _trailing(node.func) == PLAN_WRITE_IDS:
                return Origin(GOOD)
            return None

        return self._origin(expr, function, leaf, 0, set())

    # -- following a value ----------------------------------------------------

    def _origin(
        self,
        expr: ast.expr,
        function: Optional[_Function],
        leaf: Callable[[ast.expr], Optional[Origin]],
        depth: int,
        seen: set[tuple[str, object]],
    ) -> Origin:
        found = leaf(expr)
        if found is not None:
            return found
        if depth > _MAX_DEPTH:
            return Origin(UNKNOWN)

        def follow(values: Iterator[tuple[ast.expr, Optional[_Function]]], key: tuple[str, object]) -> Origin:
            # A value met again while it is being followed adds nothing on that path.
            if key in seen:
                return Origin(NOTHING)
            seen.add(key)
            try:
                return _meet([self._origin(value, where, leaf, depth + 1, seen) for value, where in values])
            finally:
                seen.discard(key)

        if isinstance(expr, ast.Constant) and expr.value is None:
            return Origin(NOTHING)
        if isinstance(expr, ast.IfExp):
            return _meet([self._origin(branch, function, leaf, depth + 1, seen) for branch in (expr.body, expr.orelse)])
        if isinstance(expr, ast.Subscript):
            return self._origin(expr.value, function, leaf, depth + 1, seen)
        if isinstance(expr, ast.Call):
            return self._call(expr, function, leaf, depth, seen, follow)
        if isinstance(expr, ast.Attribute):
            if expr.attr in self.contract.loc_attributes:
                return Origin(UNKNOWN)
            return follow(iter(self.stores.get(expr.attr, [])), ("attr", expr.attr))
        if isinstance(expr, ast.Name) and function is not None:
            return follow(self._name_values(expr.id, function), (expr.id, id(function)))
        return Origin(UNKNOWN)

    def _call(
        self,
        call: ast.Call,
        function: Optional[_Function],
        leaf: Callable[[ast.expr], Optional[Origin]],
        depth: int,
        seen: set[tuple[str, object]],
        follow: Callable[[Iterator[tuple[ast.expr, Optional[_Function]]], tuple[str, object]], Origin],
    ) -> Origin:
        name = _trailing(call.func) or ""
        if name in _NO_IDS:
            return Origin(NOTHING)
        if name in _KEEPS and isinstance(call.func, ast.Attribute):
            return self._origin(call.func.value, function, leaf, depth + 1, seen)
        defined = self.functions.get(name, [])
        if defined:
            returns = ((node.value, each) for each in defined for node in _returns(each) if node.value is not None)
            return follow(returns, ("returns", name))
        return Origin(SEPARATE, f"`{name}(...)`", call.lineno)

    def _name_values(self, name: str, function: _Function) -> Iterator[tuple[ast.expr, Optional[_Function]]]:
        """What the local `name` holds: its assignments and in-place fills, or, for a parameter never
        assigned, what the file's calls of `function` pass it (its default where a call leaves it out)."""
        assigned = False
        for node in own_nodes(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                targets: list[ast.expr] = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
                for value in _bound(name, targets, node.value):
                    assigned = True
                    yield value, function
            elif isinstance(node, ast.Call):
                filled = _filled(node)
                if isinstance(filled, ast.Name) and filled.id == name:
                    yield node.args[0], function
        if assigned:
            return
        yield from self._passed(name, function)

    def _passed(self, param: str, function: _Function) -> Iterator[tuple[ast.expr, Optional[_Function]]]:
        args = function.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        if id(function) in self.methods:
            positional = positional[1:]
        if param not in positional and param not in {a.arg for a in args.kwonlyargs}:
            return
        defaults = dict(zip([a.arg for a in (*args.posonlyargs, *args.args)][-len(args.defaults):], args.defaults))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        for call, where in self.calls.get(function.name, []):
            value = next((k.value for k in call.keywords if k.arg == param), None)
            if value is None and param in positional and positional.index(param) < len(call.args):
                value = call.args[positional.index(param)]
                if isinstance(value, ast.Starred):
                    value = None
            if value is None:
                value = defaults.get(param)
            if value is not None:
                yield value, where


def _bound(name: str, targets: list[ast.expr], value: ast.expr) -> Iterator[ast.expr]:
    """What an assignment binds `name` to: the value, its element in `a, b = x, y`, or, unpacked
    from anything else, the value itself (never followed as a loc: unknown)."""
    for target in targets:
        if isinstance(target, ast.Name) and target.id == name:
            yield value
        elif isinstance(target, (ast.Tuple, ast.List)):
            names = [isinstance(e, ast.Name) and e.id == name for e in target.elts]
            if not any(names):
                continue
            paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            yield value.elts[names.index(True)] if paired else ast.Tuple([], ast.Load())  # type: ignore[attr-defined]


def _trailing(func: ast.expr) -> Optional[str]:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _filled(call: ast.Call) -> Optional[ast.expr]:
    """For `target[...].copy_(value)` or `target.copy_(value)`: `target`, else None."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "copy_" and len(call.args) == 1):
        return None
    target = call.func.value
    return target.value if isinstance(target, ast.Subscript) else target



def _returns(function: _Function) -> Iterator[ast.Return]:
    return (node for node in own_nodes(function) if isinstance(node, ast.Return))


def enclosing_function(tree: ast.Module, line: int, column: int) -> tuple[Optional[_Function], Optional[ast.Call]]:
    """The innermost function holding the call that starts at (`line`, `column`), and that call.

    Only the nodes whose lines hold `line` are walked: a whole walk per call was most of KV102's
    time on a backend of a few thousand lines."""
    best: Optional[_Function] = None
    found: Optional[ast.Call] = None
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line:
            # Walked outer first: the last one holding the line is the innermost.
            best = node
        elif isinstance(node, ast.Call) and node.lineno == line and node.col_offset == column:
            found = node
        pending.extend(child for child in ast.iter_child_nodes(node) if _may_hold(child, line))
    return best, found


def _may_hold(node: ast.AST, line: int) -> bool:
    """Whether `node`'s lines (its decorators' included) may hold `line`; a node without lines may."""
    span = line_span(node)
    return span is None or span[0] <= line <= span[1]


def call_site(ctx: FileContext, call: cst.Call) -> tuple[FileOrigins, Optional[_Function], Optional[ast.Call]]:
    """The file's origins, and the function and CPython call of the LibCST `call` (located only here:
    a KV102 site whose loc or second loc needs following)."""
    # The whole file: the checked module may be a skeleton without the functions a value comes from.
    whole = ctx.whole_tree()
    origins = ctx.analysis(FileOrigins, lambda: FileOrigins(whole, ctx.contract))
    function, found = cpython_call(ctx, call)
    return origins, function, found


def cpython_call(ctx: FileContext, call: cst.Call) -> tuple[Optional[_Function], Optional[ast.Call]]:
    """CPython's call for the LibCST `call`, in the whole file's tree, and the innermost function holding it."""
    # Imported here: `locate` loads LibCST's metadata package, which a worker defers until a file needs it.
    from kvlint.analysis.locate import locate
    whole = ctx.whole_tree()
    parsed = whole if ctx.whole_data is None else ctx.analysis("parsed-ast", lambda: ast.parse(ctx.text()))
    start = locate(ctx.module, [call], parsed)[id(call)].range.start
    return enclosing_function(whole, start.line, start.column)
