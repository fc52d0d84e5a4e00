"""The language server's conversions: kvlint's 1-based code-point columns to the client's units."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from kvlint.api.types import Applicability, Finding, FixInfo, Severity
from kvlint.face.server._convert import diagnostic, ignore_edit, key_of
from kvlint.running.fix_edits import TextEdit

LINE = "x = '😀'; pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
START = LINE.index("fb.out_cache_loc") + 1  # 1-based, in code points


def finding(severity: Severity = Severity.ERROR) -> Finding:
    fix = FixInfo(Applicability.SAFE, "pass `KVWriteLoc.for_batch(fb)`", "KVWriteLoc.for_batch(fb)")
    return Finding("KV101", "bare-write-loc", severity, "a.py", 1, START, 1, START + 16, "msg", "fp", fix)


def test_columns_count_utf16_units_by_default_and_code_points_when_the_client_asks() -> None:
    utf16 = diagnostic(finding(), PositionCodec(), [LINE])
    # The emoji is one code point and two UTF-16 units: every later column moves by one.
    assert (utf16.range.start.character, utf16.range.end.character) == (START, START + 16)
    utf32 = diagnostic(finding(), PositionCodec(types.PositionEncodingKind.Utf32), [LINE])
    assert (utf32.range.start.character, utf32.range.end.character) == (START - 1, START + 15)


def test_a_diagnostic_keeps_the_finding_key_severity_and_fix() -> None:
    warning = diagnostic(finding(Severity.WARNING), PositionCodec(), [LINE])
    assert warning.severity == types.DiagnosticSeverity.Warning and warning.source == "kvlint"
    assert key_of(warning) == ("a.py", "KV101", 1, START, 1, START + 16)
    assert isinstance(warning.data, dict) and warning.data["fix"] == {"applicability": "safe", "description": "pass `KVWriteLoc.for_batch(fb)`"}


def test_ignore_appends_a_comment_or_extends_the_one_there() -> None:
    assert ignore_edit("KV101", "    f(x)\n", 3) == TextEdit(3, 9, 3, 9, "  # kvlint: ignore[KV101]")
    line = "    f(x)  # kvlint: ignore[KV201]\n"
    edit = ignore_edit("KV101", line, 3)
    assert line[: edit.start_column - 1] + edit.new_text + line[edit.end_column - 1 :] == "    f(x)  # kvlint: ignore[KV201, KV101]\n"
