"""`--format sarif`: SARIF 2.1.0, one run, one result per finding.

A finding with a fix carries it as a SARIF `fix`: `artifactChanges` whose
`replacements` give the deleted region and the inserted content, computed by
`kvlint.running.fix_edits` (the fix applied alone, imports included), and the
fix's applicability (safe or unsafe) leading its description.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, TextIO

from kvlint import __version__
from kvlint.running.engine import RunResult
from kvlint.running.registry import all_rules
from kvlint.api.types import ENGINE_CODES
from kvlint.running.fix_edits import FindingFix, FindingKey, finding_key

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def as_object(result: RunResult, fixes: Optional[Mapping[FindingKey, FindingFix]] = None) -> dict[str, Any]:
    """The SARIF log; `fixes` (by finding) become each result's `fixes`."""
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
        item["properties"] = {"reach": finding.reach, "reach_reason": finding.reach_reason}
        if finding.fix is not None:
            item["properties"]["fix"] = finding.fix.to_json()
            known = (fixes or {}).get(finding_key(finding))
            if known is not None:
                item["fixes"] = [sarif_fix(known)]
        results.append(item)
    notifications = [
        {"level": "error", "message": {"text": f"{error.path}: {error.message}"}} for error in result.errors
    ]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "kvlint", "version": __version__, "rules": rules}},
        "results": results,
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
    }
    if result.prove is not None:
        run["properties"] = {"prove": result.prove.to_json()}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def sarif_fix(fix: FindingFix) -> dict[str, Any]:
    return {
        "description": {"text": f"{fix.applicability.value} fix: {fix.description}"},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": fix.path},
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": edit.start_line,
                            "startColumn": edit.start_column,
                            "endLine": edit.end_line,
                            "endColumn": edit.end_column,
                        },
                        "insertedContent": {"text": edit.new_text},
                    }
                    for edit in fix.edits
                ],
            }
        ],
        "properties": {"applicability": fix.applicability.value},
    }


def render(
    result: RunResult, out: TextIO, fixes: Optional[Mapping[FindingKey, FindingFix]] = None, **_: Any
) -> None:
    json.dump(as_object(result, fixes), out, indent=2)
    out.write("\n")
