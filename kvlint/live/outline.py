"""A file's outline by lines: which functions the per-file rules look at one by one, and the rest.

`kvlint.running.fragment.skeleton` relies on the per-file rules looking at one
function at a time, with the module's imports and the names it defines as
context. The outline records, from CPython's tree, where each such function
(a *unit*: a top-level `def`, or a method of a top-level class, nested classes
included) starts, where its body starts and where it ends, and which lines
are anything else. `kvlint.live.incremental` uses it to tell whether an
edit stayed inside one unit's body, and to build the small module a unit is
checked in.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional, Union

_INDENT = re.compile(rb"[ \t\f]*")
_Def = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Kept:
    """A statement that is not a unit: module-level code (kept whole where a unit is checked),
    a class-level statement, or a `def` on one line."""

    start: int
    end: int


@dataclass(frozen=True)
class Unit:
    """A function checked on its own: `start` (its first decorator) to `end`, its body from `body`."""

    name: str
    start: int
    body: int
    end: int


@dataclass(frozen=True)
class Class:
    """A class: its header (`start` up to `body`), and its statements (units and classes among them)."""

    name: str
    start: int
    body: int
    end: int
    members: tuple["Item", ...]


Item = Union[Kept, Unit, Class]


@dataclass(frozen=True)
class Outline:
    items: tuple[Item, ...]
    # Dotted names of units another definition shares (or nests under): a finding's scope
    # would not tell them apart, nor would the occurrence counts in fingerprints.
    shared: frozenset[str] = frozenset()

    def units(self) -> list[tuple[Unit, tuple[Class, ...]]]:
        """Every unit, with the classes holding it (outermost first)."""
        found: list[tuple[Unit, tuple[Class, ...]]] = []

        def walk(items: tuple[Item, ...], chain: tuple[Class, ...]) -> None:
            for item in items:
                if isinstance(item, Unit):
                    found.append((item, chain))
                elif isinstance(item, Class):
                    walk(item.members, (*chain, item))

        walk(self.items, ())
        return found

    def statements(self) -> list[tuple[int, int]]:
        """The line ranges holding code: kept statements, units and class headers."""
        ranges: list[tuple[int, int]] = []

        def walk(items: tuple[Item, ...]) -> None:
            for item in items:
                if isinstance(item, Class):
                    ranges.append((item.start, item.body - 1))
                    walk(item.members)
                else:
                    ranges.append((item.start, item.end))

        walk(self.items)
        return ranges

    def edited(self, first: int, delta: int, unit: Optional[Unit] = None, new: Optional[Unit] = None) -> "Outline":
        """The outline once `delta` lines were added (or removed) by an edit starting at line `first`:
        lines from there move (an item holding the edit grows); `unit`, when given, is the
        function the edit rewrote, and becomes `new`."""
        return Outline(tuple(_edited(item, first, delta, unit, new) for item in self.items), self.shared)


def outline(data: bytes, tree: ast.Module) -> Outline:
    lines = data.splitlines(keepends=True)
    items = tuple(_item(node, lines) for node in tree.body)
    return Outline(items, _shared(_definition_names(tree.body, "")))


def _shared(names: list[tuple[str, bool]]) -> frozenset[str]:
    """The functions among `names` whose findings' scope another definition could give too: a name
    defined twice, a class of that name (its methods' scopes start with it), or a function it is
    nested under by name (`def A` and `class A` holding `f` both give `A.f`)."""
    functions = [name for name, is_class in names if not is_class]
    return frozenset(
        name
        for name in functions
        if sum(other == name for other, _ in names) > 1
        or any(other.startswith(name + ".") for other, _ in names)
        or any(name.startswith(other + ".") for other in functions)
    )


def unit_of(node: ast.stmt, lines: list[bytes]) -> Optional[Unit]:
    """`node` as a unit, when it is a function whose body starts on a line of its own."""
    item = _item(node, lines)
    return item if isinstance(item, Unit) else None


def _item(node: ast.stmt, lines: list[bytes]) -> Item:
    end = node.end_lineno or node.lineno
    if not isinstance(node, (*_Def, ast.ClassDef)) or _shares_header_line(lines, node.body[0]):
        return Kept(_start(node), end)
    body = _start(node.body[0])
    if isinstance(node, _Def):
        return Unit(node.name, _start(node), body, end)
    return Class(node.name, _start(node), body, end, tuple(_item(child, lines) for child in node.body))


def _definition_names(body: list[ast.stmt], prefix: str) -> list[tuple[str, bool]]:
    """Dotted names of the functions and classes defined outside any function, and whether each is a class."""
    found: list[tuple[str, bool]] = []
    for node in body:
        if isinstance(node, (*_Def, ast.ClassDef)):
            name = prefix + node.name
            found.append((name, isinstance(node, ast.ClassDef)))
            if isinstance(node, ast.ClassDef):
                found.extend(_definition_names(node.body, name + "."))
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                found.extend(_definition_names([child], prefix))
            elif isinstance(child, ast.ExceptHandler):
                found.extend(_definition_names(child.body, prefix))
    return found


def _edited(item: Item, first: int, delta: int, unit: Optional[Unit], new: Optional[Unit]) -> Item:
    if item is unit and new is not None:
        return new

    def moved(line: int) -> int:
        return line if line < first else line + delta

    if isinstance(item, Class):
        members = tuple(_edited(member, first, delta, unit, new) for member in item.members)
        ends = [moved(item.end), *(member.end for member in members)]
        return Class(item.name, moved(item.start), moved(item.body), max(ends), members)
    if isinstance(item, Unit):
        return Unit(item.name, moved(item.start), moved(item.body), moved(item.end))
    return Kept(moved(item.start), moved(item.end))


def context_source(lines: list[bytes], items: tuple[Item, ...], unit: Unit, chain: tuple[Class, ...]) -> tuple[bytes, int]:
    """A module holding `unit` whole where its classes hold it, and what it is checked with.

    Kept are the module-level statements; every other function and class is
    reduced to its header and `pass`, and the other statements of `unit`'s
    classes are left out (the skeleton blanks them too): a per-file rule reads
    one function, the module's imports and the names it defines. Returns the
    source and the line `unit` starts on in it.
    """
    out: list[bytes] = []
    unit_line = 0

    def emit(item: Item, inside: tuple[Class, ...]) -> None:
        nonlocal unit_line
        if item is unit:
            unit_line = len(out) + 1
            out.extend(lines[unit.start - 1 : unit.end])
        elif isinstance(item, Kept):
            out.extend(lines[item.start - 1 : item.end])
        elif isinstance(item, Class) and inside and item is inside[0]:
            out.extend(lines[item.start - 1 : item.body - 1])
            for member in item.members:
                if member is unit or (isinstance(member, Class) and inside[1:] and member is inside[1]):
                    emit(member, inside[1:])
        else:
            out.extend(lines[item.start - 1 : item.body - 1])
            out.append(_pass_line(lines[item.body - 1]))

    # `unit` (in its classes) comes first: positions are computed by generating the code up to
    # the last flagged node, and the rules do not depend on the order of module-level statements.
    outermost = chain[0] if chain else unit
    emit(outermost, chain)
    for item in items:
        if item is not outermost:
            emit(item, chain)
    return b"".join(out), unit_line


def _pass_line(first_body_line: bytes) -> bytes:
    indent = _INDENT.match(first_body_line)
    assert indent is not None
    return indent.group() + b"pass\n"


def _start(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def _shares_header_line(lines: list[bytes], first: ast.stmt) -> bool:
    """Whether the body starts on the header's last line (`def f(...) -> T: ...`)."""
    return bool(lines[first.lineno - 1][: first.col_offset].strip())


def qualified(unit: Unit, chain: tuple[Class, ...]) -> str:
    return ".".join([*(klass.name for klass in chain), unit.name])


def unit_at(outline_: Outline, first: int, last: int) -> Optional[tuple[Unit, tuple[Class, ...]]]:
    """The unit whose body holds lines `first`..`last` (an insertion: `last` == `first` - 1)."""
    for unit, chain in outline_.units():
        if unit.body <= first and last <= unit.end and first <= unit.end + 1:
            return unit, chain
    return None
