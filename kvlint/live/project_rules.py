"""The project rules in a workspace: the saved files' facts, and the findings over them.

An edit leaves the other files' facts as saved; the open file's own facts
take its saved facts' place (`SavedFacts.findings` with `live`). The rules
read every file's facts (about a second on sglang/srt), so results are kept:
for the saved facts alone, the one `kvlint check` left in the result cache
when it read the same facts and suppressions, else the last one computed; for
an edit, the last few computed from the same facts.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kvlint.api.rule import ProjectRule, ProjectViolation
from kvlint.api.types import Finding, RunError
from kvlint.store.result_cache import ResultCache, digest, project_inputs
from kvlint.running.decide import FileDecisions, project_candidate

# Project results kept for different live facts: the open files' edits in turn.
_KEPT_PROJECT_RESULTS = 8

_Violations = tuple[list[tuple[ProjectRule, list[ProjectViolation]]], list[RunError]]


@dataclass
class ProjectResult:
    """Project rules' findings by path, and the errors of rules that crashed."""

    findings: dict[str, list[Finding]]
    errors: list[RunError]


class SavedFacts:
    """Each saved file's project facts by rule code, and the project rules' findings over them."""

    def __init__(
        self,
        codes: tuple[str, ...],
        cache: ResultCache,
        rules: Callable[[], tuple[ProjectRule, ...]],
        decisions: Callable[[str, str, dict[str, bytes]], FileDecisions],
    ) -> None:
        self.codes = codes
        self._cache = cache
        # The rules themselves load only when a result must be computed.
        self._rules = rules
        # (path, rule code, open files' texts) -> the decisions for findings in that path.
        self._decisions = decisions
        # Facts from the result cache stay pickled (`_Pickled`) until a rule runs over them: a
        # start from the cache may never need them.
        self._facts: dict[str, dict[str, Any] | _Pickled] = {}
        # Each file's facts as digests of their pickled form: the identity the result cache keys
        # project results by.
        self._identities: dict[str, dict[str, bytes]] = {}
        # One more at each change of the saved facts.
        self._generation = 0
        self._saved_result: Optional[tuple[int, ProjectResult]] = None
        self._finished: list[tuple[int, dict[str, dict[str, Any]], _Violations]] = []

    def __contains__(self, shown: str) -> bool:
        return shown in self._facts

    def keep_pickled(self, shown: str, pickled: dict[str, bytes]) -> None:
        """Facts as the result cache holds them (pickled, by rule code)."""
        self._facts[shown] = _Pickled(pickled)
        self._identities[shown] = {code: digest(fact) for code, fact in pickled.items()}
        self._generation += 1

    def keep(self, shown: str, facts: dict[str, Any]) -> None:
        self._facts[shown] = facts
        self._identities[shown] = {
            code: digest(pickle.dumps(fact, protocol=pickle.HIGHEST_PROTOCOL)) for code, fact in facts.items()
        }
        self._generation += 1

    def drop(self, shown: str) -> None:
        self._facts.pop(shown, None)
        self._identities.pop(shown, None)
        self._generation += 1

    def findings(
        self, live: dict[str, dict[str, Any]], texts: dict[str, bytes], only: Optional[str], digests: Optional[dict[str, bytes]]
    ) -> ProjectResult:
        """The project rules' findings over the saved facts with `live` (open files' facts) in their place.

        `texts`: the open files' current texts (their suppression comments decide); `only`: the
        findings in that file alone; `digests`: every saved file's identity as `kvlint check`'s
        result cache knows it (content and helper view), None when not known.
        """
        saved_only = not live and not texts and only is None
        if saved_only and (self._saved_result is None or self._saved_result[0] != self._generation):
            cached = self._cached(digests) if digests is not None else None
            if cached is not None:
                self._saved_result = (self._generation, cached)
        if saved_only and self._saved_result is not None and self._saved_result[0] == self._generation:
            return self._saved_result[1]
        violations, errors = self._violations(live)
        found: dict[str, list[Finding]] = {}
        for rule, produced in violations:
            decisions: dict[str, FileDecisions] = {}
            for violation in produced:
                if only is not None and violation.path != only:
                    continue
                if violation.path not in decisions:
                    decisions[violation.path] = self._decisions(violation.path, rule.code, texts)
                finding = decisions[violation.path].admit(project_candidate(rule, violation))
                if finding is not None:
                    found.setdefault(finding.path, []).append(finding)
        result = ProjectResult(_sorted(found), list(errors))
        if saved_only:
            # The saved files' suppressions (tokenized) are read again only once something was saved.
            self._saved_result = (self._generation, result)
        return result

    def _cached(self, digests: dict[str, bytes]) -> Optional[ProjectResult]:
        """What `kvlint check` left in the result cache, if it computed it from these facts and read
        the suppressions where its findings sit in these files."""
        found: dict[str, list[Finding]] = {}
        for code in self.codes:
            identities = ((shown, by_code[code]) for shown, by_code in self._identities.items() if code in by_code)
            entry = self._cache.project(code, project_inputs(code, identities), digests)
            if entry is None:
                return None
            for finding in entry.findings:
                found.setdefault(finding.path, []).append(finding)
        return ProjectResult(_sorted(found), [])

    def _violations(self, live: dict[str, dict[str, Any]]) -> _Violations:
        """Each project rule's violations, kept for the facts they were computed from (the same
        objects) until the saved ones change."""
        for generation, known, result in self._finished:
            if generation == self._generation and known.keys() == live.keys() and all(known[s] is live[s] for s in live):
                return result
        facts = {shown: held.facts() if isinstance(held, _Pickled) else held for shown, held in self._facts.items()}
        self._facts = dict(facts)
        for shown, extracted in live.items():
            if extracted:
                facts[shown] = extracted
            else:
                facts.pop(shown, None)
        violations: list[tuple[ProjectRule, list[ProjectViolation]]] = []
        errors: list[RunError] = []
        for rule in self._rules():
            contributors = {shown: by_code[rule.code] for shown, by_code in facts.items() if rule.code in by_code}
            try:
                violations.append((rule, rule.finish(contributors)))
            except Exception as exc:  # noqa: BLE001 - isolation, as in the engine
                errors.append(RunError("<project>", f"internal error in rule {rule.code}: {exc!r}", internal=True))
        self._finished = [(self._generation, dict(live), (violations, errors)), *self._finished[: _KEPT_PROJECT_RESULTS - 1]]
        return violations, errors


@dataclass(frozen=True)
class _Pickled:
    by_code: dict[str, bytes]

    def facts(self) -> dict[str, Any]:
        return {code: pickle.loads(fact) for code, fact in self.by_code.items()}


def _sorted(found: dict[str, list[Finding]]) -> dict[str, list[Finding]]:
    return {path: sorted(findings, key=lambda finding: finding.sort_key) for path, findings in found.items()}
