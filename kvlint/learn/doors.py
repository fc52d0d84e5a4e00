"""Write doors learned from what a pool does with its loc, not from the method's name.

In a tree that defines the write-loc class with its mark, a door is a method
with a parameter that reaches the tree's own mark check or unwrap: passed to a
module function that tests `isinstance(p, <write-loc class>)` or reads
`p.<mark>` (`unwrap_write_loc`, `write_loc_is_physical`), tested or read so in
the method itself, or forwarded as the loc of another door (a wrapper pool's
method is a door whatever its name). Doors are found round by round until no
forwarding adds one. A method named like a door whose loc never reaches the
mark (an index-buffer writer taking a plain tensor by design) is not one.

In a tree without the mark, there is no check for a loc to reach: the
`set_..._kv_buffer` name pattern stays, and a method writing its own pool's K/V
buffers at a parameter is a door whatever its name (`kvlint.learn.fork_doors`).

Each door keeps why it is one (file, line, the link), for `kvlint contract`.
Calls are matched by the callee's trailing name, as the rules match door
calls, so a door inherited from a base pool in another file is a door on its
subclasses too.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Iterator, Optional, Union

from kvlint.api.contract import DEFAULT_WRITE_DOORS, LOC_KEYWORDS
from kvlint.learn.memo import remembered
from kvlint.learn.scope import Scope
from kvlint.learn.tree import DOOR_DEF, parsed_tree

DOOR_NAME = re.compile(r"^_?set_(\w+_)?kv_buffer$")
_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
# Forwarding chains longer than this are not followed (a wrapper of a wrapper of ... a pool).
_MAX_ROUNDS = 8


@dataclass(frozen=True)
class Door:
    name: str
    # The loc parameter's position among the arguments a caller passes (self not counted).
    index: int
    path: Path
    line: int
    why: str

    def reason(self, shown: str) -> str:
        """Why it is a door, `shown` naming its file (`Scope.shown`)."""
        return f"{shown}:{self.line}: {self.why}"


def doors_by_mark(scope: Scope, write_loc_class: str, mark: str) -> list[Door]:
    """The doors of a tree whose write-loc class `write_loc_class` carries `mark`."""
    checks: dict[str, int] = {}
    for found_checks in scope.survey(mark_checks, write_loc_class, mark).values():
        checks.update(found_checks)
    # Round one reads the files naming the class, its mark or a mark check; each later round
    # the files calling a door found in the round before (the forwarding wrappers).
    words = {write_loc_class, f".{mark}", *checks}
    # In the order first read, whichever round read them.
    methods: dict[tuple[Path, int], _Method] = {}
    doors: dict[str, Door] = {}
    for _round in range(_MAX_ROUNDS):
        read = scope.survey(methods_holding, tuple(sorted(word.encode() for word in words)), write_loc_class, mark)
        for path, file_methods in read.items():
            for method in file_methods:
                methods.setdefault((path, method.first), method)
        found = []
        for (path, _line), method in methods.items():
            door = None if method.name in doors else method.door(path, write_loc_class, mark, checks, doors)
            if door is not None:
                doors[door.name] = door
                found.append(door.name)
        if not found:
            break
        words = {f"{name}(" for name in found}
    return sorted(doors.values(), key=lambda door: door.name)


def methods_holding(data: bytes, words: tuple[bytes, ...], write_loc_class: str, mark: str) -> tuple["_Method", ...]:
    """What door learning reads of each method of a file holding one of `words`. A file is split
    into its methods once, and each method parsed once (`remembered`), whichever round reads it."""
    if not any(word in data for word in words):
        return ()
    read = []
    for piece in _pieces(data, methods=True):
        if piece.holds(words):
            method = remembered("method", piece.text, (write_loc_class, mark),
                                partial(_read_method, piece.text, write_loc_class, mark))
            if method is not None:
                read.append(method.moved(piece.first))
    return tuple(read)


# Lines leave a reading's equality (`kvlint.learn.scope`): a door's line is in its reason,
# which pins its file, and nothing else learning does depends on them.
@dataclass(frozen=True)
class _Call:
    callee: str
    # The plain name at each position (None: anything else; the list stops at a `*args`).
    positional: tuple[Optional[str], ...]
    keywords: tuple[tuple[str, str], ...]
    line: int = field(compare=False)

    def passes(self, names: set[str], position: int, keywords: tuple[str, ...]) -> bool:
        if position < len(self.positional) and self.positional[position] in names:
            return True
        return any(keyword in keywords and name in names for keyword, name in self.keywords)


@dataclass(frozen=True)
class _Method:
    """What door learning needs of one method, read in one walk."""

    name: str
    params: tuple[str, ...]
    # The names tested against the write-loc class or read for its mark, and where first.
    checked: tuple[str, ...]
    checked_lines: tuple[int, ...] = field(compare=False)
    calls: tuple[_Call, ...]
    # (target, value) of each `name = other_name`.
    copies: tuple[tuple[str, str], ...]
    # The index of the method's first line in its file (its lines are counted from there).
    first: int = field(default=0, compare=False)

    @classmethod
    def read(cls, method: _Function, write_loc_class: str, mark: str) -> "_Method":
        checked: dict[str, int] = {}
        calls: list[_Call] = []
        copies: list[tuple[str, str]] = []
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and node.attr == mark and isinstance(node.value, ast.Name):
                checked.setdefault(node.value.id, node.lineno)
            elif isinstance(node, ast.Call):
                callee = called_name(node.func)
                if callee == "isinstance" and len(node.args) == 2 and _is_name(node.args[1], write_loc_class):
                    if isinstance(node.args[0], ast.Name):
                        checked.setdefault(node.args[0].id, node.lineno)
                elif callee is not None:
                    calls.append(_Call(callee, _positional(node), tuple(
                        (k.arg, k.value.id) for k in node.keywords if k.arg and isinstance(k.value, ast.Name)
                    ), node.lineno))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if isinstance(node.value, ast.Name):
                    copies.append((node.targets[0].id, node.value.id))
        return cls(method.name, tuple(method_params(method)), tuple(checked), tuple(checked.values()), tuple(calls), tuple(copies))

    def moved(self, first: int) -> "_Method":
        """This reading of a method whose file holds it from line index `first` on: its lines the file's."""
        calls = tuple(replace(call, line=call.line + first) for call in self.calls)
        return replace(self, checked_lines=tuple(line + first for line in self.checked_lines), calls=calls, first=first)

    def door(
        self, path: Path, cls: str, mark: str, checks: dict[str, int], doors: dict[str, Door]
    ) -> Optional[Door]:
        for index, param in enumerate(self.params):
            if param in self.checked:
                why = f"`{param}` is tested against `{cls}` or read for `.{mark}`"
                return Door(self.name, index, path, self.checked_lines[self.checked.index(param)], why)
            carriers = self._carriers(param)
            for call in self.calls:
                if call.callee in checks and call.passes(carriers, checks[call.callee], ()):
                    return Door(self.name, index, path, call.line, f"`{param}` reaches the mark check `{call.callee}`")
                door = doors.get(call.callee)
                if door is not None and call.callee != self.name and call.passes(carriers, door.index, LOC_KEYWORDS):
                    return Door(self.name, index, path, call.line, f"`{param}` is forwarded to the door `{call.callee}`")
        return None

    def _carriers(self, param: str) -> set[str]:
        """`param` and the local names assigned from it as they are (`loc = loc_info` on some branch)."""
        names = {param}
        for _hop in range(3):
            names |= {target for target, value in self.copies if value in names}
        return names


def _read_method(text: bytes, write_loc_class: str, mark: str) -> Optional[_Method]:
    """The reading of a method's text, its lines counted from the text's first (`_Method.moved`)."""
    function = _Piece(0, text).parse()
    return None if function is None else _Method.read(function, write_loc_class, mark)


def _positional(call: ast.Call) -> tuple[Optional[str], ...]:
    names: list[Optional[str]] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            break
        names.append(arg.id if isinstance(arg, ast.Name) else None)
    return tuple(names)


def doors_by_name(scope: Scope) -> list[Door]:
    """Methods named like `set_*kv_buffer` taking a `loc`/`loc_info` parameter (a tree without the mark)."""
    doors: dict[str, Door] = {}
    for path, named in scope.survey(named_doors).items():
        for name, index, line, param in named:
            if name not in doors:
                doors[name] = Door(name, index, path, line, f"named like a door, `{param}`")
    return sorted(doors.values(), key=lambda door: door.name)


def named_doors(data: bytes) -> tuple[tuple[str, int, int, str], ...]:
    """(name, loc index, line, loc parameter) of each class method of a file named like a door
    (the defaults left out) with a `loc`/`loc_info` parameter."""
    tree = parsed_tree(data) if DOOR_DEF.search(data) else None
    found = []
    for method in class_methods(tree) if tree is not None else ():
        if method.name in DEFAULT_WRITE_DOORS or not DOOR_NAME.match(method.name):
            continue
        params = method_params(method)
        index = next((i for i, name in enumerate(params) if name in LOC_KEYWORDS), None)
        if index is not None:
            found.append((method.name, index, method.lineno, params[index]))
    return tuple(found)


def mark_checks(data: bytes, cls: str, mark: str) -> tuple[tuple[str, int], ...]:
    """The module functions of a file testing their parameter against the write-loc class or
    reading its mark, as (name, the parameter's position): `unwrap_write_loc(loc_info)` -> 0."""
    words = (cls.encode(), f".{mark}".encode())
    if words[0] not in data:
        return ()
    found = []
    functions = (piece.parse() for piece in _pieces(data, methods=False) if piece.holds(words))
    for node in (function for function in functions if function is not None):
        params = [arg.arg for arg in (*node.args.posonlyargs, *node.args.args)]
        for position, param in enumerate(params):
            if _checks_itself(node, param, cls, mark) is not None:
                found.append((node.name, position))
                break
    return tuple(found)


_DEF_LINE = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]")


@dataclass(frozen=True)
class _Piece:
    """One function's lines as its file holds them, its decorators included."""

    # The index of its first line in the file.
    first: int
    text: bytes

    def holds(self, words: tuple[bytes, ...]) -> bool:
        return any(word in self.text for word in words)

    def parse(self) -> Optional[_Function]:
        """The function, dedented, its line numbers the file's own (blank lines stand for the
        lines above it); None for a piece that does not parse alone."""
        function = _parsed(self.first, self.text)
        if function is None:
            # The last method of a class runs on to the next `def` at its indent, past the code
            # that follows its class (`class B:`, a module statement): cut there and try again.
            own = _own_lines(self.text)
            function = _parsed(self.first, own) if own != self.text else None
        return function


def _parsed(first: int, text: bytes) -> Optional[_Function]:
    source = "\n" * first + textwrap.dedent(text.decode("utf-8", errors="replace"))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    function = tree.body[0] if tree.body else None
    return function if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _own_lines(text: bytes) -> bytes:
    """A piece's lines up to the first code line indented no deeper than its `def`."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _DEF_LINE.match(line)), 0)
    indent = len(lines[start]) - len(lines[start].lstrip())
    for end in range(start + 1, len(lines)):
        stripped = lines[end].lstrip()
        if stripped.strip() and not stripped.startswith(b"#") and len(lines[end]) - len(stripped) <= indent:
            return b"".join(lines[:end])
    return text


# Learning splits about a hundred files of a tree like sglang/srt.
@lru_cache(maxsize=128)
def _def_lines(data: bytes) -> tuple[list[bytes], list[tuple[int, int]]]:
    """A file's lines, and the index and indent of each line starting a `def`: read once for its
    methods and its module functions."""
    lines = data.splitlines(keepends=True)
    # `in` first: a pattern tried on every line of a tree costs more than everything else here.
    starts = [(i, len(m.group(1))) for i, line in enumerate(lines) if b"def" in line and (m := _DEF_LINE.match(line))]
    return lines, starts


@lru_cache(maxsize=256)
def _pieces(data: bytes, methods: bool) -> list[_Piece]:
    """A file's methods (indented `def`s) or module functions, each cut out on its own: the files
    that matter are the largest of a tree (its pools), and a pool's few doors sit among hundreds
    of methods, so only the pieces holding a word of interest are parsed."""
    lines, starts = _def_lines(data)
    pieces = []
    for number, (first, indent) in enumerate(starts):
        if (indent > 0) != methods:
            continue
        last = len(lines)
        for later, later_indent in starts[number + 1:]:
            if later_indent <= indent:
                last = later
                break
        if indent == 0:
            # A module function also ends at the next module-level statement.
            for end in range(first + 1, last):
                text = lines[end]
                if text.strip() and not text.startswith((b" ", b"\t", b"#", b")")):
                    last = end
                    break
        # A piece keeps its own decorators (`@staticmethod` shifts the loc's position), not the next one's.
        while first > 0 and lines[first - 1].lstrip().startswith(b"@"):
            first -= 1
        while last > first + 1 and (not lines[last - 1].strip() or lines[last - 1].lstrip().startswith((b"@", b"#"))):
            last -= 1
        pieces.append(_Piece(first, b"".join(lines[first:last])))
    return pieces


def _checks_itself(function: _Function, param: str, cls: str, mark: str) -> Optional[int]:
    """The line where `function` tests `param` against `cls` or reads `param.<mark>`."""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and node.attr == mark and _is_name(node.value, param):
            return node.lineno
        if (
            isinstance(node, ast.Call) and _is_name(node.func, "isinstance") and len(node.args) == 2
            and _is_name(node.args[0], param) and _is_name(node.args[1], cls)
        ):
            return node.lineno
    return None


def class_methods(tree: ast.Module) -> Iterator[_Function]:
    for klass in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for item in klass.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield item


def method_params(method: _Function) -> list[str]:
    """Parameters a caller passes by position (self/cls left out), then keyword-only ones."""
    names = [arg.arg for arg in (*method.args.posonlyargs, *method.args.args)]
    is_static = any(_is_name(decorator, "staticmethod") for decorator in method.decorator_list)
    if names and not is_static:
        names = names[1:]
    return names + [arg.arg for arg in method.args.kwonlyargs]


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def called_name(func: ast.expr) -> Optional[str]:
    """The name a call is spelled with: `f` of `f(...)` and of `a.b.f(...)`."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None

