"""A file cut into the top-level statements that spell some names, and where those name a class
without building it.

Learning asks a few thousand files where they name a few classes; most name none, and those that
do name each in a few places. `statements_spelling` cuts out the statements whose lines spell one
(a long class at the member holding it) and parses them alone; `may_spell` prunes a walk to the
lines spelling one. `building_nothing` gives the nodes naming a class without building it: bases,
annotations, `isinstance` tests, a list only such a test reads, the strings of a module-private
set only membership tests read.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from functools import lru_cache
from typing import Iterator, Optional

from kvlint.analysis.ast_walk import line_span
from kvlint.learn.tree import parsed_tree


def spelling(node: ast.AST, hits: list[int]) -> Iterator[ast.AST]:
    """`node` and the nodes below it that may spell a wanted name: a name is spelled on a line in
    `hits` (1-based, sorted), so a subtree whose lines hold none is not walked. A backend class
    of a few thousand lines names itself in a handful; walking it whole was most of learning
    the admission on sglang/srt."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(child for child in ast.iter_child_nodes(current) if may_spell(child, hits))


def may_spell(node: ast.AST, hits: list[int]) -> bool:
    """Whether `node`'s lines (its decorators' included: a definition's own line is its `def`)
    hold one of `hits` (sorted); a node without lines may."""
    span = line_span(node)
    if span is None:
        return True
    at = bisect_left(hits, span[0])
    return at < len(hits) and hits[at] <= span[1]


_TOP_LEVEL = re.compile(rb"^(?:[^\s#)\]}]|$)")


def statements_spelling(data: bytes, wanted: set[str]) -> list[tuple[ast.stmt, int, list[int]]]:
    """The top-level statements whose lines spell one of `wanted`. A backend file is long and
    names a class in a few places: each statement is cut out at the lines starting in column 0
    and parsed alone; where a cut does not parse (a string or bracket spanning it), the whole file.
    Each comes with what its line numbers lack (the cut's first line) and the lines spelling a
    name in its own numbering."""
    lines, starts = _statement_starts(data)
    hits = _lines_spelling(data, wanted)
    found: list[tuple[ast.stmt, int, list[int]]] = []
    done: set[int] = set()
    for hit in hits:
        first = max((start for start in starts if start <= hit), default=0)
        while first > 0 and lines[first - 1].startswith(b"@"):
            first -= 1
        if first in done:
            continue
        done.add(first)
        last = min((start for start in starts if start > hit and not lines[start].startswith(b"@")), default=len(lines))
        member = _member_of_class(lines, first, last, hit, hits)
        if member is not None:
            found.append(member)
            done.discard(first)
            continue
        try:
            piece = _parsed_piece(b"\n".join(lines[first:last]))
        except (SyntaxError, ValueError):
            tree = parsed_tree(data)
            whole = [hit + 1 for hit in hits]
            return [] if tree is None else [(s, 0, whole) for s in tree.body if _spans_any(s, hits)]
        within = [hit - first + 1 for hit in hits if first <= hit < last]
        found.extend((statement, first, within) for statement in piece.body)
    return found


# A class this long is cut further, at its members: most of a backend or a model runner is
# methods that spell no wanted name, and parsing them was most of resolving where a class is built.
_LONG_CLASS = 200
_CLASS_HEADER_LINE = re.compile(rb"class[ \t]+(\w+)")
_MEMBER = re.compile(rb"^    (?:[^\s#)\]}])")


def _member_of_class(lines: list[bytes], first: int, last: int, hit: int,
                     hits: list[int]) -> Optional[tuple[ast.stmt, int, list[int]]]:
    """For a hit inside a method of a long class, that member alone, dedented and parsed, under a
    class of the same name holding only it (no bases: a hit on the header parses the whole class);
    None where the piece is not such a class or the member does not cut cleanly."""
    header = first
    while header < last and lines[header].startswith(b"@"):
        header += 1
    named = _CLASS_HEADER_LINE.match(lines[header]) if header < last else None
    if named is None or last - first < _LONG_CLASS:
        return None
    # The member holding the hit: the nearest member start at or above it, and the next below it.
    start = next((number for number in range(hit, header, -1) if _MEMBER.match(lines[number])), None)
    if start is None:
        return None
    while start - 1 > header and lines[start - 1].startswith(b"    @"):
        start -= 1
    end = next((number for number in range(hit + 1, last)
                if _MEMBER.match(lines[number]) and not lines[number].startswith(b"    @")), last)
    cut = lines[start:end]
    if any(line.strip() and not line.startswith(b"    ") for line in cut):
        return None  # a string or bracket reaching column 0: the class is parsed whole
    try:
        body = _parsed_piece(b"\n".join(line[4:] for line in cut)).body
    except (SyntaxError, ValueError):
        return None
    holder = ast.ClassDef(name=named.group(1).decode(), bases=[], keywords=[], body=body, decorator_list=[],
                          lineno=1, col_offset=0, end_lineno=len(cut), end_col_offset=0)
    return holder, start, [number - start + 1 for number in hits if start <= number < end]


@lru_cache(maxsize=256)
def _statement_starts(data: bytes) -> tuple[list[bytes], list[int]]:
    """A file's lines, and those starting a top-level statement: surveys ask the same files again
    for other names, a line at a time."""
    lines = data.split(b"\n")
    return lines, [number for number, text in enumerate(lines) if text and _TOP_LEVEL.match(text)]


def _lines_spelling(data: bytes, wanted: set[str]) -> list[int]:
    """The lines (0-based, sorted) of `data` that spell one of `wanted`: each name found by its
    own search of the bytes, not each line tested for each name."""
    offsets: set[int] = set()
    for name in wanted:
        needle = name.encode()
        at = data.find(needle)
        while at != -1:
            offsets.add(at)
            at = data.find(needle, at + len(needle))
    found: set[int] = set()
    line, counted = 0, 0
    for at in sorted(offsets):
        line += data.count(b"\n", counted, at)
        counted = at
        found.add(line)
    return sorted(found)


@lru_cache(maxsize=128)
def _parsed_piece(piece: bytes) -> ast.Module:
    """A statement cut out of a file, parsed once however many surveys ask for the names it spells
    (read only: every caller walks it, none changes it)."""
    return ast.parse(piece)


def forget_pieces() -> None:
    _parsed_piece.cache_clear()
    _tests_against_a_name.cache_clear()
    _only_compared.cache_clear()
    _statement_starts.cache_clear()


def _spans_any(statement: ast.stmt, hits: list[int]) -> bool:
    end = statement.end_lineno or statement.lineno
    return any(statement.lineno <= hit + 1 <= end for hit in hits)


def building_nothing(statement: ast.stmt, hits: list[int], data: bytes) -> set[int]:
    """The nodes below `statement` (of the file `data`) that name a class without building it:
    bases, annotations, `isinstance`/`issubclass` tests, a list only such a test reads, the names
    in a module-private set only membership tests read, a class attribute read (`Pool.block_size`,
    not called), `super(Base, self)`, and everything under `if __name__ == "__main__":`, which
    runs only when the file is run as a script, never when the engine imports it (their ids);
    only where `hits` may spell one."""
    if _script_only(statement):
        return {id(inner) for inner in ast.walk(statement)}
    quiet: list[ast.AST] = list(_names_only_compared(statement, data))
    called: set[int] = set()
    for node in spelling(statement, hits):
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            if isinstance(node.func, ast.Name) and node.func.id == "super":
                quiet.extend(node.args)  # `super(Base, self)` names its class to skip it
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and id(node) not in called:
            # Parents come before children: a call's callee is known by the time its attribute is met.
            quiet.append(node.value)
        if isinstance(node, ast.ClassDef):
            quiet.extend(node.bases)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
            quiet.extend(arg.annotation for arg in every if arg is not None and arg.annotation is not None)
            if node.returns is not None:
                quiet.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            quiet.append(node.annotation)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass"):
            quiet.extend(node.args[1:])
    if _tests_against_a_name(data) and isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
            and (statement.end_lineno or 0) - statement.lineno < _LISTS_READ_WITHIN:
        quiet.extend(_kept_for_isinstance(statement))
    return {id(inner) for node in quiet for inner in ast.walk(node)}


def _script_only(statement: ast.stmt) -> bool:
    """`if __name__ == "__main__":` at module level."""
    test = statement.test if isinstance(statement, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _names_only_compared(statement: ast.stmt, data: bytes) -> list[ast.AST]:
    """The strings of `_NAMES = frozenset({"A", "B"})` at module level where every other use of
    `_NAMES` in the file is a membership test (`type(x).__name__ in _NAMES`): names compared, not
    classes looked up. Module-private (a leading underscore): no other file is read for its uses."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
        return []
    name = statement.targets[0].id
    value = statement.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("set", "frozenset") \
            and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    if not (name.startswith("_") and isinstance(value, (ast.Set, ast.Tuple, ast.List))):
        return []
    return list(value.elts) if _only_compared(data, name) else []


@lru_cache(maxsize=256)
def _only_compared(data: bytes, name: str) -> bool:
    """Whether the file binds `name` once and reads it only as the right side of `in`/`not in`,
    by its text: every use but the binding follows an `in`, on a line holding no `for` (whose
    `in` iterates)."""
    word = re.escape(name.encode())
    uses = len(re.findall(rb"(?<![\w.])" + word + rb"\b", data))
    tests = len(re.findall(rb"\bin[ \t]+" + word + rb"\b", data))
    iterated = re.search(rb"\bfor\b[^\n]*\bin[ \t]+" + word + rb"\b", data)
    return uses == tests + 1 and iterated is None


# A definition longer than this is not walked whole for such lists: a class kept in one there is
# left as built (a way out, never a wrong `latent`). Most are methods cut out of their class.
_LISTS_READ_WITHIN = 300
# `isinstance(x, kinds)` or `isinstance(x, tuple(kinds))`, a variable (lower case) as the classes.
_TESTED_AGAINST_A_NAME = re.compile(rb"isinstance\([^,()]+,\s*(?:tuple\(\s*)?[a-z_]\w*\s*\)")


@lru_cache(maxsize=256)
def _tests_against_a_name(data: bytes) -> bool:
    """Whether a file tests against classes held in a variable: the walk looking for such lists is
    done only where one may be."""
    return _TESTED_AGAINST_A_NAME.search(data) is not None


def _kept_for_isinstance(statement: ast.stmt) -> list[ast.AST]:
    """The classes put in a list that nothing but an `isinstance` test reads: `kinds = [A, B]`,
    `kinds.append(C)`, then `isinstance(x, tuple(kinds))`. A name used any other way keeps them."""
    quiet = [argument for node in ast.walk(statement) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id in ("isinstance", "issubclass") for argument in node.args[1:]]
    tested = {inner.id for node in quiet for inner in ast.walk(node) if isinstance(inner, ast.Name)}
    if not tested:
        return []
    held: dict[str, list[ast.AST]] = {name: [] for name in tested}
    uses: dict[str, int] = {name: 0 for name in tested}
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and node.id in tested:
            uses[node.id] += 1
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in tested and isinstance(node.value, (ast.List, ast.Tuple)):
            held[node.targets[0].id].append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in tested:
            held[node.func.value.id].extend(node.args)
    within = {name: sum(1 for node in quiet for inner in ast.walk(node) if isinstance(inner, ast.Name) and inner.id == name)
              for name in tested}
    # Every use is the test, a literal it is bound to, or an append to it.
    return [value for name, values in held.items() if values and uses[name] == within[name] + len(values)
            for value in values]
