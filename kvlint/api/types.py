"""Plain data shared by the engine, the rules, the reporters and the CLI.

Everything here is a frozen dataclass so results can cross process
boundaries, be cached and be compared in tests without surprises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


class Applicability(str, Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


def fix_allowed(applicability: Applicability, allowed: Optional[Applicability]) -> bool:
    """Whether a fix of `applicability` is applied by a run that allows `allowed` (None: a check)."""
    if allowed is None:
        return False
    return allowed is Applicability.UNSAFE or applicability is Applicability.SAFE


@dataclass(frozen=True)
class EngineCode:
    """A code the engine reports itself: no rule class stands behind it."""

    code: str
    name: str
    severity: Severity
    summary: str
    # `kvlint explain`'s text after the summary, in the sections a rule's docstring has.
    details: str = ""


SYNTAX_ERROR = EngineCode(
    "KV000", "syntax-error", Severity.ERROR, "A file that does not parse, or is not valid in its declared encoding."
)
UNUSED_IGNORE = EngineCode(
    "KV001", "unused-ignore", Severity.WARNING, "A suppression comment that suppresses nothing (--report-unused-ignores)."
)
# Reported by the `--prove` pass over the whole scope (`kvlint.running.prove`), not by a per-file rule.
UNPROVEN_WRITE_LOC = EngineCode(
    "KV104", "unproven-write-loc", Severity.ERROR,
    "Only under --prove: a write door's loc kvlint cannot show to be marked; the message names where the proof stops.",
    details="""\
## What it does
Under `kvlint check --prove`, follows the loc of every write-door call in
scope back to where it is made: through local names, conditionals, helper
returns and parameters (every caller in the tree, across files and the
class hierarchy). A loc is proven marked when every path ends in a factory
(`KVWriteLoc.for_batch`, `.for_layer`), a constructor with the tree's mark,
or a function the contract lists under `mark-keeping`. A raw loc is
KV101/KV102/KV103's business; KV104 is what is left: a loc whose origin
kvlint cannot see (an attribute of an unknown object, a call it cannot
resolve, a parameter one of whose callers passes such a loc).

## Why is this bad?
A completeness check that reports only known-bad spellings passes when a
raw loc reaches a door one step further away than the spellings it knows.
`--prove` turns "nothing bad was seen" into "every door was shown a marked
loc"; what cannot be shown fails the run instead of passing silently.

## Example
```python
def _store(self, layer, loc, k, v):
    self.pool.set_kv_buffer(layer, loc, k, v)

def forward(self, layer, forward_batch, k, v):
    self._store(layer, self.loc_buffer, k, v)   # where does loc_buffer come from?
```

## Use instead
```python
def forward(self, layer, forward_batch, k, v):
    self._store(layer, KVWriteLoc.for_batch(forward_batch), k, v)
```

A loc that is marked by a function kvlint cannot read (a translation
helper of the pool) is declared in `[tool.kvlint.contract]`
`mark-keeping`; a known gap is recorded with `kvlint baseline --prove` and
ratcheted; a single site takes `# kvlint: ignore[KV104]` (or
`# noqa: KV104`) with a reason. Only a suppression naming KV104 hides it: a
bare `# noqa` or `# kvlint: ignore`, a family prefix (`KV1`), or one naming
other codes (`# noqa: KV101`, another tool's `# noqa: E501`) does not, so a
comment written for something else cannot pass the proof. A suppressed door
is still counted unproven, and the certificate lists every unproven door by
file:line, the suppressed ones marked. A door whose KV101/KV102/KV103 is
suppressed is unproven too, and needs KV104 named as well.

## Fix safety
No fix: kvlint cannot know which loc was meant.""",
)
ENGINE_CODES = (SYNTAX_ERROR, UNUSED_IGNORE, UNPROVEN_WRITE_LOC)


@dataclass(frozen=True)
class Suppression:
    """One `# kvlint: ignore[...]` or `# noqa: ...` comment."""

    line: int
    column: int
    # None: suppresses every code on its line. A `# noqa:` keeps only kvlint's codes of its list.
    codes: Optional[frozenset[str]]
    # A bare `# noqa` belongs to other tools as much as to us: never reported unused.
    bare_noqa: bool

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes or any(code.startswith(c) for c in self.codes)

    def names(self, code: str) -> bool:
        """Lists `code` itself: neither bare nor a family prefix."""
        return self.codes is not None and code in self.codes


@dataclass(frozen=True)
class FixInfo:
    """What a finding's fix would do, as reported (not how it is applied)."""

    applicability: Applicability
    description: str
    replacement: str
    # Set when the edit lands in another file than the finding (project rules).
    path: Optional[str] = None
    # A project rule's edit inserts `replacement` after this line of `path`
    # (SARIF fixes and the language server need where; the JSON report does not carry it).
    after_line: Optional[int] = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "applicability": self.applicability.value,
            "description": self.description,
            "replacement": self.replacement,
        }
        if self.path is not None:
            data["path"] = self.path
        return data


@dataclass(frozen=True)
class Finding:
    """One reported problem: where, which rule, why, and the fix if there is one."""

    code: str
    name: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    fingerprint: str
    fix: Optional[FixInfo] = None
    # Whether the engine can run the flagged code on the unified pool today ("live", "latent",
    # "unknown"), and why: given after checking (`kvlint.running.reach`); "" until then.
    reach: str = ""
    reach_reason: str = ""
    # The enclosing classes and functions, outermost first ("" at module level): what reach reads.
    scope: str = field(default="", compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "message": self.message,
            "fingerprint": self.fingerprint,
            "fix": None if self.fix is None else self.fix.to_json(),
            "reach": self.reach,
            "reach_reason": self.reach_reason,
        }

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class RunError:
    """A problem that is not a finding: unreadable file, rule crash, failed write."""

    path: str
    message: str
    # Internal errors (a rule crashed) make the run exit 2.
    internal: bool = False
    # A file in scope that could not be checked at all (unreadable, too large):
    # the run cannot vouch for it, so it fails like a finding does (exit 1).
    unchecked: bool = False

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "message": self.message}


@dataclass(frozen=True)
class Valid:
    """Source a rule must not flag."""

    code: str
    # Contract overrides the example needs, e.g. {"mark": "physical"}.
    contract: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Invalid:
    """Source a rule must flag, optionally with the source its fix produces.

    ``line``/``column`` (1-based) pin where the finding must start when given;
    ``expected_count`` is how many findings of this rule the source yields.
    """

    code: str
    expected_replacement: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None
    expected_count: int = 1
    # Contract overrides the example needs, e.g. {"mark": "physical"}.
    contract: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProjectValid:
    """Files (path -> source) a project rule must not flag, checked together."""

    files: dict[str, str]
    # Rule options the example needs, e.g. {"strict": True}.
    options: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ProjectInvalid:
    """Files a project rule must flag, with (path, line, severity) of every finding, in report order.

    ``expected_fix``, when given, is (path, source after an unsafe fix) of the file the fix edits.
    """

    files: dict[str, str]
    expected: tuple[tuple[str, int, str], ...]
    options: dict[str, object] = field(default_factory=dict)
    expected_fix: Optional[tuple[str, str]] = None


@dataclass(frozen=True)
class FileOutcome:
    """What checking (and maybe fixing) one file produced."""

    path: str
    parsed: bool
    findings: tuple[Finding, ...] = ()
    errors: tuple[RunError, ...] = ()
    # For `fix`: the new source text, when it differs from the old.
    fixed_source: Optional[bytes] = None
    # Under --report-unused-ignores: the suppressions no finding of this file's
    # rules used. The engine reports them (KV001) once project rules had their say.
    open_suppressions: tuple[Suppression, ...] = ()
