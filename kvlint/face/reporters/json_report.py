"""`--format json`: one object, described in docs/ARCHITECTURE.md ("Output contracts")."""

from __future__ import annotations

import json
from typing import Any, TextIO

from kvlint import __version__
from kvlint.running.engine import RunResult


def as_object(result: RunResult) -> dict[str, Any]:
    report: dict[str, Any] = {
        "kvlint": __version__,
        "files_in_scope": result.files_in_scope,
        "files_parsed": result.files_parsed,
        "findings": [finding.to_json() for finding in result.findings],
        "errors": [error.to_json() for error in result.errors],
    }
    if result.prove is not None:
        report["prove"] = result.prove.to_json()
    return report


def render(result: RunResult, out: TextIO, **_: Any) -> None:
    json.dump(as_object(result), out, indent=2)
    out.write("\n")
