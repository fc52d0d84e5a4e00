"""Cut a file down to the parts the rules can flag, keeping every line where it was.

LibCST parses several times slower than CPython's own parser, and in a file
worth checking most functions hold none of the rules' trigger words. The
per-file rules look at one function at a time (their data flow never crosses
a function boundary) plus the module's imports and the names it defines, so
`skeleton` keeps, line for line:

- every module-level statement that is not a `def` or `class` (imports above all);
- every function or method whose text passes a rule's trigger words, whole;
- in a class with such a method, its `__init__`, its annotations and the
  methods calling a kept one on `self`, whole (what the class's attributes
  are, what its helpers are passed: `_pool_origin`, `_own_allocation`);
- a few calls out from those, whole: the functions calling a kept module-level
  function by name, and the methods a kept function calls on what its instance
  holds (`self.kv_cache.get(bsz)`): what a parameter is fed, and what a method
  returns, say where a tensor comes from (`_own_allocation`);
- the header of every other `def` and `class`, its body reduced to `pass`.

Removed lines become empty lines, so positions in the skeleton are positions
in the file, and a finding's line, column and fingerprint do not depend on
whether the skeleton or the whole file was parsed. Fixes parse the whole file.
"""

from __future__ import annotations

import ast
import re
from typing import Optional, Sequence

from kvlint.api.triggers import Groups, passes

# Below this share of the file, cutting pays for itself; above it, parse the file.
WORTH_CUTTING = 0.8
# How many calls out from a function passing the words are kept: enough for an attention op handing
# its cache to a device kernel wrapper, which a model's forward fills from its own cache's method.
_CALLS_OUT = 3
# `self.x.name(`: a method called on what an instance holds (`self.kv_cache.get(`), whose definitions
# here are kept; calls on anything else (`.view(`, `.to(`) would keep most of a large file.
_ATTRIBUTE_CALL = re.compile(rb"\bself\.\w+\.(\w+)\(")
_INDENT = re.compile(rb"[ \t\f]*")
_Def = (ast.FunctionDef, ast.AsyncFunctionDef)
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def skeleton(data: bytes, tree: ast.Module, groups: Sequence[Groups]) -> Optional[bytes]:
    """The file cut to what `groups` can flag, or None when that would not save much."""
    lines = data.splitlines(keepends=True)
    groups = [_with_import_aliases(group, tree) for group in groups]
    cutter = _Cutter(lines, groups, tree)
    cutter.module(tree.body)
    kept = b"".join(cutter.lines)
    if len(kept) - kept.count(b"\n") > WORTH_CUTTING * len(data):
        return None
    return kept


class _Cutter:
    def __init__(self, lines: list[bytes], groups: Sequence[Groups], tree: ast.Module) -> None:
        self.original = lines
        self.lines = list(lines)
        self.groups = groups
        self.kept = self._reached(tree)

    def _reached(self, tree: ast.Module) -> set[int]:
        """The functions kept whole: those passing the words, and a few calls out from them."""
        functions = [node for node in _definitions(tree.body) if isinstance(node, _Def)]
        module_level = {node.name for node in tree.body if isinstance(node, _Def)}
        texts = {id(node): self._text(node) for node in functions}
        kept = {id(node) for node in functions if any(passes(texts[id(node)], group) for group in self.groups)}
        # A function rebinding a module global may change a constant the rules read (`_aliases`).
        kept |= {id(node) for node in functions if b"global " in texts[id(node)]
                 and any(isinstance(inner, ast.Global) for inner in ast.walk(node))}
        for _ in range(_CALLS_OUT):
            kept_names = {node.name for node in functions if id(node) in kept}
            called = {name for name in kept_names if name in module_level}
            reached = set().union(*(set(_ATTRIBUTE_CALL.findall(texts[key])) for key in kept)) if kept else set()
            more = {
                id(node) for node in functions if id(node) not in kept and (
                    node.name.encode() in reached or any(f"{name}(".encode() in texts[id(node)] for name in called))
            }
            if not more:
                break
            kept |= more
        return kept

    def _text(self, node: ast.stmt) -> bytes:
        return b"".join(self.original[_start(node) - 1 : node.end_lineno])

    def module(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (*_Def, ast.ClassDef)):
                self.definition(node)

    def definition(self, node: _Definition) -> None:
        """Keep a wanted function whole; reduce anything else to its header."""
        first_body_line = _start(node.body[0])
        if _shares_header_line(self.original, node.body[0]):
            return  # `def f(...): ...` or `class C: pass`: nothing to cut
        if isinstance(node, _Def):
            if not self._wanted(node):
                self._blank(first_body_line, node.end_lineno or first_body_line)
                self._pass_at(first_body_line)
            return
        has_definitions = False
        # Where a method is checked, the class's `__init__` and annotations say what its attributes
        # are (a pool's class, a buffer the model allocates): the layout rules read them.
        wanted = [member.name for member in node.body if isinstance(member, _Def) and self._wanted(member)]
        typed = bool(wanted)
        for member in node.body:
            if typed and (isinstance(member, ast.AnnAssign) or (isinstance(member, _Def) and (
                member.name == "__init__" or self._calls(member, wanted)))):
                has_definitions = True
            elif isinstance(member, (*_Def, ast.ClassDef)):
                self.definition(member)
                has_definitions = True
            else:
                self._blank(member.lineno, member.end_lineno or member.lineno)
        if not has_definitions:
            self._pass_at(first_body_line)

    def _calls(self, node: ast.stmt, methods: list[str]) -> bool:
        """Whether a method calls one of `methods` on `self`: what it passes says where their parameters come from."""
        text = b"".join(self.original[_start(node) - 1 : node.end_lineno])
        return any(f"self.{name}(".encode() in text for name in methods)

    def _wanted(self, node: ast.stmt) -> bool:
        return id(node) in self.kept

    def _blank(self, start: int, end: int) -> None:
        for line in range(start, end + 1):
            self.lines[line - 1] = _newline_of(self.original[line - 1])

    def _pass_at(self, line: int) -> None:
        original = self.original[line - 1]
        indent = _INDENT.match(original)
        assert indent is not None
        self.lines[line - 1] = indent.group() + b"pass" + _newline_of(original)


def _definitions(body: list[ast.stmt]) -> list[_Definition]:
    """Every `def` and `class` of the module, nested ones too."""
    found: list[_Definition] = []
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (*_Def, ast.ClassDef)):
            found.append(node)
            stack.extend(node.body)
    return found


def _start(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def _shares_header_line(lines: list[bytes], first: ast.stmt) -> bool:
    """Whether the body starts on the header's last line (`def f(...) -> T: ...`)."""
    return bool(lines[first.lineno - 1][: first.col_offset].strip())


def _newline_of(line: bytes) -> bytes:
    return line[len(line.rstrip(b"\r\n")) :]


def _with_import_aliases(groups: Groups, tree: ast.Module) -> Groups:
    """A word imported under another name (`import KVWriteLoc as WL`) also counts as that name."""
    aliases: dict[bytes, list[bytes]] = {}
    for node in _module_level(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname:
                    aliases.setdefault(alias.name.rsplit(".", 1)[-1].encode(), []).append(alias.asname.encode())
    if not aliases:
        return groups
    return tuple(tuple(word for original in group for word in (original, *aliases.get(original, ()))) for group in groups)


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, including those inside top-level `if`/`try` blocks."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found.extend(_module_level([*node.body, *node.orelse]))
        elif isinstance(node, ast.Try):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            found.extend(_module_level([*node.body, *handlers, *node.orelse, *node.finalbody]))
    return found
