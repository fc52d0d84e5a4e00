"""Project rules over the facts the checked files gave: run each, decide its findings, apply its edits.

A rule's result is cached under the identity of its inputs: the facts
themselves, file by file, not the files' bytes. An edit that leaves a file's
facts as they were (a comment, most edits of a backend that names no batch
field) reuses the result; a suppression comment in a file a finding sits in
is read as an input too.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from kvlint.api.config import Config
from kvlint.api.triggers import Triggers
from kvlint.api.types import Applicability, FileOutcome, Finding, RunError, fix_allowed
from kvlint.store.result_cache import ProjectEntry, ResultCache, digest, project_inputs
from kvlint.running.decide import FileDecisions, project_candidate
from kvlint.running.plan import Plan
from kvlint.running.selection import per_file_ignored


@dataclass(frozen=True)
class Checked:
    """One file's result, fresh or from the cache."""

    # None: no selected rule's trigger words, so the file was not parsed.
    outcome: Optional[FileOutcome]
    facts: dict[str, Any] = field(default_factory=dict)
    # Facts from the cache stay pickled until a project rule has to run again.
    facts_pickled: bool = False

    def fact(self, code: str) -> Any:
        return pickle.loads(self.facts[code]) if self.facts_pickled else self.facts[code]

    def fact_identity(self, code: str) -> bytes:
        """What `fact(code)` is, as a digest of its pickled form (as the result cache keeps it)."""
        return digest(self.facts[code] if self.facts_pickled else pickle.dumps(self.facts[code], protocol=pickle.HIGHEST_PROTOCOL))


class ProjectRun:
    """Project rules: run each over the facts the files gave it, decide its findings, apply its edits."""

    def __init__(
        self,
        plan: Callable[[], Plan],
        config: Config,
        config_paths: dict[str, str],
        sources: Mapping[str, bytes],
        digests: dict[str, bytes],
        result_cache: Optional[ResultCache],
        fix: Optional[Applicability],
    ) -> None:
        self._plan = plan
        self._config = config
        self._config_paths = config_paths
        self._sources = sources
        self._digests = digests
        self._cache = result_cache
        self._fix = fix
        # Suppressions (line, column) that project findings used, by path: not KV001.
        self.used: dict[str, set[tuple[int, int]]] = {}
        # How the last rule's findings came about, for `-v`.
        self.answered_by = ""

    def run_rule(
        self, code: str, checked: dict[str, Checked], fixed: dict[str, tuple[bytes, bytes]], errors: list[RunError]
    ) -> list[Finding]:
        contributors = [shown for shown, result in checked.items() if code in result.facts]
        digests = self._digests
        inputs = project_inputs(code, ((shown, checked[shown].fact_identity(code)) for shown in contributors)) if self._cache else b""
        if self._cache is not None and self._fix is None:
            known = self._cache.project(code, inputs, digests)
            if known is not None:
                self.answered_by = "from the cache"
                for path, line, column in known.used:
                    self.used.setdefault(path, set()).add((line, column))
                return list(known.findings)
        project_rule = self._plan().project_rule(code)
        self.answered_by = f"ran over the facts of {len(contributors)} files"
        try:
            violations = project_rule.finish({shown: checked[shown].fact(code) for shown in contributors})
        except Exception as exc:  # noqa: BLE001 - isolation, as for per-file rules
            errors.append(RunError("<project>", f"internal error in rule {code}: {exc!r}", internal=True))
            return []
        decisions: dict[str, FileDecisions] = {}
        produced = []
        for violation in violations:
            if violation.path not in decisions:
                decisions[violation.path] = self._decisions(violation.path, code)
            finding = decisions[violation.path].admit(project_candidate(project_rule, violation))
            if finding is None:
                continue
            produced.append(finding)
            if violation.fix is not None and fix_allowed(violation.fix.applicability, self._fix):
                _apply_project_edit(violation.fix, self._sources, fixed, errors)
        used = tuple(sorted((path, *where) for path, decided in decisions.items() for where in decided.used))
        for path, line, column in used:
            self.used.setdefault(path, set()).add((line, column))
        if self._cache is not None:
            # A suppression comment in the file a finding sits in is an input too.
            read = tuple(sorted({(v.path, digests[v.path]) for v in violations if v.path in digests}))
            self._cache.store_project(code, ProjectEntry(inputs, read, tuple(produced), used))
        return produced

    def _decisions(self, path: str, code: str) -> FileDecisions:
        data = self._sources.get(path)
        if data is None:
            # Out of scope (the fix target of a rule reading a wider tree): nothing to decide from.
            return FileDecisions(path)
        ignored = per_file_ignored(self._config_paths[path], self._config.per_file_ignores, [code])
        return FileDecisions.for_source(path, ignored, data.decode("utf-8", errors="replace"), self._config_paths[path])


def _apply_project_edit(
    edit: Any, sources: Mapping[str, bytes], fixed: dict[str, tuple[bytes, bytes]], errors: list[RunError]
) -> None:
    # Only a `fix` with a project rule's edit needs it, and it loads LibCST.
    from kvlint.fix.project_edit import insert_after_line

    original = sources.get(edit.path)
    if original is None:
        errors.append(RunError(edit.path, "fix target is not in scope; not applied"))
        return
    current = fixed.get(edit.path, (original, original))[1]
    try:
        updated = insert_after_line(current, edit.after_line, edit.text)
    except (ValueError, SyntaxError) as exc:
        errors.append(RunError(edit.path, f"fix not applied: {exc}"))
        return
    fixed[edit.path] = (original, updated)


def with_context_facts(
    checked: dict[str, Checked],
    context: Mapping[str, bytes],
    triggers: Triggers,
    result_cache: Optional[ResultCache],
    digests: dict[str, bytes],
    check_files: Callable[..., None],
) -> dict[str, Checked]:
    """The checked files and the project facts of the rest of the tree, their context (cached by content)."""
    if not context or not triggers.project_codes:
        return checked
    cached = {shown: result_cache.project_facts(shown, digests[shown]) for shown in context} if result_cache else {}
    found = {shown: Checked(None, facts, facts_pickled=True) for shown, facts in cached.items() if facts is not None}
    unknown = [shown for shown in context if shown not in found]
    missing = [shown for shown in unknown if triggers.wanted(context[shown])]
    if missing:
        check_files(missing, found)
    if unknown and result_cache is not None:
        # A file no project rule reads (no trigger words) has no facts: kept as such, so no later run reads it again.
        known = {shown: (digests[shown], found[shown].facts if shown in found else {}) for shown in unknown}
        failed = {shown for shown in missing if shown in found and _errors(found[shown])}
        result_cache.store_context_facts({shown: entry for shown, entry in known.items() if shown not in failed})
    return {**found, **checked}


def _errors(checked: Checked) -> bool:
    return checked.outcome is not None and bool(checked.outcome.errors)
