"""Where flagged nodes are: positions, enclosing statement and scope.

Only files with at least one violation pay for this, and only for the
top-level statements that hold a flagged node: LibCST's position metadata
costs a code-generation pass, so it runs on a one-statement module, and the
lines of the statements before it are counted from their generated code.
Parents come from our own walk of that statement: LibCST's parent provider
is a visitor pass of its own, which cost more than the positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from kvlint.analysis.walk import code_children


@dataclass(frozen=True)
class Location:
    range: CodeRange
    # First line of the innermost statement holding the node (suppressions may sit there).
    statement_line: int
    # Dotted name of the enclosing classes/functions ("" at module level).
    scope: str


def locate(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[int, Location]:
    """Locations keyed by `id(node)`; `module` must be the tree the nodes belong to."""
    wanted = {id(node) for node in nodes}
    located: dict[int, Location] = {}
    lines_before = len(module.header)
    for statement in module.body:
        held = [node for node in _subtree(statement) if id(node) in wanted]
        if held:
            located.update(_locate_in(module, statement, held, lines_before))
            if len(located) == len(wanted):
                break
        lines_before += module.code_for_node(statement).count("\n")
    return located


def _subtree(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(code_children(node))


def _parents(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in code_children(node):
            parents[child] = node
            stack.append(child)
    return parents


def _locate_in(
    module: cst.Module, statement: cst.BaseStatement, nodes: list[cst.CSTNode], lines_before: int
) -> dict[int, Location]:
    alone = module.with_changes(body=[statement], header=[], footer=[])
    positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
    parents = _parents(statement)

    def shifted(code_range: CodeRange) -> CodeRange:
        start, end = code_range.start, code_range.end
        return CodeRange((start.line + lines_before, start.column), (end.line + lines_before, end.column))

    located: dict[int, Location] = {}
    for node in nodes:
        statement_line = positions[node].start.line
        scope: list[str] = []
        current: cst.CSTNode = node
        seen_statement = False
        while current in parents:
            current = parents[current]
            if not seen_statement and isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                statement_line = positions[current].start.line
                if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                    # A decorator or default value: the statement is the def line itself.
                    statement_line = positions[current.name].start.line
                seen_statement = True
            if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                scope.append(current.name.value)
        located[id(node)] = Location(
            shifted(positions[node]), statement_line + lines_before, ".".join(reversed(scope))
        )
    return located
