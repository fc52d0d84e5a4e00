"""Positions and code of CPython's tree nodes, in characters, as LibCST reports them.

CPython places a node by line and UTF-8 byte offset; a finding's columns
count characters, 1-based, as `PositionProvider` does. Lines are counted as
CPython counts them (`\\r\\n`, `\\r` and `\\n` each end one).
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

from kvlint.rules.tbo._facts import Span

_LINE_BREAK = re.compile(r"\r\n?|\n")
_SPACE = " \t\f\r\n\\"


class SourceText:
    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def _starts(self) -> list[int]:
        # Most files KV301 reads give no fact with a position: their lines are never counted.
        return [0, *(match.end() for match in _LINE_BREAK.finditer(self.text))]

    def _offset(self, line: int, byte_column: int) -> int:
        start = self._starts[line - 1]
        end = self._starts[line] if line < len(self._starts) else len(self.text)
        line_text = self.text[start:end]
        if line_text.isascii():
            return start + byte_column
        return start + len(line_text.encode("utf-8")[:byte_column].decode("utf-8"))

    def start(self, node: ast.AST) -> int:
        return self._offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self._offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def code(self, node: ast.AST) -> str:
        """The node's code exactly as written."""
        return self.text[self.start(node) : self.end(node)]

    def code_with_parentheses(self, node: ast.AST) -> str:
        """The node's code with the parentheses around it: LibCST keeps those on the node."""
        start, end = self.start(node), self.end(node)
        while True:
            before, after = start, end
            while before > 0 and self.text[before - 1] in _SPACE:
                before -= 1
            while after < len(self.text) and self.text[after] in _SPACE:
                after += 1
            if not (before > 0 and self.text[before - 1] == "(" and self.text[after : after + 1] == ")"):
                return self.text[start:end]
            start, end = before - 1, after + 1

    def span(self, node: ast.AST) -> Span:
        """Line, column, end line and end column (exclusive), 1-based."""
        line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        return Span(
            line, self.start(node) - self._starts[line - 1] + 1, end_line, self.end(node) - self._starts[end_line - 1] + 1
        )

    def line(self, number: int) -> str:
        """Line `number` (1-based) without its line break."""
        end = self._starts[number] if number < len(self._starts) else len(self.text)
        return self.text[self._starts[number - 1] : end].rstrip("\r\n")
