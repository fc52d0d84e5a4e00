"""Decide, before LibCST sees a file, whether it is safe and worth parsing.

LibCST's native parser overflows its stack (the process dies with SIGSEGV) on
a few thousand nested brackets or operators, and its Python visitors hit the
recursion limit a few hundred levels down, so a hostile or generated file
must be refused before it reaches them. CPython's own parser guards its
stack and is an order of magnitude cheaper than LibCST's, so it decides:
what the interpreter cannot parse is a syntax error with the interpreter's
own message, and a tree deeper than `MAX_NESTING` is not handed to LibCST.
"""

from __future__ import annotations

import ast
import codecs
import re
from dataclasses import dataclass
from typing import Optional

# The deepest AST in sglang/srt is 39 levels; LibCST's visitors start failing
# near 190 levels of nested calls or lists, so 100 keeps a margin both ways.
MAX_NESTING = 100
# The largest file in sglang/srt is 0.3 MB; LibCST needs tens of seconds per
# MB of dense generated code, so a larger file would stall the whole run.
MAX_PARSE_BYTES = 4_000_000
# PEP 263's coding cookie, as CPython's tokenizer matches it on the first two lines.
CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class Unparsable:
    """Why a file cannot be parsed, and where (1-based)."""

    line: int
    column: int
    message: str


def too_large(data: bytes) -> Optional[str]:
    if len(data) <= MAX_PARSE_BYTES:
        return None
    return (
        f"not checked: {len(data) / 1e6:.1f} MB is larger than the "
        f"{MAX_PARSE_BYTES / 1e6:.1f} MB kvlint parses (generated code?)"
    )


def python_tree(data: bytes, path: str) -> ast.Module | Unparsable:
    """CPython's tree of `data` when LibCST may parse it too; otherwise what to report as KV000."""
    problem = _undecodable(data)
    if problem is not None:
        return problem
    try:
        tree = compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return Unparsable(exc.lineno or 1, exc.offset or 1, exc.msg)
    except (RecursionError, MemoryError):
        # CPython's parser reports its own stack limit as one of these.
        return Unparsable(1, 1, "too deeply nested to parse")
    except ValueError as exc:  # e.g. null bytes on older interpreters
        return Unparsable(1, 1, str(exc))
    assert isinstance(tree, ast.Module)
    return tree


def too_deep(tree: ast.Module) -> Optional[Unparsable]:
    """Why LibCST must not parse the file `tree` is CPython's tree of, or None when it may.

    Asked only of a file LibCST will parse: kvlint's own walks of CPython's tree keep
    no Python stack per level.
    """
    depth, line = _deepest(tree)
    if depth > MAX_NESTING:
        return Unparsable(line, 1, f"nested {depth} levels deep, more than the {MAX_NESTING} kvlint parses")
    return None


def source_text(data: bytes) -> str:
    """The text of bytes `python_tree` accepted, decoded as CPython reads them (a BOM is not text)."""
    return data.decode(_declared_encoding(data))


def _undecodable(data: bytes) -> Optional[Unparsable]:
    """A file whose bytes are not text in its declared encoding (PEP 263; default UTF-8)."""
    encoding = _declared_encoding(data)
    try:
        codecs.lookup(encoding)
    except LookupError:
        return Unparsable(1, 1, f"unknown encoding in the coding cookie: {encoding}")
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        return Unparsable(line, column, f"not valid {encoding} text: byte 0x{byte} ({exc.reason})")
    return None


def _declared_encoding(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    for line in data.split(b"\n", 2)[:2]:
        match = CODING_COOKIE.match(line)
        if match is not None:
            return match.group(1).decode("ascii")
        if not line.lstrip(b" \t\f").startswith(b"#"):
            break  # PEP 263: the cookie may follow only a comment line
    return "utf-8"


def _deepest(tree: ast.AST) -> tuple[int, int]:
    """The depth of the deepest node and its line; iterative, so depth cannot overflow it.

    A subtree on one line spans at least one column per level below it (plus
    the expression-context leaf), so a short one-line subtree cannot reach past
    `MAX_NESTING` and is not walked: most of a file is skipped, and any path
    deeper than the limit is still followed to its end.
    """
    deepest, deepest_line = 0, 1
    stack: list[tuple[ast.AST, int, int]] = [(tree, 1, 1)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > deepest:
            deepest, deepest_line = depth, line
        end_line, end_column = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_line == line and end_column is not None and depth + end_column - node.col_offset + 1 <= MAX_NESTING:  # type: ignore[attr-defined]
            continue
        stack.extend((child, depth + 1, line) for child in ast.iter_child_nodes(node))
    return deepest, deepest_line
