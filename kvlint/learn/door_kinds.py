"""What each class's definition of a door takes: a write loc, a tensor, or nothing it constrains.

Doors are learned by name (`kvlint.learn.doors`); two pools may define a method of
one name and do different things with its loc. Each definition is read for what its
body does with the loc parameter (and the local names copied from it):

- it tests the loc against the write-loc class, reads its mark, or hands it to one
  of the tree's mark checks (`unwrap_write_loc`): it takes a write loc;
- else it uses it as a tensor (indexes a buffer with it, `loc.numel()`, hands it to
  any other call: a kernel, a bounds check): it takes a tensor, and a `KVWriteLoc`
  handed to it breaks code that works;
- else it forwards it to doors: it takes what they take, those reached on `self`
  through the class's hierarchy, on `super()` above it, on `self.<attribute>`
  by the classes the attribute is built as or annotated with, anywhere else by
  every class defining the name;
- else (abstract, always raising, never using it) it constrains nothing.

What the body does outweighs a parameter's annotation, which is not read. A definition
*needs a mark* where it reads the mark, calls the tree's mark predicate, or forwards to a
definition that does: only there does an unmarked loc get refused (`--prove`, KV104). Where
it hands the caller's mark on to another pool, the loc as given or a new one built with the
given loc's mark (`KVWriteLoc(swa_loc, physical=write_loc_is_physical(loc_info))`), the
pools it can be handed to are kept (`DoorKind.hands_mark_to`): a pool whose own gate is off
refuses there where they do (`kvlint.analysis.mark_needs`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from kvlint.analysis.receivers import attribute_classes
from kvlint.api.contract import LOC_KEYWORDS
from kvlint.api.door_kinds import MIXED, OPEN, TENSOR, WRITE_LOC, DoorKind, MarkHandOver, ancestors, reachable, takes_of
from kvlint.learn.accessor_reads import held_attributes
from kvlint.learn.doors import called_name
from kvlint.learn.memo import remembered
from kvlint.learn.scope import Scope
from kvlint.learn.tree import class_bases, parsed_tree

_Function = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class _Forward:
    name: str
    # "self", "super", "attribute" (on `self.<attribute>`) or "other".
    receiver: str
    attribute: str = ""


@dataclass(frozen=True)
class _Definition:
    """One class's method named like a door, as its body uses the loc."""

    name: str
    klass: str
    param: str
    # WRITE_LOC, TENSOR or OPEN from the body alone (OPEN: only forwards, or nothing).
    own: str
    reads_mark: bool
    forwards: tuple[_Forward, ...]
    # `DoorKind.hands_mark_to` as this body alone shows it.
    hands_mark_to: tuple[MarkHandOver, ...]
    # What a message quotes: "passes `loc` to `store_kv_index`".
    evidence: str
    # Lines leave a reading's equality (`kvlint.learn.scope`).
    line: int = field(compare=False)


@dataclass(frozen=True)
class _Reading:
    definitions: tuple[_Definition, ...]
    # (class, attribute, classes it is built as or annotated with) of the classes defining a door.
    attributes: tuple[tuple[str, str, tuple[str, ...]], ...]


def learn_door_kinds(
    scope: Scope, doors: Mapping[str, int], cls: str, mark: str, predicate: str, checks: Sequence[str],
    fields: Sequence[str],
) -> tuple[tuple[DoorKind, ...], tuple[tuple[str, tuple[str, ...]], ...], list[tuple[Path, int]]]:
    """Every class's definition of each door of `doors`, the hierarchy (class -> bases) of the
    classes those definitions belong to, up and down, for `kvlint.api.door_kinds.reachable`, and
    where each definition is (its line is in what a message quotes)."""
    names = tuple(sorted(doors))
    readings = scope.survey(door_definitions, names, cls, mark, predicate, tuple(sorted(checks)), tuple(fields))
    definitions: list[tuple[Path, _Definition]] = []
    attributes: dict[str, dict[str, tuple[str, ...]]] = {}
    for path, reading in readings.items():
        definitions.extend((path, definition) for definition in reading.definitions)
        for klass, attribute, classes in reading.attributes:
            attributes.setdefault(klass, {})[attribute] = classes
    all_bases = {klass: tuple(sorted(parents)) for klass, parents in class_bases(scope).items()}
    resolver = _Resolver(definitions, attributes, all_bases, scope)
    kinds = tuple(resolver.kind(path, definition) for path, definition in definitions)
    related = _related({kind.klass for kind in kinds} | {c for by in attributes.values() for cs in by.values() for c in cs},
                       all_bases)
    hierarchy = tuple((klass, all_bases.get(klass, ())) for klass in sorted(related))
    return kinds, hierarchy, [(path, definition.line) for path, definition in definitions]


def forwarded_checks(scope: Scope, checks: set[str]) -> set[str]:
    """`checks` (the tree's mark checks) and the module functions handing a parameter to one of them
    (`target_loc(loc_info)` unwrapping it with `unwrap_write_loc`), round by round."""
    found = set(checks)
    for _round in range(4):
        added = {name for names in scope.survey(check_forwarders, tuple(sorted(found))).values() for name in names} - found
        if not added:
            break
        found |= added
    return found


def check_forwarders(data: bytes, checks: tuple[str, ...]) -> tuple[str, ...]:
    """The module functions of a file handing one of their parameters to one of `checks`."""
    if not any(f"{name}(".encode() in data for name in checks):
        return ()
    tree = parsed_tree(data)
    found = []
    for function in (node for node in (tree.body if tree is not None else []) if isinstance(node, _Function)):
        params = {arg.arg for arg in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call) and called_name(node.func) in checks
                and any(isinstance(arg, ast.Name) and arg.id in params for arg in node.args)
            ):
                found.append(function.name)
                break
    return tuple(found)


class _Resolver:
    def __init__(
        self, definitions: list[tuple[Path, _Definition]], attributes: dict[str, dict[str, tuple[str, ...]]],
        bases: Mapping[str, Sequence[str]], scope: Scope,
    ) -> None:
        self.definitions = definitions
        self.attributes = attributes
        self.bases = bases
        self.scope = scope
        self.done: dict[tuple[str, str], DoorKind] = {}
        self.busy: set[tuple[str, str]] = set()
        self.by_key = {(d.klass, d.name): (path, d) for path, d in definitions}

    def kind(self, path: Path, definition: _Definition) -> DoorKind:
        key = (definition.klass, definition.name)
        if key in self.done:
            return self.done[key]
        where = f"{self.scope.shown(path)}:{definition.line}"
        if key in self.busy:
            return DoorKind(definition.name, definition.klass, OPEN, False, why=where)
        self.busy.add(key)
        try:
            same = [kind for forward in definition.forwards if forward.receiver in ("self", "super")
                    for kind in self._targets(definition, forward)]
            other = [kind for forward in definition.forwards if forward.receiver not in ("self", "super")
                     for kind in self._targets(definition, forward)]
        finally:
            self.busy.discard(key)
        reached = same + other
        needs_mark = definition.reads_mark or any(kind.needs_mark for kind in reached)
        # What `self` and `super()` run hands the mark on from the same instance.
        hands = tuple(dict.fromkeys((*definition.hands_mark_to, *(to for kind in same for to in kind.hands_mark_to))))
        takes, evidence = definition.own, definition.evidence
        if takes == OPEN and reached:
            takes = takes_of(reached)
            if takes in (TENSOR, MIXED):
                # Name the definition down the chain that does not take a write loc.
                culprit = next(kind for kind in reached if kind.takes in (TENSOR, MIXED))
                evidence = f"{evidence}, and {culprit.shown()}"
        found = DoorKind(definition.name, definition.klass, takes, needs_mark, hands,
                         f"{where}: {evidence}" if evidence else where)
        self.done[key] = found
        return found

    def _targets(self, definition: _Definition, forward: _Forward) -> list[DoorKind]:
        if forward.receiver == "self":
            classes: Optional[list[str]] = [definition.klass]
        elif forward.receiver == "super":
            above = self._ancestors(definition.klass)[1:]
            target = next((c for c in above if (c, forward.name) in self.by_key), None)
            return [self._kind(target, forward.name)] if target is not None else []
        elif forward.receiver == "attribute":
            classes = self._attribute_classes(definition.klass, forward.attribute)
        else:
            classes = None
        stubs = [DoorKind(d.name, d.klass, OPEN, False) for _, d in self.definitions if d.name == forward.name]
        return [self._kind(stub.klass, forward.name) for stub in reachable(stubs, self.bases, forward.name, classes)]

    def _kind(self, klass: str, name: str) -> DoorKind:
        path, definition = self.by_key[(klass, name)]
        return self.kind(path, definition)

    def _attribute_classes(self, klass: str, attribute: str) -> Optional[list[str]]:
        for owner in self._ancestors(klass):
            classes = self.attributes.get(owner, {}).get(attribute)
            if classes:
                return list(classes)
        return None

    def _ancestors(self, klass: str) -> list[str]:
        return ancestors(klass, self.bases)


def _related(classes: set[str], bases: Mapping[str, Sequence[str]]) -> set[str]:
    """`classes`, their ancestors and their descendants: what `reachable` walks."""
    children: dict[str, set[str]] = {}
    for child, parents in bases.items():
        for parent in parents:
            children.setdefault(parent, set()).add(child)
    found: set[str] = set()
    for start, step in ((classes, lambda c: bases.get(c, ())), (classes, lambda c: children.get(c, ()))):
        pending = list(start)
        while pending:
            current = pending.pop()
            for nxt in step(current):
                if nxt not in found:
                    found.add(nxt)
                    pending.append(nxt)
    return found | classes


def door_definitions(
    data: bytes, names: tuple[str, ...], cls: str, mark: str, predicate: str, checks: tuple[str, ...],
    fields: tuple[str, ...],
) -> Optional[_Reading]:
    """Each class method of a file named like a door, read for what it does with its loc."""
    if not any(f"def {name}(".encode() in data for name in names):
        return None
    return remembered("door-definitions", data, (names, cls, mark, predicate, checks, fields),
                      partial(_read, data, names, cls, mark, predicate, checks, fields))


def _read(
    data: bytes, names: tuple[str, ...], cls: str, mark: str, predicate: str, checks: tuple[str, ...],
    fields: tuple[str, ...],
) -> Optional[_Reading]:
    tree = parsed_tree(data)
    if tree is None:
        return None
    definitions: list[_Definition] = []
    attributes: list[tuple[str, str, tuple[str, ...]]] = []
    for klass in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        defined = {item.name: item for item in klass.body if isinstance(item, _Function)}
        methods = [method for name, method in defined.items() if name in names]
        for method in methods:
            param = _loc_param(method, names)
            if param is not None:
                body = _Body(method, param, defined, names, cls, mark, predicate, checks, fields)
                definitions.append(body.definition(klass.name))
        if methods:
            attributes.extend((klass.name, attribute, tuple(sorted(classes))) for attribute, classes in attribute_classes(klass))
    return _Reading(tuple(definitions), tuple(attributes)) if definitions else None


def _loc_param(method: ast.FunctionDef | ast.AsyncFunctionDef, names: tuple[str, ...]) -> Optional[str]:
    params = [arg.arg for arg in (*method.args.posonlyargs, *method.args.args, *method.args.kwonlyargs)]
    if params and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in method.decorator_list):
        params = params[1:]
    return next((p for p in params if p in LOC_KEYWORDS), None) or next((p for p in params if "loc" in p), None)


class _Body:
    """What one method does with its loc parameter."""

    def __init__(
        self, method: ast.FunctionDef | ast.AsyncFunctionDef, param: str,
        class_methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], doors: tuple[str, ...], cls: str, mark: str,
        predicate: str, checks: tuple[str, ...], fields: tuple[str, ...],
    ) -> None:
        self.method, self.param, self.class_methods, self.doors = method, param, class_methods, doors
        self.cls, self.mark, self.predicate, self.checks, self.fields = cls, mark, predicate, checks, fields
        self.carriers = _carriers(method, param)
        # Locals holding the given loc's mark (`physical = write_loc_is_physical(loc_info)`), then
        # locals holding a new write loc that carries it (`write_loc = KVWriteLoc(x, physical=physical)`).
        self.mark_holders: set[str] = set()  # empty while the first reading reads it
        self.rewrapped: set[str] = set()
        self.mark_holders = _locals_bound(method, self._reads_mark)
        self.rewrapped = _locals_bound(method, self._rewraps)

    def definition(self, klass: str) -> _Definition:
        checked: Optional[str] = None
        # The first use of the loc as a tensor in the source, where it is and what it is.
        tensor: Optional[tuple[int, int, str]] = None
        reads_mark = False
        forwards: list[_Forward] = []
        hands: list[MarkHandOver] = []
        loc = f"`{self.param}`"
        for node in ast.walk(self.method):
            if isinstance(node, ast.Attribute) and self._carried(node.value):
                if node.attr == self.mark:
                    reads_mark, checked = True, checked or f"reads {loc}'s mark"
                elif node.attr not in self.fields:
                    tensor = _first(tensor, node, f"uses {loc} as a tensor (`.{node.attr}`)")
            elif isinstance(node, ast.Subscript) and any(self._carried(n) for n in ast.walk(node.slice)):
                tensor = _first(tensor, node, f"indexes `{_shown(node.value)}` with {loc}")
            elif isinstance(node, ast.Call) and self._passes(node):
                callee = called_name(node.func) or ""
                if callee == "isinstance":
                    checked = checked or f"tests {loc} against `{self.cls}`"
                elif callee == self.predicate:
                    reads_mark, checked = True, checked or f"hands {loc} to the mark predicate `{callee}`"
                elif callee in self.checks:
                    checked = checked or f"hands {loc} to the mark check `{callee}`"
                elif callee in self.doors:
                    forwards.append(_forward(node.func, callee))
                    hands += self._hands(node, forwards[-1])
                else:
                    tensor = _first(tensor, node, f"passes {loc} to `{callee or _shown(node.func)}`")
            elif isinstance(node, ast.Call) and called_name(node.func) in self.doors and self._passes_mark(node):
                forwards.append(_forward(node.func, called_name(node.func) or ""))
                hands += self._hands(node, forwards[-1])
        if checked is not None:
            own, evidence = WRITE_LOC, checked
        elif tensor is not None:
            own, evidence = TENSOR, tensor[2]
        else:
            own = OPEN
            evidence = f"forwards {loc} to `{forwards[0].name}`" if forwards else f"does not use {loc}"
        return _Definition(self.method.name, klass, self.param, own, reads_mark, tuple(forwards),
                           tuple(dict.fromkeys(hands)), evidence, self.method.lineno)

    def _carried(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.carriers

    def _reads_mark(self, node: ast.AST) -> bool:
        """`node` is the given loc's mark: `predicate(loc)`, `loc.<mark>`, or a local holding it."""
        if isinstance(node, ast.Call) and called_name(node.func) == self.predicate:
            return any(self._carried(arg) for arg in node.args)
        if isinstance(node, ast.Attribute):
            return node.attr == self.mark and self._carried(node.value)
        return isinstance(node, ast.Name) and node.id in self.mark_holders

    def _rewraps(self, node: ast.AST) -> bool:
        """`node` is a new write loc carrying the given loc's mark (`KVWriteLoc(x, physical=...)`), or a local holding one."""
        if isinstance(node, ast.Call) and called_name(node.func) == self.cls:
            return any(keyword.arg == self.mark and self._reads_mark(keyword.value) for keyword in node.keywords)
        return isinstance(node, ast.Name) and node.id in self.rewrapped

    def _passes_mark(self, call: ast.Call) -> bool:
        return any(self._rewraps(value) for value in (*call.args, *(keyword.value for keyword in call.keywords)))

    def _hands(self, call: ast.Call, forward: _Forward) -> list[MarkHandOver]:
        """The hand-over `call` (read as `forward`) makes where it is on another pool."""
        if not isinstance(call.func, ast.Attribute):
            return [MarkHandOver(forward.name, ())]
        if forward.receiver in ("self", "super"):
            return []
        held, through = held_attributes(self.class_methods, call.func.value, self.method)
        return [MarkHandOver(forward.name, tuple(sorted(held or ())), tuple(sorted(through)) if held else ())]

    def _passes(self, call: ast.Call) -> bool:
        values = [*call.args, *(keyword.value for keyword in call.keywords)]
        return any(self._carried(value.value if isinstance(value, ast.Starred) else value) for value in values)


def _first(found: Optional[tuple[int, int, str]], node: ast.expr, what: str) -> tuple[int, int, str]:
    here = (node.lineno, node.col_offset, what)
    return here if found is None or here[:2] < found[:2] else found


def _forward(func: ast.expr, name: str) -> _Forward:
    owner = func.value if isinstance(func, ast.Attribute) else None
    if isinstance(owner, ast.Name) and owner.id == "self":
        return _Forward(name, "self")
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        return _Forward(name, "super")
    if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
        return _Forward(name, "attribute", owner.attr)
    return _Forward(name, "other")


def _carriers(method: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> set[str]:
    """`param` and the local names assigned from it as it is (`loc = loc_info` on some branch)."""
    copies = [
        (node.targets[0].id, node.value.id) for node in ast.walk(method)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Name)
    ]
    names = {param}
    for _hop in range(3):
        names |= {target for target, value in copies if value in names}
    return names


def _locals_bound(method: ast.FunctionDef | ast.AsyncFunctionDef, holds: Callable[[ast.AST], bool]) -> set[str]:
    """The local names an assignment in `method` binds to a value `holds` accepts."""
    return {
        node.targets[0].id for node in ast.walk(method)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and holds(node.value)
    }


def _shown(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())
