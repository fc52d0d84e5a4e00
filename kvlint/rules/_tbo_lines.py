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

from kvlint.rules._tbo_facts import Span


class LineFinder:
    def __init__(self, module: cst.Module) -> None:
        self._module = module
        # id(top-level statement) -> (its first line, its code)
        self._statements: Optional[dict[int, tuple[int, str]]] = None

    def span(self, node: cst.CSTNode, top: cst.CSTNode) -> Span:
        """Where `node`'s code first appears inside the top-level statement `top`."""
        start_line, code = self._top(top)
        text = self._module.code_for_node(node)
        offset = max(code.find(text), 0)
        line = start_line + code.count("\n", 0, offset)
        column = offset - (code.rfind("\n", 0, offset) + 1) + 1
        last = text.rsplit("\n", 1)
        end_column = (column - 1 + len(text) if len(last) == 1 else len(last[1])) + 1
        return Span(line, column, line + text.count("\n"), end_column)

    def _top(self, top: cst.CSTNode) -> tuple[int, str]:
        if self._statements is None:
            self._statements = {}
            line = 1 + sum(1 for _ in self._module.header)
            for statement in self._module.body:
                code = self._module.code_for_node(statement)
                self._statements[id(statement)] = (line, code)
                line += code.count("\n")
        return self._statements[id(top)]
