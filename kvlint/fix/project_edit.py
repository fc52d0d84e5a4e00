"""Apply a project rule's edit: new lines inserted after a given line.

The inserted text arrives already indented; this keeps the file's newline
style and refuses an edit that would not compile.
"""

from __future__ import annotations

import libcst as cst


def insert_after_line(source: bytes, after_line: int, text: str) -> bytes:
    lines = source.splitlines(keepends=True)
    if not 1 <= after_line <= len(lines):
        raise ValueError(f"line {after_line} is outside the file ({len(lines)} lines)")
    anchor = lines[after_line - 1]
    newline = anchor[len(anchor.rstrip(b"\r\n")) :] or _dominant_newline(lines)
    if not anchor.endswith((b"\n", b"\r")):
        lines[after_line - 1] = anchor + newline
    encoding = cst.parse_module(source).encoding
    inserted = b"".join(part.encode(encoding) + newline for part in text.splitlines())
    result = b"".join(lines[:after_line]) + inserted + b"".join(lines[after_line:])
    compile(result, "<fix>", "exec", dont_inherit=True)
    return result


def _dominant_newline(lines: list[bytes]) -> bytes:
    crlf = sum(line.endswith(b"\r\n") for line in lines)
    return b"\r\n" if crlf * 2 > len(lines) else b"\n"
