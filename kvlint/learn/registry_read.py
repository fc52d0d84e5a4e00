"""What one file states of a backend registry, and where it names a class or function.

A registry is a decorator `register(name)` whose inner function stores the decorated factory
under `name` (`ATTENTION_BACKENDS[name] = fn`); its factories are the module functions decorated
`@register("triton")`. What a factory returns is read on every branch: `return X(...)` names X
(through the file's `import ... as` aliases), `return other_factory(...)` delegates, anything
else (a variable, a call kvlint cannot name) makes the factory opaque.

`references` is how admission tells whether a class could be built outside the factories that
refuse it: every place a file names it as a value (a call, an argument, a binding), and any
string equal to it (a class looked up by name). A name in an import, a class's bases, an
annotation or an `isinstance` test builds nothing.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Iterator, Optional

from kvlint.analysis.ast_walk import line_span
from kvlint.learn.memo import remembered
from kvlint.learn.tree import names_spelled, parsed_tree


@dataclass(frozen=True)
class FactoryRead:
    name: str
    function: str
    # Named by `return X(...)`, on any branch; `delegates`: other functions returned by a call.
    returned: tuple[str, ...]
    opaque: bool
    line: int = field(compare=False)


# A module-level decorator taking a string: `@register_attention_backend("triton")`. Matched after
# a newline, not at `^` under MULTILINE: a search for the newline's bytes skips ahead, where `^`
# is tried at every line start (a tenth of learning the admission on sglang/srt).
_NAMED_DECORATOR = re.compile(rb"\n@(\w+)\([ \t]*[\"']")


def registry_factories(data: bytes) -> tuple[FactoryRead, ...]:
    """The factories a file registers, remembered by content."""
    if b"@" not in data:
        return ()
    # Only a file defining the decorator it applies can be read as a registry.
    decorators = {match.group(1) for match in _NAMED_DECORATOR.finditer(b"\n" + data)}
    if not any(b"def " + name + b"(" in data for name in decorators):
        return ()
    return tuple(remembered("registry-factories", data, (), lambda: list(_factories(data))))


def _factories(data: bytes) -> Iterator[FactoryRead]:
    tree = parsed_tree(data)
    if tree is None:
        return
    registers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and _is_register(node)}
    if not registers:
        return
    aliases = _aliases(tree)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            name = _registered_name(decorator, registers)
            if name is not None:
                returned, opaque = _returned(node, {**aliases, **_aliases(node)})
                yield FactoryRead(name, node.name, returned, opaque, node.lineno)


def _is_register(function: ast.FunctionDef) -> bool:
    """`def register(name): def decorator(fn): D[name] = fn ...`."""
    if len(function.args.args) != 1:
        return False
    key = function.args.args[0].arg
    for inner in function.body:
        if isinstance(inner, ast.FunctionDef) and len(inner.args.args) == 1:
            stored = inner.args.args[0].arg
            for node in ast.walk(inner):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == stored
                        and any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id == key
                                for t in node.targets)):
                    return True
    return False


def _registered_name(decorator: ast.expr, registers: set[str]) -> Optional[str]:
    if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id in registers
            and len(decorator.args) == 1 and isinstance(decorator.args[0], ast.Constant)
            and isinstance(decorator.args[0].value, str)):
        return decorator.args[0].value
    return None


def _aliases(node: ast.AST) -> dict[str, str]:
    """`import ... X as Y` in `node`'s own body (a function's local imports included): Y -> X."""
    found = {}
    for inner in ast.walk(node) if isinstance(node, ast.FunctionDef) else getattr(node, "body", ()):
        if isinstance(inner, ast.ImportFrom):
            for alias in inner.names:
                if alias.asname:
                    found[alias.asname] = alias.name
    return found


def _returned(function: ast.FunctionDef, aliases: dict[str, str]) -> tuple[tuple[str, ...], bool]:
    names: list[str] = []
    opaque = False
    for node in ast.walk(function):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        called = value.func if isinstance(value, ast.Call) else None
        name = called.id if isinstance(called, ast.Name) else called.attr if isinstance(called, ast.Attribute) else None
        if name is None:
            opaque = True
        else:
            names.append(aliases.get(name, name))
    return tuple(dict.fromkeys(names)), opaque


@dataclass(frozen=True)
class Reference:
    """`name` used as a value (or spelled in a string, `kind` "string"; imported under another
    name, "alias") inside the top-level definition `place` ("" at module level), in its method
    `method` where `place` is a class ("" elsewhere)."""

    name: str
    kind: str
    place: str
    line: int = field(compare=False)
    method: str = ""


def references(data: bytes, names: tuple[str, ...]) -> tuple[Reference, ...]:
    """Where a file names any of `names` in a way that could build it, remembered by content."""
    wanted = names_spelled(data, names)
    if not wanted:
        return ()
    return tuple(remembered("references", data, wanted, lambda: list(_references(data, set(wanted)))))


def _references(data: bytes, wanted: set[str]) -> Iterator[Reference]:
    for statement, offset, hits in statements_spelling(data, wanted):
        place = statement.name if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        quiet = building_nothing(statement, hits)
        # A class's methods one by one, so each reference says which method holds it.
        parts: list[tuple[ast.AST, str]] = [(item, item.name if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else "")
                 for item in statement.body if may_spell(item, hits)] if isinstance(statement, ast.ClassDef) else []
        if isinstance(statement, ast.ClassDef):
            parts += [(node, "") for node in (*statement.bases, *statement.keywords, *statement.decorator_list)]
        for part, method in parts or [(statement, "")]:
            yield from _references_in(part, hits, quiet, wanted, place, method, offset)


def _references_in(node: ast.AST, hits: list[int], quiet: set[int], wanted: set[str], place: str, method: str,
                   offset: int) -> Iterator[Reference]:
    for inner in _spelling(node, hits):
        if id(inner) in quiet:
            continue
        if isinstance(inner, ast.ImportFrom):
            for alias in inner.names:
                if alias.name in wanted and alias.asname and alias.asname != alias.name:
                    yield Reference(alias.name, "alias", place, inner.lineno + offset, method)
            continue
        name = inner.id if isinstance(inner, ast.Name) else inner.attr if isinstance(inner, ast.Attribute) else None
        if name in wanted and name is not None:
            yield Reference(name, "value", place, getattr(inner, "lineno", 0) + offset, method)
        elif isinstance(inner, ast.Constant) and inner.value in wanted:
            yield Reference(str(inner.value), "string", place, inner.lineno + offset, method)


def _spelling(node: ast.AST, hits: list[int]) -> Iterator[ast.AST]:
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


@lru_cache(maxsize=512)
def _parsed_piece(piece: bytes) -> ast.Module:
    """A statement cut out of a file, parsed once however many surveys ask for the names it spells
    (read only: every caller walks it, none changes it)."""
    return ast.parse(piece)


def forget_pieces() -> None:
    _parsed_piece.cache_clear()
    _statement_starts.cache_clear()


def _spans_any(statement: ast.stmt, hits: list[int]) -> bool:
    end = statement.end_lineno or statement.lineno
    return any(statement.lineno <= hit + 1 <= end for hit in hits)


def building_nothing(statement: ast.stmt, hits: list[int]) -> set[int]:
    """The nodes below `statement` that name a class without building it: bases, annotations,
    `isinstance`/`issubclass` tests (their ids); only where `hits` may spell one."""
    quiet: list[ast.AST] = []
    for node in _spelling(statement, hits):
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
    quiet.extend(_kept_for_isinstance(statement))
    return {id(inner) for node in quiet for inner in ast.walk(node)}


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
