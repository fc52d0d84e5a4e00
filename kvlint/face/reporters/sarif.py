"""`--format sarif`: SARIF 2.1.0, one run, one result per finding."""

from __future__ import annotations

import json
from typing import Any, TextIO

from kvlint import __version__
from kvlint.running.engine import RunResult
from kvlint.running.registry import all_rules
from kvlint.api.types import ENGINE_CODES

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def as_object(result: RunResult) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {
            "id": engine.code,
            "name": engine.name,
            "shortDescription": {"text": engine.summary},
            "fullDescription": {"text": engine.summary},
            "defaultConfiguration": {"level": engine.severity.value},
        }
        for engine in ENGINE_CODES
    ]
    rules += [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": (rule.__doc__ or rule.name).strip().splitlines()[0]},
            "fullDescription": {"text": (rule.__doc__ or "").strip()},
            "defaultConfiguration": {"level": rule.severity.value},
        }
        for rule in all_rules()
    ]
    results = []
    for finding in result.findings:
        item: dict[str, Any] = {
            "ruleId": finding.code,
            "level": finding.severity.value,
            "message": {"text": finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": finding.path},
                        "region": {
                            "startLine": finding.line,
                            "startColumn": finding.column,
                            "endLine": finding.end_line,
                            "endColumn": finding.end_column,
                        },
                    }
                }
            ],
            "partialFingerprints": {"kvlint/v1": finding.fingerprint},
        }
        if finding.fix is not None:
            item["properties"] = {"fix": finding.fix.to_json()}
        results.append(item)
    notifications = [
        {"level": "error", "message": {"text": f"{error.path}: {error.message}"}} for error in result.errors
    ]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "kvlint", "version": __version__, "rules": rules}},
                "results": results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            }
        ],
    }


def render(result: RunResult, out: TextIO, **_: Any) -> None:
    json.dump(as_object(result), out, indent=2)
    out.write("\n")
