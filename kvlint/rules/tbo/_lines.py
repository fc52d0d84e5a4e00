"""Lines of the few nodes KV301 reports from files it reads by the hundred.

`PositionProvider` positions every node of a module and costs about twice the
parse; KV301 needs a handful of positions per file (a field, one assignment),
so it finds them as text instead: where each top-level statement starts comes
from CPython's tree (`kvlint.analysis.locate.top_level_lines`), its code is the
parsed text up to the next one, and a node's own code is looked up inside its
top-level statement. The first identical occurrence is reported, which for an
assignment is an equally true example of the same write; an occurrence inside
a longer name or number (`len: int = 1` in `max_len: int = 10`) is not one.

A skeleton (`kvlint.running.fragment`) keeps every top-level statement of its
file on the same lines, so the whole file's tree serves for it too: most files
KV301 reads are skeletons, and parsing each again cost more than the lines.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

import libcst as cst

from kvlint.analysis.locate import top_level_lines
from kvlint.rules.tbo._facts import Span

# Line breaks as LibCST and CPython count them.
_LINE_BREAK = re.compile(r"\r\n?|\n")


_NAME_CHAR = re.compile(r"\w")


def _whole_occurrence(code: str, text: str) -> int:
    """The first offset of `text` in `code` not inside a longer name or number; -1 when there is none."""
    start = code.find(text)
    while start >= 0:
        before = code[start - 1] if start > 0 else " "
        after = code[start + len(text)] if start + len(text) < len(code) else " "
        cut_before = before == "." or (_NAME_CHAR.match(before) is not None and _NAME_CHAR.match(text[:1]) is not None)
        cut_after = _NAME_CHAR.match(after) is not None and _NAME_CHAR.match(text[-1:]) is not None
        if not (cut_before or cut_after):
            return start
        start = code.find(text, start + 1)
    return -1


class LineFinder:
    def __init__(self, module: cst.Module, source: str, tree: Optional[ast.Module]) -> None:
        """`source`: the text `module` was parsed from; `tree`: CPython's tree of it or of the file it is a skeleton of."""
        self._module = module
        self._source = source
        self._tree = tree
        # id(top-level statement) -> (its first line, its code, the code's lines)
        self._statements: Optional[dict[int, tuple[int, str, list[str]]]] = None

    def span(self, node: cst.CSTNode, top: cst.CSTNode) -> Span:
        """Where `node`'s code first appears inside the top-level statement `top`."""
        start_line, code, code_lines = self._top(top)
        text = self._module.code_for_node(node)
        # Generated alone, a nested node's continuation lines lose the block's
        # indentation; its first line and its line count are the source's own.
        first, *rest = text.split("\n")
        offset = max(_whole_occurrence(code, first), 0)
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
            tree = ast.parse(self._source) if self._tree is None else self._tree
            firsts = top_level_lines(self._module, tree)
            line_starts = [0, *(match.end() for match in _LINE_BREAK.finditer(self._source))]
            # A top-level statement's code runs up to the next one's first line (the last one's, to the end).
            offsets = [line_starts[line - 1] for line in firsts] + [len(self._source)]
            self._statements = {}
            for statement, line, start, end in zip(self._module.body, firsts, offsets, offsets[1:]):
                code = self._source[start:end]
                self._statements[id(statement)] = (line, code, code.split("\n"))
        return self._statements[id(top)]
