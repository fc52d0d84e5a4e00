"""Whether a write door's loc is proven marked, raw, or unproven (`kvlint check --prove`).

A loc is *proven marked* when it is:

* a factory result (`KVWriteLoc.for_batch(...)`, `.for_layer(...)`, any arguments);
* a constructor call with the tree's mark keyword (`KVWriteLoc(loc, physical=...)`);
* a local name whose every assignment in the function is proven;
* a conditional whose every arm is proven;
* a call of a helper (resolved by `kvlint.analysis.proof_tree`) whose every return is proven;
* a parameter whose every call site in the tree passes a proven loc;
* a door's own loc parameter forwarded inside the door (its callers are door calls, each proven on its own);
* a call of a function the contract names as keeping the mark (`mark-keeping`) on a proven first argument.

It is *raw* when it is the batch's raw loc (`fb.out_cache_loc`, a slice of it),
a constructor call without the mark, or a loc unwrapped from the write loc
inside a door: what KV101, KV102 and KV103 report. Anything else is
*unproven*, and the verdict says where the proof stops: the link, its file
and line, and why kvlint cannot show it. Assignments are taken all together
(every value a name is given anywhere in the function), so a proof never
depends on which branch ran.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Optional, Union

from kvlint.analysis._ast_imports import bound_names
from kvlint.analysis.proof_tree import Place, ProofTree, own_nodes
from kvlint.api.contract import LOC_KEYWORDS, Contract
from kvlint.api.rule import one_line_code

PROVEN, RAW, UNPROVEN = "proven", "raw", "unproven"
# What a local name is given: a value, or the statement binding it in a way kvlint does not read.
_Bound = Union[ast.expr, ast.stmt]
_MAX_DEPTH = 24


@dataclass(frozen=True)
class Verdict:
    kind: str
    # Where the proof stops (unproven) or what the raw loc is (raw), one line.
    reason: str = ""
    # raw: (path, line) of the raw loc, where KV101-103 report it (or at the door call).
    origin: tuple[str, int] = ("", 0)


_PROVEN = Verdict(PROVEN)


class LocProver:
    def __init__(self, tree: ProofTree, contract: Contract) -> None:
        self.tree = tree
        self.contract = contract
        self.doors = contract.door_loc_index
        self._assigned: dict[Place, dict[str, list[_Bound]]] = {}
        self._memo: dict[tuple[str, Place, str], Verdict] = {}
        self._busy: set[tuple[str, Place, str]] = set()

    def door_loc(self, call: ast.Call) -> Optional[ast.expr]:
        """The loc argument of a door call, or None when it is not passed visibly (`*args`)."""
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        index = self.doors.get(name)
        for keyword in call.keywords:
            if keyword.arg in LOC_KEYWORDS:
                return keyword.value
        if index is None or any(isinstance(arg, ast.Starred) for arg in call.args[: index + 1]):
            return None
        return call.args[index] if index < len(call.args) else None

    def verdict(self, where: Place, expr: ast.expr, depth: int = 0) -> Verdict:
        if depth > _MAX_DEPTH:
            return Verdict(UNPROVEN, f"`{_text(expr)}` ({self._at(where, expr)}) is too many links away to follow")
        contract = self.contract
        if isinstance(expr, ast.Attribute) and expr.attr in contract.loc_attributes:
            return Verdict(RAW, f"`{_text(expr)}` ({self._at(where, expr)})", (where.path, expr.lineno))
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr in contract.loc_attributes:
            return Verdict(RAW, f"`{_text(expr)}` ({self._at(where, expr)})", (where.path, expr.lineno))
        if isinstance(expr, ast.IfExp):
            return _all([self.verdict(where, arm, depth + 1) for arm in (expr.body, expr.orelse)])
        if isinstance(expr, ast.Call):
            return self._call(where, expr, depth)
        if isinstance(expr, ast.Name):
            return self._name(where, expr, depth)
        if (
            isinstance(expr, ast.Attribute) and expr.attr in contract.write_loc_fields
            and where.function.name in self.doors
        ):
            return Verdict(RAW, f"`{_text(expr)}` ({self._at(where, expr)}) unwraps the loc, dropping its mark", (where.path, expr.lineno))
        return Verdict(UNPROVEN, f"`{_text(expr)}` ({self._at(where, expr)}), whose origin kvlint cannot see")

    def _call(self, where: Place, call: ast.Call, depth: int) -> Verdict:
        cls = self.contract.write_loc_class
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in self._factories() and _trailing(func.value) == cls:
            return _PROVEN
        if _trailing(func) == cls:
            if any(keyword.arg == self.contract.mark for keyword in call.keywords):
                return _PROVEN
            return Verdict(RAW, f"`{_text(call)}` ({self._at(where, call)}) is built without `{self.contract.mark}=`", (where.path, call.lineno))
        if _trailing(func) in self.contract.mark_keeping:
            if not call.args:
                return Verdict(UNPROVEN, f"`{_text(call)}` ({self._at(where, call)}) keeps the mark of no argument")
            return self.verdict(where, call.args[0], depth + 1)
        target = self.tree.resolve(where, func)
        if target is None:
            return Verdict(UNPROVEN, f"`{_text(call)}` ({self._at(where, call)}) calls something kvlint cannot resolve")
        return self._guarded(("returns", target, ""), lambda: self._returns(target, depth), target)

    def _returns(self, target: Place, depth: int) -> Verdict:
        returns = [node for node in own_nodes(target.function) if isinstance(node, ast.Return)]
        if not returns or any(node.value is None for node in returns):
            return Verdict(UNPROVEN, f"`{target.name}` ({target.shown()}) returns no loc on some path")
        verdicts = [self.verdict(target, node.value, depth + 1) for node in returns if node.value is not None]
        found = _all(verdicts)
        if found.kind == UNPROVEN:
            return Verdict(UNPROVEN, f"`{target.name}` ({target.shown()}) returns {found.reason}")
        return found

    def _name(self, where: Place, name: ast.Name, depth: int) -> Verdict:
        values = self._assignments(where).get(name.id, [])
        verdicts = []
        if name.id in _params(where):
            # What the caller passed reaches here too unless every path reassigns it: counted as one more value.
            verdicts.append(self._guarded(("param", where, name.id), lambda: self._param(where, name.id, depth), where))
        elif not values:
            return Verdict(UNPROVEN, f"`{name.id}` ({self._at(where, name)}) is not assigned in `{where.name}`")
        for value in values:
            if isinstance(value, ast.stmt):
                verdicts.append(self._bound(where, name, value))
            else:
                verdicts.append(self.verdict(where, value, depth + 1))
        return _all(verdicts)

    def _bound(self, where: Place, name: ast.Name, statement: ast.stmt) -> Verdict:
        """A name bound by a statement kvlint does not follow; raw when, inside a door, it is unpacked
        from a call on the door's own loc (`loc, _, _ = unwrap_write_loc(loc_info)`): the mark is dropped."""
        at = self._at(where, statement)
        value = statement.value if isinstance(statement, ast.Assign) else None
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name):
            incoming = value.args[0].id
            if where.function.name in self.doors and self._param_is_door_loc(where, incoming):
                if self._mark_checked(where, incoming, name.lineno):
                    return _PROVEN
                why = f"`{name.id}` is unwrapped from the door's own `{incoming}` ({at}), dropping its mark"
                return Verdict(RAW, why, (where.path, statement.lineno))
        shown = _text(statement).split(":", 1)[0] if isinstance(statement, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)) else _text(statement)
        return Verdict(UNPROVEN, f"`{name.id}` is bound by `{shown}` ({at}), which kvlint does not follow")

    def _mark_checked(self, where: Place, param: str, before: int) -> bool:
        """Whether the door checks `param`'s mark in a statement of its own body that runs, whatever
        the branch, before line `before`: `self._check_physical_write_loc(loc_info, ...)`, `assert
        write_loc_is_physical(loc_info)`, `if not write_loc_is_physical(loc_info): raise ...`. Past it,
        what is unwrapped from `param` is what a marked loc holds."""
        for statement in where.function.body:
            if (statement.end_lineno or statement.lineno) >= before:
                break
            if isinstance(statement, ast.Expr):
                checks = [statement.value]
            elif isinstance(statement, ast.Assert):
                checks = [statement.test]
            elif isinstance(statement, ast.If) and statement.body and isinstance(statement.body[-1], ast.Raise):
                checks = [statement.test]
            else:
                continue
            if any(self._checks_mark(node, param) for check in checks for node in ast.walk(check)):
                return True
        return False

    def _checks_mark(self, node: ast.AST, param: str) -> bool:
        """A call of the tree's mark predicate on `param`, or of a method on `self` whose definitions
        all read the mark (the pool's own check)."""
        if not (isinstance(node, ast.Call) and any(isinstance(arg, ast.Name) and arg.id == param for arg in node.args)):
            return False
        func = node.func
        if self.contract.mark_predicate and _trailing(func) == self.contract.mark_predicate:
            return True
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
            return False
        kinds = [kind for kind in self.contract.door_kinds if kind.name == func.attr]
        return bool(kinds) and all(kind.needs_mark and kind.takes_write_loc for kind in kinds)

    def _param_is_door_loc(self, where: Place, param: str) -> bool:
        params = _params(where)
        return param in params and (self.doors.get(where.function.name) == params.index(param) or param in LOC_KEYWORDS)

    def _param(self, where: Place, param: str, depth: int) -> Verdict:
        position = _params(where).index(param)
        if where.function.name in self.doors and self._param_is_door_loc(where, param):
            return _PROVEN
        callers = self.tree.callers(where)
        head = f"parameter `{param}` of `{where.name}` ({where.shown()})"
        if not callers:
            return Verdict(UNPROVEN, f"{head} has no caller kvlint can resolve")
        verdicts = []
        for caller, call in callers:
            argument = _argument(call, position, param, _positional_count(where))
            if argument is None:
                return Verdict(UNPROVEN, f"{head} is not passed visibly at {caller.path}:{call.lineno}")
            found = self.verdict(caller, argument, depth + 1)
            if found.kind != PROVEN:
                verb = "gets raw" if found.kind == RAW else "gets"
                found = Verdict(found.kind, f"{head} {verb} {found.reason}", found.origin)
            verdicts.append(found)
        return _all(verdicts)

    def _guarded(self, key: tuple[str, Place, str], compute: Callable[[], Verdict], target: Place) -> Verdict:
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            return Verdict(UNPROVEN, f"a recursive call of `{target.name}` ({target.shown()})")
        self._busy.add(key)
        try:
            found = compute()
        finally:
            self._busy.discard(key)
        self._memo[key] = found
        return found

    def _assignments(self, where: Place) -> dict[str, list[_Bound]]:
        """Every value each local name is given in the function; the statement itself for a binding
        kvlint does not read (a loop, `with`, unpacking, augmented assignment)."""
        if where not in self._assigned:
            found: dict[str, list[_Bound]] = {}
            for node in own_nodes(where.function):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        _bind(found, target, node.value, node)
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    _bind(found, node.target, node.value, node)
                elif isinstance(node, ast.NamedExpr):
                    found.setdefault(node.target.id, []).append(node.value)
                elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                    for bound in bound_names(node):
                        found.setdefault(bound, []).append(node)
            self._assigned[where] = found
        return self._assigned[where]

    def _factories(self) -> set[str]:
        return {name for name in (self.contract.batch_factory, self.contract.layer_factory) if name}

    @staticmethod
    def _at(where: Place, node: ast.AST) -> str:
        return f"{where.path}:{getattr(node, 'lineno', where.function.lineno)}"



def _all(verdicts: list[Verdict]) -> Verdict:
    """Proven when every part is; else the first raw part, else the first unproven one."""
    for kind in (RAW, UNPROVEN):
        for found in verdicts:
            if found.kind == kind:
                return found
    return _PROVEN


def _bind(found: dict[str, list[_Bound]], target: ast.expr, value: ast.expr, statement: ast.stmt) -> None:
    if isinstance(target, ast.Name):
        found.setdefault(target.id, []).append(value)
        return
    for name in ast.walk(target):
        if isinstance(name, ast.Name):
            found.setdefault(name.id, []).append(statement)


def _params(where: Place) -> list[str]:
    """Parameters a caller passes by position (self/cls left out of a method), then keyword-only ones."""
    args = where.function.args
    names = [arg.arg for arg in (*args.posonlyargs, *args.args)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in where.function.decorator_list)
    if where.klass and names and not static:
        names = names[1:]
    return names + [arg.arg for arg in args.kwonlyargs]


def _positional_count(where: Place) -> int:
    args = where.function.args
    return len(_params(where)) - len(args.kwonlyargs)


def _argument(call: ast.Call, position: int, param: str, positional: int) -> Optional[ast.expr]:
    """What a call passes for the parameter `param` at `position` (None: not visibly)."""
    for keyword in call.keywords:
        if keyword.arg == param:
            return keyword.value
    if position >= positional or any(isinstance(arg, ast.Starred) for arg in call.args[: position + 1]):
        return None
    return call.args[position] if position < len(call.args) else None


def _trailing(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _text(node: ast.AST) -> str:
    """The source of `node` quoted as every rule's message quotes code."""
    return one_line_code(ast.unparse(node))
