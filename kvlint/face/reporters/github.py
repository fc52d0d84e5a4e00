"""`--format github`: workflow commands that annotate a pull request."""

from __future__ import annotations

from typing import Any, TextIO

from kvlint.running.engine import RunResult


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def render(result: RunResult, out: TextIO, **_: Any) -> None:
    for finding in result.findings:
        level = "error" if finding.severity.value == "error" else "warning"
        out.write(
            f"::{level} file={_escape_property(finding.path)},line={finding.line},col={finding.column},"
            f"endLine={finding.end_line},endColumn={finding.end_column},"
            f"title={finding.code} {finding.name}::{finding.code} {_escape(finding.message)}\n"
        )
    for error in result.errors:
        out.write(f"::error file={_escape_property(error.path)}::{_escape(error.message)}\n")
