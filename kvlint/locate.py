"""Where flagged nodes are: positions, enclosing statement and scope.

Only files with at least one violation pay for this pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, ParentNodeProvider, PositionProvider


@dataclass(frozen=True)
class Location:
    range: CodeRange
    # First line of the innermost statement holding the node (suppressions may sit there).
    statement_line: int
    # Dotted name of the enclosing classes/functions ("" at module level).
    scope: str


def locate(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[int, Location]:
    """Locations keyed by `id(node)`; `module` must be the tree the nodes belong to."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions, parents = wrapper.resolve(PositionProvider), wrapper.resolve(ParentNodeProvider)
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
        located[id(node)] = Location(positions[node], statement_line, ".".join(reversed(scope)))
    return located
