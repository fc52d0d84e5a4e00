"""What a fix may change: the flagged spans, the import block, and the lines a
project rule's edit inserts. Shared by the property and corpus tests."""

from __future__ import annotations

import difflib
from typing import Any, Iterable

IMPORT_PREFIXES = ("import ", "from ")


def splice_replacements(original: str, findings: Iterable[dict[str, Any]]) -> str:
    """`original` with every same-file fix's replacement swapped in for its flagged span."""
    lines = original.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    edits = sorted(
        ((offset(f["line"], f["column"]), offset(f["end_line"], f["end_column"]), f["fix"]["replacement"])
         for f in findings if f["fix"] is not None and not f["fix"].get("path")),
        reverse=True,
    )
    text = original
    for start, end, replacement in edits:
        text = text[:start] + replacement + text[end:]
    return text


def changes_outside_fixes(original: str, fixed: str, findings: list[dict[str, Any]], inserted: Iterable[str] = ()) -> list[str]:
    """Lines `fixed` changed that no fix accounts for; empty when the fix stayed in bounds.

    `inserted` holds the lines project-rule edits may add anywhere in this file.
    """
    # Lines compare without their indentation: a reported multi-line replacement is
    # rendered on its own, at column 0, while the fix writes it at the node's indent.
    expected = [line.strip() for line in splice_replacements(original, findings).splitlines()]
    actual = [line.strip() for line in fixed.splitlines()]
    allowed_insertions = {line.strip() for line in inserted}
    stray: list[str] = []
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for line in expected[i1:i2] + actual[j1:j2]:
            if not line or line.startswith(IMPORT_PREFIXES) or line in allowed_insertions:
                continue
            stray.append(line)
    return stray
