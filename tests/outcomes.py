"""What two runs must agree on to have reported the same, whatever the cache did."""

from __future__ import annotations

from typing import Any

from kvlint.running.engine import RunResult


def run_summary(result: RunResult) -> tuple[Any, ...]:
    return (
        result.files_in_scope,
        result.files_parsed,
        [finding.to_json() for finding in result.findings],
        [error.to_json() for error in result.errors],
        result.prove,
    )
