"""Each finding's fix as text edits: what SARIF `fixes` and the language server's quick fixes carry.

A fix is computed by the rules as a LibCST `Replacement`; here it is applied
alone to the whole file (imports included, by `kvlint.fix.apply_replacements`)
and the result is diffed against the source, line by line, into edits. So an
edit never guesses where the import block is: applying a finding's edits gives
exactly the text `kvlint fix --select CODE` writes when that finding is the
only fix in the file. A project rule's fix (KV301) is an insertion after a
line of another file, known without parsing.

Nothing here imports LibCST at module level: the SARIF reporter imports this
module on every run, and only a run with a fix to report parses again.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional

from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.api.types import Applicability, Finding
from kvlint.running.plan import CheckRequest, RunOptions, file_requests, make_plan


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (start_line, start_column) up to (end_line, end_column) by `new_text`.

    Lines and columns are 1-based; columns count characters (code points).
    A zero-length range is an insertion.
    """

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    new_text: str


@dataclass(frozen=True)
class FindingFix:
    """The edits of one finding's fix, and the file they apply to."""

    path: str
    applicability: Applicability
    description: str
    edits: tuple[TextEdit, ...]


# A finding is known by where it is: (path, code, line, column, end_line, end_column).
FindingKey = tuple[str, str, int, int, int, int]


def finding_key(finding: Finding) -> FindingKey:
    return (finding.path, finding.code, finding.line, finding.column, finding.end_line, finding.end_column)


def text_edits(before: str, after: str) -> tuple[TextEdit, ...]:
    """The edits turning `before` into `after`, whole lines at a time."""
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        deleted = "".join(old[i1:i2])
        end_line, end_column = _end_of(i1 + 1, deleted)
        edits.append(TextEdit(i1 + 1, 1, end_line, end_column, "".join(new[j1:j2])))
    return tuple(edits)


def _end_of(start_line: int, deleted: str) -> tuple[int, int]:
    """The position just after `deleted`, which starts at column 1 of `start_line`."""
    if not deleted:
        return start_line, 1
    lines = deleted.splitlines(keepends=True)
    last = lines[-1]
    if last.endswith(("\n", "\r")):
        return start_line + len(lines), 1
    return start_line + len(lines) - 1, len(last) + 1


def apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """`text` with `edits` (non-overlapping, any order) applied; the inverse of `text_edits`."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        if line > len(lines):
            return len(text)
        return starts[line - 1] + column - 1

    result = text
    for edit in sorted(edits, key=lambda e: (e.start_line, e.start_column), reverse=True):
        begin, end = offset(edit.start_line, edit.start_column), offset(edit.end_line, edit.end_column)
        result = result[:begin] + edit.new_text + result[end:]
    return result


def file_fixes(request: CheckRequest, data: bytes, only: Optional[FindingKey] = None) -> dict[FindingKey, FindingFix]:
    """The fix of every finding `request` reports in `data` that has one, as edits (`only`: that finding's).

    The request's `fix` must be set: its applicability bounds which fixes are
    returned (UNSAFE: all of them). A fix whose rewrite would not compile is
    left out, as `kvlint fix` leaves it unapplied.
    """
    if request.fix is None:
        return {}
    # Parsing whole and running the rules again: only for a file with a fix to report.
    import libcst as cst
    from kvlint.fix import FixFailed, apply_replacements
    from kvlint.running.checker import check_module

    try:
        module = cst.parse_module(data)
    except (cst.ParserSyntaxError, SyntaxError, UnicodeDecodeError, LookupError, RecursionError):
        return {}
    checked = check_module(request, module)

    fixes: dict[FindingKey, FindingFix] = {}
    for finding, violation in zip(checked.findings, checked.violations):
        fix = violation.fix
        if fix is None or (fix.applicability is Applicability.UNSAFE and request.fix is Applicability.SAFE):
            continue
        if only is not None and finding_key(finding) != only:
            continue
        try:
            updated = apply_replacements(module, [fix], request.path)
            compile(updated.bytes, request.path, "exec", dont_inherit=True)
        except (FixFailed, SyntaxError, ValueError):
            continue
        edits = text_edits(module.code, updated.code)
        if edits:
            fixes[finding_key(finding)] = FindingFix(request.path, fix.applicability, fix.description, edits)
    return fixes


def project_fix(finding: Finding) -> Optional[FindingFix]:
    """A project rule's fix (lines inserted after a line of `fix.path`) as one insertion."""
    fix = finding.fix
    if fix is None or fix.path is None or fix.after_line is None:
        return None
    text = "".join(line + "\n" for line in fix.replacement.splitlines())
    edit = TextEdit(fix.after_line + 1, 1, fix.after_line + 1, 1, text)
    return FindingFix(fix.path, fix.applicability, fix.description, (edit,))


def run_fixes(
    config: Config, options: RunOptions, contract: Contract, findings: Iterable[Finding], cwd: Optional[Path] = None
) -> dict[FindingKey, FindingFix]:
    """The fixes of `findings` (a run's, made with `options` under `config`), read from the files on disk.

    Only the files holding a finding with a fix are parsed again, whole.
    """
    cwd = cwd or Path.cwd()
    fixes: dict[FindingKey, FindingFix] = {}
    per_file: set[str] = set()
    for finding in findings:
        if finding.fix is None:
            continue
        if finding.fix.path is not None:
            known = project_fix(finding)
            if known is not None:
                fixes[finding_key(finding)] = known
        else:
            per_file.add(finding.path)
    if not per_file:
        return fixes
    with_fix = replace(options, fix=Applicability.UNSAFE, paths=())
    plan = make_plan(config, with_fix, contract)
    sources: dict[str, bytes] = {}
    for shown in sorted(per_file):
        try:
            sources[shown] = (cwd / shown).read_bytes()
        except OSError:
            continue
    config_paths = {shown: _config_relative(cwd / shown, config) for shown in sources}
    for request, data in file_requests(plan, with_fix, config, contract, list(sources), sources, config_paths):
        fixes.update(file_fixes(request, data))
    return fixes


def _config_relative(path: Path, config: Config) -> str:
    try:
        return path.resolve().relative_to(config.root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
