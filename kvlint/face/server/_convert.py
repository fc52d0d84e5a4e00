"""Findings and fixes as LSP types: 1-based code-point positions to the client's units."""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from kvlint.api.types import Applicability, Finding, Severity
from kvlint.running.fix_edits import FindingFix, FindingKey, TextEdit, finding_key

SOURCE = "kvlint"
FIX_ALL_KIND = "source.fixAll.kvlint"
_SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning}
_IGNORE_COMMENT = re.compile(r"#\s*kvlint:\s*ignore\[([^\]]*)\]")


def position(codec: PositionCodec, lines: Sequence[str], line: int, column: int) -> types.Position:
    """1-based line and code-point column as the client counts (UTF-16 unless it chose otherwise)."""
    return codec.position_to_client_units(lines, types.Position(line=max(line - 1, 0), character=max(column - 1, 0)))


def diagnostic(finding: Finding, codec: PositionCodec, lines: Sequence[str]) -> types.Diagnostic:
    start = position(codec, lines, finding.line, finding.column)
    end = position(codec, lines, finding.end_line, finding.end_column)
    fix: Optional[dict[str, Any]] = None
    if finding.fix is not None:
        fix = {"applicability": finding.fix.applicability.value, "description": finding.fix.description}
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        # The reach in the message: an editor shows no custom field, and a latent finding must read as one.
        message=f"{finding.message} [{finding.reach}]" if finding.reach else finding.message,
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        source=SOURCE,
        data={"key": list(finding_key(finding)), "name": finding.name, "fix": fix, "reach": finding.reach,
              "reach_reason": finding.reach_reason},
    )


def key_of(diagnostic: types.Diagnostic) -> Optional[FindingKey]:
    data = diagnostic.data
    if diagnostic.source != SOURCE or not isinstance(data, dict) or not isinstance(data.get("key"), list):
        return None
    path, code, line, column, end_line, end_column = data["key"]
    return (str(path), str(code), int(line), int(column), int(end_line), int(end_column))


def text_edit(edit: TextEdit, codec: PositionCodec, lines: Sequence[str]) -> types.TextEdit:
    start = position(codec, lines, edit.start_line, edit.start_column)
    end = position(codec, lines, edit.end_line, edit.end_column)
    return types.TextEdit(range=types.Range(start=start, end=end), new_text=edit.new_text)


def workspace_edit(uri: str, edits: Sequence[TextEdit], codec: PositionCodec, lines: Sequence[str]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={uri: [text_edit(edit, codec, lines) for edit in edits]})


def fix_title(code: str, fix: FindingFix) -> str:
    label = "" if fix.applicability is Applicability.SAFE else " (unsafe)"
    return f"kvlint {code}: {fix.description}{label}"


def ignore_edit(code: str, line_text: str, line: int) -> TextEdit:
    """Add `code` to the line's `# kvlint: ignore[...]`, or append one."""
    stripped = line_text.rstrip("\r\n")
    found = _IGNORE_COMMENT.search(stripped)
    if found is not None:
        codes = [part.strip() for part in found.group(1).split(",") if part.strip()]
        inside = ", ".join([*codes, code])
        return TextEdit(line, found.start(1) + 1, line, found.end(1) + 1, inside)
    end = len(stripped) + 1
    return TextEdit(line, end, line, end, f"  # kvlint: ignore[{code}]")
