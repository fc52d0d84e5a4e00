"""Learn the tree's binding methods: the functions that set a batch's mark on one of their parameters.

A batch built outside the engine's own construction path keeps its mark's
default (unmarked) until something binds its write plan. Upstream SGLang
spells that `KVLocPlan.bind(self, batch, reader, ...)`, which assigns
`batch.out_cache_loc_is_physical`; `bind_replay` calls `self.bind(batch,
reader)` with its own batch parameter, and `KVIndexTranslator.bind_runner_slots(self,
forward_batch)` calls `self.own_plan(...).bind(forward_batch, self)`, `own_plan`
returning a `KVLocPlan`. So a binding method is:

- a function or method assigning `<param>.<batch mark>` (or `setattr(<param>,
  "<batch mark>", ...)`) for one of its parameters; `self` included (a batch
  class's own method marking itself, called as `batch.<method>()`); or
- one handing a parameter to a binding method in the slot that method marks,
  learned round by round until no new one appears.

A tree reuses a name like `bind` for unrelated methods (a layer boundary's, a
socket's), so a call reaches a binding method only where it can be told which
one it calls: `self.m(...)` in the class defining `m`, `p.m(...)` for a
parameter annotated with the class, `self.f(...).m(...)` for a method `f`
annotated to return it, a module function called by name; or, whatever the
receiver, a name that every definition in the tree binds (`bind_runner_slots`),
in a call whose argument count fits its signature. Each round is a
`kvlint.learn.scope` question, so the contract cache can ask an edited file the
same questions again.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Union

from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned, parsed_tree

# More rounds than any chain of binding helpers a tree holds; the cap guards pathological input.
_MAX_ROUNDS = 8
# The slot of a binding method that marks the object it is called on.
RECEIVER = -1
_NO_LIMIT = 1 << 16

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Binding:
    """A binding method as a call sees it: where it is defined, which argument it marks, how many it takes."""

    # The class defining it ("" for a module function) and its name.
    klass: str
    name: str
    # The positional slot of the marked parameter in a call (`self` left out), or `RECEIVER`.
    index: int
    # The marked parameter's name, for a call passing it by keyword.
    keyword: str
    # Positional parameters without a default, and all of them (`_NO_LIMIT` with `*args`).
    required: int
    maximum: int
    line: int = field(compare=False)

    def marks(self, call: ast.Call, names: set[str]) -> Optional[str]:
        """The name among `names` that `call`, a call of this method, marks; None if none."""
        func = call.func
        if self.index == RECEIVER:
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
                return func.value.id
            return None
        if any(isinstance(arg, ast.Starred) for arg in call.args):
            return None
        given = len(call.args)
        if not (given <= self.maximum and given + len(call.keywords) >= self.required):
            return None
        value = call.args[self.index] if self.index < given else next(
            (keyword.value for keyword in call.keywords if keyword.arg == self.keyword), None
        )
        return value.id if isinstance(value, ast.Name) and value.id in names else None


def learn_binding_methods(batch_mark: str, scope: Scope, learned: Learned) -> None:
    found: dict[Binding, Path] = {}
    direct: list[Binding] = []
    for _ in range(_MAX_ROUNDS):
        known = tuple(sorted(found, key=_order))
        names = tuple(sorted({binding.name for binding in known}))
        defined: dict[str, int] = {}
        for counts in scope.survey(definitions, names).values():
            for name, count in counts:
                defined[name] = defined.get(name, 0) + count
        # A name every definition of which binds: a call of it binds, whatever its receiver.
        sole = tuple(name for name in names if defined.get(name, 0) == sum(b.name == name for b in known))
        new = {
            binding: path
            for path, answer in scope.survey(binding_functions, batch_mark, known, sole).items()
            for binding in answer
            if binding not in found
        }
        if not new:
            break
        direct = direct or list(new)
        found.update(new)
    if not found:
        return
    # The first direct binding (where the mark is assigned) is where the list is said to come from.
    first = min(direct, key=lambda binding: (str(found[binding]), binding.line))
    learned.set("binding-methods", tuple(sorted({binding.name for binding in found})), found[first], first.line)


def _order(binding: Binding) -> tuple[str, str, int, str, int, int]:
    return binding.klass, binding.name, binding.index, binding.keyword, binding.required, binding.maximum


def definitions(data: bytes, names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """How often a file defines each of `names` (`def name(`, a property's getter included)."""
    if not any(f"def {name}".encode() in data for name in names):
        return ()
    counts: dict[str, int] = {}
    for match in _definition_pattern(names).finditer(data):
        name = match.group(1).decode()
        counts[name] = counts.get(name, 0) + 1
    return tuple(sorted(counts.items()))


@lru_cache(maxsize=16)
def _definition_pattern(names: tuple[str, ...]) -> re.Pattern[bytes]:
    return re.compile(rb"\bdef[ \t]+(" + b"|".join(re.escape(name.encode()) for name in names) + rb")[ \t]*\(")


def binding_functions(
    data: bytes, batch_mark: str, known: tuple[Binding, ...], sole: tuple[str, ...]
) -> tuple[Binding, ...]:
    """Each function of a file that sets `<param>.<batch_mark>`, or hands a parameter to a binding
    method of `known` (one it can tell it calls, or one named in `sole`) in the slot that method marks."""
    words = _words(data, batch_mark, known, sole)
    if not words:
        return ()
    tree = parsed_tree(data)
    if tree is None:
        return ()
    lines = data.splitlines(keepends=True)
    finder = _Finder(batch_mark, known, frozenset(sole))
    return tuple(
        binding
        for klass, function, returns in _functions(tree)
        # Most methods of a file holding a word hold none: their text is tested before their tree is walked.
        if any(word in b"".join(lines[function.lineno - 1 : function.end_lineno]) for word in words)
        for binding in finder.bindings(klass, function, returns)
    )


def _words(data: bytes, batch_mark: str, known: tuple[Binding, ...], sole: tuple[str, ...]) -> list[bytes]:
    """The words of `data` that may make one of its functions a binding: the mark, or the call of a
    binding method it may be told it calls (a method of a class the file names, or a name in `sole`)."""
    mark = batch_mark.encode()
    words = [mark] if mark in data and _assigns_mark(batch_mark).search(data) else []
    for binding in known:
        call = f"{binding.name}(".encode()
        if call in data and (not binding.klass or binding.name in sole or binding.klass.encode() in data):
            words.append(call)
    return [word for word in words if word in data]


@lru_cache(maxsize=4)
def _assigns_mark(batch_mark: str) -> re.Pattern[bytes]:
    """`x.<mark> = `, `x.<mark>: T = `, `x.<mark> |= ` or a `setattr(x, "<mark>"`: what a direct
    binding holds; a file that only reads the mark (every backend) is not parsed for it."""
    mark = re.escape(batch_mark.encode())
    return re.compile(rb"\." + mark + rb"[ \t]*(?::[^=\n]*)?[-+*/|&^%@]?=(?!=)|setattr\([^,]+,[ \t]*[\"']" + mark + rb"[\"']")


def _functions(tree: ast.Module) -> Iterator[tuple[str, _Function, dict[str, str]]]:
    """(defining class or "", function, its class's methods' annotated return classes) of every
    module function and method, nested classes' included."""
    pending: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    while pending:
        klass, body = pending.pop()
        returns = {
            stmt.name: name for stmt in body
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (name := _class_named(stmt.returns))
        } if klass else {}
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield klass, stmt, returns
            elif isinstance(stmt, ast.ClassDef):
                pending.append((stmt.name, stmt.body))


def _class_named(annotation: Optional[ast.expr]) -> str:
    """The class an annotation names: `X`, `m.X`, `"X"`, `Optional[X]`; "" for anything else."""
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.slice
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Attribute):
        return annotation.attr
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.rsplit(".", 1)[-1] if annotation.value.replace(".", "").isidentifier() else ""
    return ""


class _Finder:
    def __init__(self, batch_mark: str, known: tuple[Binding, ...], sole: frozenset[str]) -> None:
        self.batch_mark = batch_mark
        self.by_name: dict[str, list[Binding]] = {}
        for binding in known:
            self.by_name.setdefault(binding.name, []).append(binding)
        self.sole = sole

    def bindings(self, klass: str, function: _Function, returns: dict[str, str]) -> Iterator[Binding]:
        arguments = function.args
        positional = [arg.arg for arg in (*arguments.posonlyargs, *arguments.args)]
        every = [*positional, *(arg.arg for arg in arguments.kwonlyargs)]
        params = set(every)
        annotated = {
            arg.arg: name for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
            if (name := _class_named(arg.annotation))
        }
        marked: dict[str, None] = {}
        for node in ast.walk(function):
            handed: Optional[str] = None
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if (
                        isinstance(target, ast.Attribute) and target.attr == self.batch_mark
                        and isinstance(target.value, ast.Name) and target.value.id in params
                    ):
                        marked[target.value.id] = None
            elif isinstance(node, ast.Call):
                handed = _setattr_mark(node, self.batch_mark, params)
                if handed is None:
                    handed = self._handed_to_known(node, params, _Receivers(klass, returns, annotated))
            if handed is not None:
                marked[handed] = None
        bound = positional[1:] if klass and positional and positional[0] in ("self", "cls") else positional
        defaults = len(arguments.defaults)
        for name in marked:
            yield Binding(
                klass=klass,
                name=function.name,
                index=bound.index(name) if name in bound else RECEIVER,
                keyword=name,
                required=len(bound) - defaults,
                maximum=_NO_LIMIT if arguments.vararg is not None else len(bound),
                line=function.lineno,
            )

    def _handed_to_known(self, call: ast.Call, params: set[str], receivers: "_Receivers") -> Optional[str]:
        func = call.func
        callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        candidates = self.by_name.get(callee or "", ())
        if not candidates:
            return None
        if callee not in self.sole:
            klass = receivers.of(func)
            if klass is None:
                return None
            candidates = [binding for binding in candidates if binding.klass == klass]
        for binding in candidates:
            name = binding.marks(call, params)
            if name is not None:
                return name
        return None


@dataclass(frozen=True)
class _Receivers:
    """What a method can tell of the class a call's receiver is."""

    klass: str
    # Its class's methods' annotated return classes; its parameters' annotated classes.
    returns: dict[str, str]
    annotated: dict[str, str]

    def of(self, func: ast.expr) -> Optional[str]:
        """The class defining the callee of a call of `func`, where it can be told ("" for a module function)."""
        if isinstance(func, ast.Name):
            return ""
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name):
            if receiver.id == "self" and self.klass:
                return self.klass
            return self.annotated.get(receiver.id)
        if (
            isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
            and isinstance(receiver.func.value, ast.Name) and receiver.func.value.id == "self"
        ):
            return self.returns.get(receiver.func.attr)
        return None


def _setattr_mark(call: ast.Call, batch_mark: str, params: set[str]) -> Optional[str]:
    func = call.func
    if not (isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) >= 2):
        return None
    target, attribute = call.args[0], call.args[1]
    if isinstance(target, ast.Name) and target.id in params and isinstance(attribute, ast.Constant):
        return target.id if attribute.value == batch_mark else None
    return None
