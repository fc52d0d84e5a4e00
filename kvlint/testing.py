"""Check or fix a source string in memory: for rule examples and tests."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from kvlint.checker import CheckRequest, check_bytes
from kvlint.contract import Contract
from kvlint.rule import Rule
from kvlint.types import Applicability, FileOutcome


def run_source(
    source: str,
    rules: Sequence[type[Rule]],
    *,
    contract: Optional[Contract] = None,
    overrides: Mapping[str, str] = {},
    fix: Optional[Applicability] = None,
    path: str = "example.py",
) -> FileOutcome:
    contract = (contract or Contract()).with_overrides(overrides)
    request = CheckRequest(path=path, rules=tuple(rules), contract=contract, fix=fix)
    return check_bytes(request, source.encode()).outcome


def fixed_source(source: str, rules: Sequence[type[Rule]], **kwargs: object) -> str:
    """The source after `kvlint fix` (safe fixes unless `fix=` says otherwise)."""
    kwargs.setdefault("fix", Applicability.SAFE)
    outcome = run_source(source, rules, **kwargs)  # type: ignore[arg-type]
    if outcome.errors:
        raise AssertionError(f"fix failed: {outcome.errors}")
    return source if outcome.fixed_source is None else outcome.fixed_source.decode()
