"""Every "is this reported?" decision, in one place.

Rules return raw results; per-file rules through `ctx.report`, project rules
from `finish`. Both become a `Candidate` (where it is, what it says) and pass
through `FileDecisions.admit`, which applies the file's per-file ignores and
its suppression comments (on the flagged line or on the first line of the
statement holding it), records which suppression was used, and fingerprints
what is left. Unused suppressions (KV001) are reported only after every rule,
project rules included, has had its findings decided.

Nothing here imports LibCST.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional

from kvlint.running.suppression import parse_suppressions
from kvlint.api.types import UNPROVEN_WRITE_LOC, UNUSED_IGNORE, Finding, FixInfo, Severity, Suppression

if TYPE_CHECKING:
    from kvlint.api.rule import ProjectRule, ProjectViolation

# (line, column) of a suppression comment: which one a finding used.
SuppressionId = tuple[int, int]
# Codes only a suppression naming them hides. `--prove` certifies every door: a bare `# noqa`
# written for another tool, or a `# kvlint: ignore[KV1]` meant for the rules, must not pass it.
NAMED_ONLY = frozenset({UNPROVEN_WRITE_LOC.code})


@dataclass(frozen=True)
class Candidate:
    """A rule's raw result, located, before anything decided whether it is reported."""

    code: str
    name: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    # The flagged source, whitespace-normalised: part of the fingerprint.
    snippet: str
    # First line of the statement holding the flagged node: a suppression may sit there.
    statement_line: int
    # Dotted name of the enclosing classes and functions ("" at module level).
    scope: str = ""
    fix: Optional[FixInfo] = None
    # Where the flagged code sits, for reach, when `scope` (fingerprinted) names something else.
    place: str = ""


@dataclass
class FileDecisions:
    """The decisions for one file: its ignored codes, its suppressions, which were used."""

    path: str
    ignored: frozenset[str] = frozenset()
    suppressions: dict[int, list[Suppression]] = field(default_factory=dict)
    # The file relative to the project's root, which fingerprints hash ("": `path`): a baseline
    # recorded from one folder matches a run from another.
    project_path: str = ""
    used: set[SuppressionId] = field(default_factory=set)
    _occurrences: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @classmethod
    def for_source(cls, path: str, ignored: frozenset[str], text: Optional[str], project_path: str = "") -> "FileDecisions":
        """`text` None: the file's comments are not needed (nothing to suppress, nothing to report unused)."""
        return cls(path, ignored, parse_suppressions(text) if text is not None else {}, project_path=project_path)

    def admit(self, candidate: Candidate) -> Optional[Finding]:
        """The finding to report, or None when an ignore or a suppression removes it."""
        if candidate.code in self.ignored:
            return None
        if self._suppressed(candidate.code, (candidate.line, candidate.statement_line)):
            return None
        key = (candidate.code, candidate.scope, candidate.snippet)
        self._occurrences[key] = self._occurrences.get(key, 0) + 1
        return Finding(
            code=candidate.code,
            name=candidate.name,
            severity=candidate.severity,
            path=candidate.path,
            line=candidate.line,
            column=candidate.column,
            end_line=candidate.end_line,
            end_column=candidate.end_column,
            message=candidate.message,
            fingerprint=fingerprint(candidate.code, self.project_path or candidate.path, candidate.scope, candidate.snippet,
                                    self._occurrences[key]),
            fix=candidate.fix,
            scope=candidate.place or candidate.scope,
        )

    def _suppressed(self, code: str, lines: tuple[int, int]) -> bool:
        named_only = code in NAMED_ONLY
        for line in dict.fromkeys(lines):
            for suppression in self.suppressions.get(line, ()):
                if suppression.names(code) if named_only else suppression.covers(code):
                    self.used.add((suppression.line, suppression.column))
                    return True
        return False

    def open_suppressions(self) -> tuple[Suppression, ...]:
        """Suppressions nothing used so far that could be reported as unused."""
        found = []
        for _line, items in sorted(self.suppressions.items()):
            for item in items:
                # A bare `# noqa` may be there for another tool (a `# noqa: E501` is not read at all).
                if (item.line, item.column) in self.used or item.bare_noqa:
                    continue
                found.append(item)
        return tuple(found)


def project_candidate(rule: ProjectRule, violation: ProjectViolation) -> Candidate:
    """A project rule's violation as a candidate: it already knows its position and snippet."""
    fix = None
    if violation.fix is not None:
        edit = violation.fix
        fix = FixInfo(edit.applicability, edit.description, edit.text, edit.path, edit.after_line)
    return Candidate(
        code=rule.code,
        name=rule.name,
        severity=violation.severity,
        path=violation.path,
        line=violation.line,
        column=violation.column,
        end_line=violation.end_line,
        end_column=violation.end_column,
        message=violation.message,
        snippet=violation.snippet,
        statement_line=violation.statement_line or violation.line,
        fix=fix,
    )


def unused_ignores(path: str, open_suppressions: Iterable[Suppression], used: Iterable[SuppressionId] = (),
                   project_path: str = "") -> list[Finding]:
    """KV001 for each suppression that stayed open after every rule, project rules included
    (`project_path`: the file as fingerprints name it, relative to the project's root)."""
    used = set(used)
    findings = []
    for item in open_suppressions:
        if (item.line, item.column) in used:
            continue
        codes = "" if item.codes is None else f"[{','.join(sorted(item.codes))}]"
        findings.append(
            Finding(
                code=UNUSED_IGNORE.code,
                name=UNUSED_IGNORE.name,
                severity=UNUSED_IGNORE.severity,
                path=path,
                line=item.line,
                column=item.column,
                end_line=item.line,
                end_column=item.column + 1,
                message=f"suppression{codes} suppresses nothing",
                fingerprint=fingerprint(UNUSED_IGNORE.code, project_path or path, "", codes, item.line),
            )
        )
    return findings


def fingerprint(code: str, path: str, scope: str, snippet: str, occurrence: int) -> str:
    """Stable across unrelated edits: no line numbers, only what and where by name."""
    text = f"{code}\0{path}\0{scope}\0{snippet}\0{occurrence}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]
