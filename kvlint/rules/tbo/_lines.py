"""Lines of the few nodes KV301 reports from files it reads by the hundred.

`PositionProvider` positions every node of a module and costs about twice the
parse; KV301 needs a handful of positions per file (a field, one assignment),
so it finds them as text instead: the module's top-level statements are
generated once to learn where each starts, and a node's own code is looked up
inside its top-level statement. The first identical occurrence is reported,
which for an assignment is an equally true example of the same write.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.rules.tbo._facts import Span


class LineFinder:
    def __init__(self, module: cst.Module) -> None:
        self._module = module
        # id(top-level statement) -> (its first line, its code, the code's lines)
        self._statements: Optional[dict[int, tuple[int, str, list[str]]]] = None

    def span(self, node: cst.CSTNode, top: cst.CSTNode) -> Span:
        """Where `node`'s code first appears inside the top-level statement `top`."""
        start_line, code, code_lines = self._top(top)
        text = self._module.code_for_node(node)
        # Generated alone, a nested node's continuation lines lose the block's
        # indentation; its first line and its line count are the source's own.
        first, *rest = text.split("\n")
        offset = max(code.find(first), 0)
        line = start_line + code.count("\n", 0, offset)
        column = offset - (code.rfind("\n", 0, offset) + 1) + 1
        if not rest:
            return Span(line, column, line, column + len(first))
        end_line = line + len(rest)
        last_source = code_lines[end_line - start_line]
        last = rest[-1].strip()
        return Span(line, column, end_line, last_source.rfind(last) + len(last) + 1)

    def _top(self, top: cst.CSTNode) -> tuple[int, str, list[str]]:
        if self._statements is None:
            self._statements = {}
            line = 1 + sum(1 for _ in self._module.header)
            for statement in self._module.body:
                code = self._module.code_for_node(statement)
                self._statements[id(statement)] = (line, code, code.split("\n"))
                line += code.count("\n")
        return self._statements[id(top)]
