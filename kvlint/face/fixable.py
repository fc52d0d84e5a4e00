"""What `kvlint fix` can do about findings, said alike by the check's summary, `--statistics` and
the fix summary, so that `Fixed 0` after a check is never a surprise: a safe fix is applied by
`kvlint fix`, an unsafe one only by `kvlint fix --unsafe`."""

from __future__ import annotations

from typing import Iterable

from kvlint.api.types import Applicability, Finding


def fixable_counts(findings: Iterable[Finding]) -> str:
    """`20 fixable: 12 safe, 8 with --unsafe`, a part with none left out; "" when no finding has a
    fix (as ruff, which names fixes only where there are some)."""
    safe = unsafe = 0
    for finding in findings:
        if finding.fix is not None:
            if finding.fix.applicability == Applicability.SAFE:
                safe += 1
            else:
                unsafe += 1
    if not safe + unsafe:
        return ""
    parts = ([f"{safe} safe"] if safe else []) + ([f"{unsafe} with --unsafe"] if unsafe else [])
    return f"{safe + unsafe} fixable: {', '.join(parts)}"


def unsafe_only(findings: Iterable[Finding]) -> int:
    """How many of `findings` only `--unsafe` fixes."""
    return sum(1 for finding in findings if finding.fix is not None and finding.fix.applicability == Applicability.UNSAFE)
