"""Each finding's reach, decided after checking from the admission learned of the tree.

It reads only a finding's code and the class its flagged code sits in (the outermost part of
`Finding.scope`), never its file: which findings exist does not depend on it, and a cached
result stays valid when only a gate moves. KV301 flags the two-batch-overlap split, whose child
builder refuses (or drops) a field it does not copy whatever the pool: a tree refusing two-batch
overlap only under unified memory still runs that split on every other pool, so a KV301 finding
is live (a `latent` there would hide the crash the review thread this project grew from found).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from kvlint.api.reach import LIVE, UNKNOWN, Admission, Verdict, reported
from kvlint.api.types import Finding

# The rules whose findings only a two-batch-overlap split runs, and the flag that turns it on.
_TBO_CODES = frozenset({"KV301"})
TBO_FLAG = "enable_two_batch_overlap"


def verdict_of(finding: Finding, admission: Admission) -> Verdict:
    return verdict_at(finding.code, finding.scope, admission)


def verdict_at(code: str, scope: str, admission: Admission) -> Verdict:
    """The reach of a finding of `code` whose code sits in `scope` (enclosing classes and functions)."""
    if code in _TBO_CODES:
        where = admission.refusal(TBO_FLAG)
        refused = f"refuses it only under unified memory ({where})" if where is not None else "never refuses it"
        return Verdict(LIVE, f"a two-batch-overlap split meets the field whatever the pool, and the tree {refused}")
    if admission.unreadable:
        return Verdict(UNKNOWN, f"an allow-set kvlint cannot read: {admission.unreadable}")
    owner, _, inside = scope.partition(".")
    found = admission.class_verdict(owner) if owner else None
    if found is not None:
        method = inside.split(".", 1)[0]
        overriding = dict(found.overridden).get(method)
        if overriding is None:
            return found
        return Verdict(UNKNOWN, f"`{owner}.{method}` runs on no live class: each live class below "
                                f"`{owner}` overrides it ({overriding})")
    if not (admission.gates or admission.refusals):
        return Verdict(UNKNOWN, admission.no_gate())
    where = f"in {owner}" if owner else "at module level"
    return Verdict(UNKNOWN, f"{where}: not tied to an admitted or refused backend, nor to a unified pool")


def with_reach(findings: Iterable[Finding], admission: Admission) -> list[Finding]:
    """`findings`, each with its reach and reason."""
    decided = []
    for finding in findings:
        verdict = verdict_of(finding, admission)
        decided.append(replace(finding, reach=verdict.reach, reach_reason=verdict.reason))
    return decided


def in_reach(findings: Iterable[Finding], scope: str) -> list[Finding]:
    """The findings `--reach scope` reports (and fails on)."""
    return [finding for finding in findings if reported(finding.reach, scope)]
