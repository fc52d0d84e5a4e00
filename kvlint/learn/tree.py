"""What learning reads across the whole tree: class hierarchies, allocations, import spellings.

Split from `kvlint.learn.contract` (which fills the contract) so each stays
readable; see its docstring for what is learned and why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.api.paths import display_path
from kvlint.learn.scope import Scope

DOOR_DEF = re.compile(rb"def\s+_?set_\w*kv_buffer\s*\(")


@dataclass
class Learned:
    values: dict[str, object] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    # The file defining the API behind a module key: its import spelling is learned afterwards.
    defining: dict[str, Path] = field(default_factory=dict)
    # The files whose lines the contract names, and the last line it names of each (`Asked.pinned`).
    pinned: dict[Path, int] = field(default_factory=dict)
    # How a source names a file (`Scope.shown`: an engine file as `engine sglang/srt/...`).
    shown: Callable[[Path], str] = field(default=lambda path: display_path(path, Path.cwd()))

    def set(self, key: str, value: object, path: Path, line: int) -> None:
        self.values[key] = value
        self.sources[key] = f"learned from {self.shown(path)}:{line}"
        self.pin(path, line)

    def pin(self, path: Path, line: int) -> None:
        self.pinned[path] = max(line, self.pinned.get(path, line))


@lru_cache(maxsize=64)
def parsed_tree(data: bytes) -> Optional[ast.Module]:
    # Several learners read the same defining files (the batch class, the pool).
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError):
        return None


def mark_predicate(cls: str, mark: str, tree: ast.Module) -> Optional[tuple[str, int]]:
    """(name, line) of a module function of the write-loc class's file that tests the mark: one parameter,
    `isinstance(param, <cls>)` and `param.<mark>` in its body (`write_loc_is_physical`)."""
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or len(node.args.args) != 1:
            continue
        param = node.args.args[0].arg
        reads_mark = tests_class = False
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and inner.attr == mark and isinstance(inner.value, ast.Name):
                reads_mark = reads_mark or inner.value.id == param
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Name)
                and inner.func.id == "isinstance"
                and len(inner.args) == 2
                and isinstance(inner.args[1], ast.Name)
                and inner.args[1].id == cls
            ):
                tests_class = True
        if reads_mark and tests_class:
            return node.name, node.lineno
    return None


_FROM_IMPORT = re.compile(rb"from[ \t]+([A-Za-z_][\w.]*)[ \t]+import\b")


def at_line_starts(pattern: re.Pattern[bytes], data: bytes) -> Iterator[re.Match[bytes]]:
    """The matches of `pattern` that only spaces or tabs precede on their line: what a `^[ \\t]*`
    anchor in MULTILINE mode finds, ten times faster over a tree, since a pattern opening with a
    literal word is searched for as one while an anchored one is tried at every line."""
    position = 0
    while (match := pattern.search(data, position)) is not None:
        start = match.start()
        if data[data.rfind(b"\n", 0, start) + 1 : start].strip(b" \t"):
            position = start + 1
            continue
        yield match
        position = match.end()


def learn_import_spellings(config: Config, scope: Scope, learned: Learned) -> None:
    """Spell each learned module the way the tree imports its defining file.

    First the most common absolute `from M import ...` among the tree's own
    files that names the defining file; else the file's path below a package
    root that some resolving import of the tree reveals (a namespace package
    has no `__init__.py` to climb); else what `module_path` found.
    """
    keys = [key for key in ("write-loc-module", "paged-helpers-module") if key in learned.defining]
    if not keys:
        return
    for key in keys:
        path = learned.defining[key]
        # Only a file naming the defining module's last part can import it.
        spelled = _imported_as(path, import_counts(scope, path.stem.encode()))
        if not spelled:
            spelled = _below_package_root(path, scope.paths, import_counts(scope, b""))
        if spelled:
            learned.values[key] = spelled


def import_counts(scope: Scope, needle: bytes) -> dict[str, int]:
    """How often each absolute `from M import` occurs in the files holding `needle`."""
    counts: dict[str, int] = {}
    for imported in scope.survey(from_imports, needle).values():
        for module in imported:
            counts[module] = counts.get(module, 0) + 1
    return counts


def from_imports(data: bytes, needle: bytes) -> tuple[str, ...]:
    """The module of each absolute `from M import` of a file holding `needle`, in order."""
    if needle not in data:
        return ()
    return tuple(match.group(1).decode("ascii", "replace") for match in at_line_starts(_FROM_IMPORT, data))


def imports_package(data: bytes, package: str) -> bool:
    """Whether a file imports `package` or a module of it (`from sglang.srt... import`, `import sglang`)."""
    if package.encode() not in data:
        return False
    pattern = _package_import(package)
    return next(at_line_starts(pattern, data), None) is not None


@lru_cache(maxsize=8)
def _package_import(package: str) -> re.Pattern[bytes]:
    return re.compile(rb"(?:from|import)[ \t]+" + re.escape(package.encode()) + rb"(?![\w])")


def _parts(path: Path) -> tuple[str, ...]:
    """A file's path components as a module would spell them (no `.py`, no `__init__`)."""
    resolved = path.resolve().with_suffix("")
    parts = resolved.parts[1:]
    return parts[:-1] if parts and parts[-1] == "__init__" else parts


def _common_tail(module: tuple[str, ...], parts: tuple[str, ...]) -> int:
    count = 0
    while count < min(len(module), len(parts)) and module[-1 - count] == parts[-1 - count]:
        count += 1
    return count


def _imported_as(path: Path, counts: Mapping[str, int]) -> Optional[str]:
    """The most common absolute import naming `path`: a dotted module whose tail is the file's own
    path tail (at least its directory and name; the leading packages may sit in a directory named
    otherwise, as a copy of `sglang/srt` named `srt` is still imported as `sglang.srt...`)."""
    parts = _parts(path)
    candidates = []
    for module, count in counts.items():
        dotted = tuple(module.split("."))
        if len(dotted) >= 2 and _common_tail(dotted, parts) >= 2:
            candidates.append((count, module))
    if not candidates:
        return None
    # The most common spelling; the longest on a tie (the most qualified).
    return max(candidates, key=lambda item: (item[0], len(item[1])))[1]


def _below_package_root(path: Path, files: list[Path], counts: Mapping[str, int]) -> Optional[str]:
    """`path`'s module below a package root the tree's own imports reveal: an import
    `sglang.srt.layers.x` that names the file `<root>/srt/layers/x.py` says `<root>` is where
    `sglang` is imported from (namespace packages need no `__init__.py` for that)."""
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for file in files:
        parts = _parts(file)
        if parts:
            by_name.setdefault(parts[-1], []).append(parts)
    roots: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    for module, count in counts.items():
        dotted = tuple(module.split("."))
        if len(dotted) < 2:
            continue
        for parts in by_name.get(dotted[-1], ()):
            tail = _common_tail(dotted, parts)
            if tail >= 2:
                key = (parts[: len(parts) - tail], dotted[: len(dotted) - tail])
                roots[key] = roots.get(key, 0) + count
    target = _parts(path)
    for (root, prefix), _ in sorted(roots.items(), key=lambda item: -item[1]):
        if target[: len(root)] != root:
            continue
        relative = target[len(root) :]
        if relative and all(part.isidentifier() for part in (*prefix, *relative)):
            return ".".join((*prefix, *relative))
    return None


# A file's words, as the runs of bytes left when every other byte is made a space: a few of them
# start with a digit, which no name asked for does, so they only set bits no lookup reads.
_NOT_WORD = bytes(byte if chr(byte).isalnum() and byte < 128 or byte == ord("_") else ord(" ") for byte in range(256))
# A byte per bit while a filter is built, written out as the digits of its number.
_AS_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


# Bits of a file's word filter: a few words in a hundred of a file's vocabulary share a bit.
_FILTER_BITS = 1 << 14
_MASK = _FILTER_BITS - 1


@lru_cache(maxsize=4096)
def spelled_words(data: bytes) -> bytes:
    """A filter of the words a file spells (a bit per word's hash, twice), read once for every survey
    asking which of some names it holds: a search per name, over a few thousand files and a few
    hundred names, cost more than this; the words themselves, kept, cost 75 MB over sglang/srt.
    Bit `p` is bit `7 - p % 8` of byte `p // 8`: a byte per bit is set, then packed in one step."""
    bits = bytearray(_FILTER_BITS)
    for code in map(hash, set(data.translate(_NOT_WORD).split())):
        bits[code & _MASK] = 1
        bits[code >> 20 & _MASK] = 1
    return int(bits.translate(_AS_DIGITS), 2).to_bytes(_FILTER_BITS // 8, "big")


def _positions(word: bytes) -> tuple[int, int]:
    code = hash(word)
    return code & _MASK, code >> 20 & _MASK


def names_spelled(data: bytes, names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `names` a file spells, in their order: as words, and now and then one the filter lets
    through that only a longer word holds, which the caller's reading of the file sets aside."""
    bits = spelled_words(data)
    return tuple(
        name for name, word, one, first, two, second in _looked_up(names)
        if bits[one] & first and bits[two] & second and word in data
    )


@lru_cache(maxsize=16)
def _looked_up(names: tuple[str, ...]) -> tuple[tuple[str, bytes, int, int, int, int], ...]:
    """Each name with its bytes and its two filter bits as (byte, mask), worked out once for every
    file asked."""
    found = []
    for name in names:
        one, two = _positions(name.encode())
        found.append((name, name.encode(), one >> 3, 1 << (7 - (one & 7)), two >> 3, 1 << (7 - (two & 7))))
    return tuple(found)


# `class X(A, b.B):`, or `class X:` with no bases.
_CLASS_HEADER = re.compile(rb"class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\)|(?=:))")


def class_bases(scope: Scope) -> dict[str, set[str]]:
    """Every `class X(A, b.B):` header of the tree as X -> {A, B} (`class X:` as X -> {})."""
    bases: dict[str, set[str]] = {}
    for headers in scope.survey(class_headers).values():
        for name, parents in headers:
            bases.setdefault(name, set()).update(parents)
    return bases


def class_headers(data: bytes) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each `class X(A, b.B):` header of a file as (X, (A, B))."""
    if b"class " not in data:
        return ()
    headers = []
    for match in at_line_starts(_CLASS_HEADER, data):
        names = {base.rsplit(b".", 1)[-1].decode("ascii", "replace") for base in re.split(rb"[,\s]+", match.group(2) or b"")}
        headers.append((match.group(1).decode(), tuple(sorted(name for name in names if name.isidentifier()))))
    return tuple(headers)


def learn_door_checks(contract: Contract, learned: Learned, scope: Scope) -> None:
    """Whether some write door of the tree reads the mark (or calls the mark predicate): only then
    does an unmarked loc get refused, and only then may a message say so."""
    mark = str(learned.values.get("mark", "")) if "mark" in learned.values else ""
    if not mark:
        return
    predicate = str(learned.values.get("mark-predicate", ""))
    learned_doors: Any = learned.values.get("write-doors", contract.write_doors)
    found = scope.first(door_checking_mark, mark, predicate, tuple(sorted(dict(learned_doors))))
    if found is not None:
        learned.set("door-checks-mark", True, found[0], found[1][0])


def door_checking_mark(data: bytes, mark: str, predicate: str, doors: tuple[str, ...]) -> Optional[tuple[int]]:
    """The line of the first write door of a file that reads the mark or calls the mark predicate."""
    if f".{mark}".encode() not in data and not (predicate and predicate.encode() in data):
        return None
    tree = parsed_tree(data) if DOOR_DEF.search(data) else None
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.FunctionDef) and node.name in doors):
            continue
        for inner in ast.walk(node):
            if (isinstance(inner, ast.Attribute) and inner.attr == mark) or (
                predicate and isinstance(inner, ast.Name) and inner.id == predicate
            ):
                return (node.lineno,)
    return None


def class_methods(data: bytes, names: tuple[str, ...]) -> tuple[tuple[str, frozenset[str]], ...]:
    """The methods each class of `names` this file defines holds in its own body, as (class, methods).

    Read from the lines, not parsed (parsing each file naming a class was most of the cost): the
    body is what is indented under the header, triple-quoted text skipped, and its methods the
    `def`s at the body's indent. Whatever misleads the reading ends the body early, which only
    leaves methods out."""
    spelled = names_spelled(data, names)
    if not spelled:
        return ()
    defined = set(_CLASS_NAME.findall(data))
    wanted = [name.encode() for name in spelled if name.encode() in defined]
    if not wanted:
        return ()
    header = re.compile(rb"^([ \t]*)class[ \t]+(" + b"|".join(re.escape(name) for name in wanted) + rb")\b", re.M)
    lines = data.splitlines()
    starts = {match.start(): match for match in header.finditer(data)}
    found = []
    offset = 0
    for number, line in enumerate(lines):
        match = starts.get(offset)
        offset += len(line) + 1
        if match is not None:
            found.append((match.group(2).decode(), _methods_below(lines, number, len(match.group(1)))))
    return tuple(found)


_CLASS_NAME = re.compile(rb"class[ \t]+(\w+)")
_DEF = re.compile(rb"[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)")


def _methods_below(lines: list[bytes], header: int, indent: int) -> frozenset[str]:
    methods: set[str] = set()
    body = None
    quoted = False
    for line in lines[header + 1 :]:
        stripped = line.lstrip()
        opened = quoted
        quoted ^= (line.count(b'"""') + line.count(b"'''")) % 2 == 1
        if opened or not stripped or stripped.startswith(b"#"):
            continue
        depth = len(line) - len(stripped)
        if depth <= indent:
            break
        body = depth if body is None else body
        match = _DEF.match(line) if depth == body else None
        if match is not None:
            methods.add(match.group(1).decode())
    return frozenset(methods)


def module_classes(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """The classes a module defines, under `if`/`try` blocks too, not inside functions (where a
    class is no class of the tree's hierarchy to name)."""
    for statement in body:
        if isinstance(statement, ast.ClassDef):
            yield statement
            yield from module_classes(statement.body)
        elif isinstance(statement, (ast.If, ast.Try)):
            yield from module_classes([*statement.body, *statement.orelse, *getattr(statement, "finalbody", []),
                                       *(part for handler in getattr(statement, "handlers", []) for part in handler.body)])
