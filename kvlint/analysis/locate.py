"""Where flagged nodes are: positions, enclosing statement and scope.

Only files with at least one violation pay for this. LibCST's position
metadata is a code-generation pass that records a range for every node, and
`MetadataWrapper.resolve` adds an empty visitor pass over the whole tree; over
a backend's class that is most of the file. So nothing is generated to learn
where a statement starts; CPython's tree of the same text knows:

1. a walk over the code-holding fields finds each flagged node's ancestors
   (scope, statement) and its innermost statement;
2. that statement's CPython counterpart, found by walking both trees down the
   same bodies, gives the line of its first keyword or token; the lines LibCST
   keeps on the statement before it (comments, blank lines, decorators) are
   counted back from there;
3. the position pass of LibCST itself (`PositionProvidingCodegenState`) runs
   on each such statement alone, started from that line, column 0 and the
   indentation of the blocks above it, so its ranges are the ones the whole
   module would give.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Sequence, Union, cast

import libcst as cst
from libcst.metadata import CodeRange, PositionProvider
# LibCST's position state: not exported at the package's top, stable across 1.x.
from libcst.metadata.position_provider import PositionProvidingCodegenState

from kvlint.analysis.walk import code_children

# How LibCST's position pass counts line breaks.
_NEWLINE = re.compile(r"\r\n?|\n")
_Statement = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# The fields of a compound statement holding its bodies: the same names in LibCST and in `ast`.
_BODY_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")
_AnyStatement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


@dataclass(frozen=True)
class Location:
    range: CodeRange
    # First line of the innermost statement holding the node (suppressions may sit there).
    statement_line: int
    # Dotted name of the enclosing classes/functions ("" at module level).
    scope: str


def locate(module: cst.Module, nodes: list[cst.CSTNode], tree: ast.Module) -> dict[int, Location]:
    """Locations keyed by `id(node)`; `module` must be the tree the nodes belong to, `tree` CPython's of the same text."""
    if not nodes:
        return {}
    paths = _paths(module, nodes)
    ranges = _positions(module, tree, [_unit_path(path) for path in paths.values()])
    located: dict[int, Location] = {}
    for key, path in paths.items():
        node, ancestors = path[-1], path[:-1]
        statement = next((a for a in reversed(ancestors) if isinstance(a, _Statement)), None)
        if statement is None:
            statement_line = ranges[node].start.line
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            # A decorator or default value: the statement is the def line itself.
            statement_line = ranges[statement.name].start.line
        else:
            statement_line = ranges[statement].start.line
        scope = [a.name.value for a in ancestors if isinstance(a, (cst.FunctionDef, cst.ClassDef))]
        located[key] = Location(ranges[node], statement_line, ".".join(scope))
    return located


def _paths(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[int, list[cst.CSTNode]]:
    """Per flagged node (by id): the nodes from its top-level statement down to it."""
    wanted = {id(node) for node in nodes}
    paths: dict[int, list[cst.CSTNode]] = {}
    path: list[cst.CSTNode] = []
    for statement in module.body:
        if _found_all_below(statement, wanted, paths, path):
            break
    return paths


def _found_all_below(node: cst.CSTNode, wanted: set[int], paths: dict[int, list[cst.CSTNode]], path: list[cst.CSTNode]) -> bool:
    # A module-level function, not a closure: a recursive closure is a reference cycle, which kept
    # the file's whole LibCST tree alive until the collector's next pass.
    # Recursion as deep as LibCST's own code generation, which the file has been through.
    path.append(node)
    if id(node) in wanted:
        paths[id(node)] = path.copy()
        if len(paths) == len(wanted):
            return True
    for child in code_children(node):
        if type(child) is cst.Name and id(child) not in wanted:
            # A name holds no other node, and two nodes in five are names: each skipped saves a call.
            continue
        if _found_all_below(child, wanted, paths, path):
            return True
    path.pop()
    return False


def _unit_path(path: list[cst.CSTNode]) -> list[cst.CSTNode]:
    """`path` cut at the statement to run the position pass on.

    The innermost statement above the node, else the node itself (a top-level statement).
    """
    depth = next((i for i in range(len(path) - 2, -1, -1) if isinstance(path[i], _Statement)), len(path) - 1)
    return path[: depth + 1]


def _positions(module: cst.Module, tree: ast.Module, units: list[list[cst.CSTNode]]) -> dict[cst.CSTNode, CodeRange]:
    """LibCST's own ranges for every node of each unit, as if computed over the whole module."""
    provider = PositionProvider()
    computed = provider._computed
    # Outer statements first: a unit inside one already passed over has its ranges.
    for path in sorted(units, key=len):
        unit = cast(_AnyStatement, path[-1])
        if unit in computed:
            continue
        counterpart = _counterpart(module, tree, path)
        # A block and a `match` (for its cases) are what indent the statements under them.
        indent = [
            module.default_indent if n.indent is None else n.indent
            for n in path[:-1]
            if isinstance(n, (cst.IndentedBlock, cst.Match))
        ]
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=provider,
            indent_tokens=indent,
            line=_first_line(module, unit, counterpart),
            column=0,
        )
        parent = path[-2] if len(path) > 1 else None
        if isinstance(parent, cst.If) and parent.orelse is unit:
            # An `elif` is an `If` in its parent's `orelse`, generated by the parent with this flag.
            unit._codegen(state, is_elif=True)
        else:
            unit._codegen(state)
    # The position state stores only CodeRanges (the provider's type allows lazy values too).
    return cast(dict[cst.CSTNode, CodeRange], computed)


def _counterpart(module: cst.Module, tree: ast.Module, path: list[cst.CSTNode]) -> ast.stmt:
    """CPython's statement for the last node of `path`, found by walking both trees down the same bodies."""
    body: Sequence[cst.CSTNode] = module.body
    ast_body: list[ast.stmt] = tree.body
    index = 0
    while True:
        counterpart = ast_body[_ordinal(body, path[index])]
        if index == len(path) - 1:
            return counterpart
        body, ast_body, index = _inner_body(path, index, counterpart)


def _inner_body(
    path: list[cst.CSTNode], index: int, counterpart: ast.stmt
) -> tuple[Sequence[cst.CSTNode], list[ast.stmt], int]:
    """The body of `path[index]` that holds the rest of `path`, CPython's same body, and where the rest goes on."""
    statement, child = path[index], path[index + 1]
    for name in _BODY_FIELDS:
        value = getattr(statement, name, None)
        if value is child:
            if isinstance(child, cst.If):
                return (child,), getattr(counterpart, name), index + 1  # an `elif`
            ast_body = getattr(counterpart, name)
            break
        if isinstance(value, (tuple, list)) and any(item is child for item in value):
            # An except clause or a match case: its own body.
            ast_body = getattr(counterpart, name)[next(i for i, item in enumerate(value) if item is child)].body
            break
    else:
        raise ValueError(f"{type(child).__name__} is in no body of {type(statement).__name__}")
    # `else:`, `finally:`, an except clause or a case hold the indented block; a statement lies under a block.
    block = next(i for i in range(index + 1, len(path)) if isinstance(path[i], cst.IndentedBlock))
    return cast(cst.IndentedBlock, path[block]).body, ast_body, block + 1


def _ordinal(body: Sequence[cst.CSTNode], statement: cst.CSTNode) -> int:
    """Where CPython's body holds `statement`: a line `a; b` is one LibCST statement and two of CPython's."""
    ordinal = 0
    for other in body:
        if other is statement:
            return ordinal
        ordinal += _ast_count(other)
    raise ValueError(f"{type(statement).__name__} is not in the body")


def _ast_count(statement: cst.CSTNode) -> int:
    return len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1


def _first_line(module: cst.Module, statement: _AnyStatement, counterpart: ast.stmt) -> int:
    """The line LibCST starts `statement` on: CPython's line for it, less the lines LibCST keeps before that."""
    # CPython's line is the first token's, or the `def`/`class` keyword's under decorators.
    before: list[cst.CSTNode] = [*statement.leading_lines]
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        before += [*statement.decorators, *statement.lines_after_decorators]
    # Counted as generated: an empty line ending in a backslash spans two.
    return counterpart.lineno - sum(len(_NEWLINE.findall(module.code_for_node(node))) for node in before)
