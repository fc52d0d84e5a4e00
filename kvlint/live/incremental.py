"""Check a file's text again after an edit, re-checking only the function the edit changed.

An editor asks after every keystroke, and a backend of several thousand lines
takes seconds to check whole. The per-file rules look at one function at a
time with the module's imports and names as context (see
`kvlint.running.fragment`), and a finding's fingerprint depends on its
function (its scope), not on where the function sits. So when an edit stays
inside one function's body, that function alone is checked, in a small module
holding the file's module-level statements and the headers of its other
definitions (`kvlint.live.outline.context_source`), and every other finding
of the last check is kept, moved by the lines the edit added or removed. An
edit of comments or blank lines between statements re-checks nothing.

Anything else (an edit of a header or of module-level code, a function whose
name another one shares, a file that does not parse, an internal error) is
checked whole, as `kvlint check` does. Project facts (KV301) come from the
whole file and may hold line numbers: they are kept only when the edit cannot
have changed them, and otherwise marked stale for the caller to read again.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from kvlint.api.types import FileOutcome, Finding
from kvlint.live.outline import Class, Outline, Unit, context_source, outline, qualified, unit_at, unit_of
from kvlint.running.plan import CheckRequest, project_groups, whole_file_groups
from kvlint.api.triggers import passes
from kvlint.running.preparse import CODING_COOKIE, Unparsable, python_tree, too_large

_BLANK_OR_COMMENT = re.compile(rb"[ \t\f]*(#.*)?\r?\n?")
_INDENT = re.compile(rb"[ \t\f]*")
# A coding cookie may sit on the first two lines: an edit there is checked whole.
_COOKIE_LINES = 2


@dataclass
class TextCheck:
    """One file's text checked: its findings, errors and project facts, and what an edit can reuse."""

    request: CheckRequest
    lines: list[bytes]
    findings: list[Finding]
    outcome: FileOutcome
    facts: dict[str, Any] = field(default_factory=dict)
    # The facts were read from an earlier text (lines may have moved since): the caller reads them again.
    facts_stale: bool = False
    # How this text was checked: "whole", "function" (one function again), "kept" (nothing again)
    # or "cached" (the saved text, from the result cache).
    how: str = "whole"
    _outline: Optional[Outline] = None

    def outline(self) -> Optional[Outline]:
        if self._outline is None and self.outcome.parsed and not self.outcome.errors:
            data = b"".join(self.lines)
            tree = python_tree(data, self.request.path)
            if not isinstance(tree, Unparsable):
                self._outline = outline(data, tree)
        return self._outline


def check_text(request: CheckRequest, data: bytes, last: Optional[TextCheck]) -> TextCheck:
    """What `kvlint check` reports for `data`; `last` is the check of this file's previous text."""
    if last is not None and last.request == request and not request.report_unused_ignores and request.fix is None:
        again = _check_edit(last, data)
        if again is not None:
            return again
    return check_whole(request, data)


def check_whole(request: CheckRequest, data: bytes) -> TextCheck:
    # The checker loads LibCST and the rules: only a check that parses needs them.
    from kvlint.running.checker import check_bytes

    result = check_bytes(request, data)
    findings = sorted(result.outcome.findings, key=lambda finding: finding.sort_key)
    return TextCheck(request, data.splitlines(keepends=True), findings, result.outcome, dict(result.facts))


def _check_edit(last: TextCheck, data: bytes) -> Optional[TextCheck]:
    old, new = last.lines, data.splitlines(keepends=True)
    if old == new:
        return last
    if too_large(data) is not None:
        return None
    prefix = _common_prefix(old, new)
    suffix = _common_prefix(old[prefix:][::-1], new[prefix:][::-1])
    first, last_old, last_new = prefix + 1, len(old) - suffix, len(new) - suffix
    delta = last_new - last_old
    known = last.outline()
    if known is None or first <= _COOKIE_LINES or any(CODING_COOKIE.match(line) for line in old[:_COOKIE_LINES]):
        return None  # the encoding may change, or the file's lines are not UTF-8
    request = last.request
    if any(passes(data, whole_file_groups(type(rule), rule.options, request.contract)) for rule in request.project_rules):
        return None
    changed = old[prefix:last_old] + new[prefix:last_new]
    if all(_BLANK_OR_COMMENT.fullmatch(line) for line in changed) and not _touches(known, first, last_old):
        return _moved(last, new, known.edited(first, delta), first, delta, _facts_kept(last, changed, first, delta, known))
    found = unit_at(known, first, last_old)
    if found is None:
        return None
    unit, chain = found
    if qualified(unit, chain) in known.shared:
        return None  # its findings' scope would not tell it from the other definition's
    rewritten = _reparsed_unit(new, unit, chain, unit.end + delta, request.path)
    if rewritten is None:
        return None
    edited = known.edited(first, delta, unit, rewritten)
    return _recheck_unit(last, new, edited, rewritten, unit, first, delta, _facts_kept(last, changed, first, delta, known))


def _touches(known: Outline, first: int, last: int) -> bool:
    """Whether lines `first`..`last` (an insertion before `first` when empty) are inside a statement."""
    for start, end in known.statements():
        if first <= last and start <= last and first <= end:
            return True
        if first > last and start < first <= end:
            return True
    return False


def _facts_kept(last: TextCheck, changed: list[bytes], first: int, delta: int, known: Outline) -> bool:
    """Whether the project facts of the last text hold for the new one: no project rule reads this file,
    or the edit names none of their trigger words and moves no line that holds code."""
    request = last.request
    if not request.project_rules:
        return True
    if last.facts_stale:
        return False
    text = b"".join(changed)
    if any(passes(text, project_groups(type(rule), rule.options, request.contract)) for rule in request.project_rules):
        return False
    return delta == 0 or all(end < first for _start, end in known.statements())


def _reparsed_unit(lines: list[bytes], unit: Unit, chain: tuple[Class, ...], end: int, path: str) -> Optional[Unit]:
    """`unit` in the edited text, lines `unit.start`..`end`, if those lines are still that one function.

    Parsed alone, under one `if 1:` per class holding it at that class's
    indentation, so nesting and indentation are as in the file.
    """
    wrapper = [_indent(lines[klass.start - 1]) + b"if 1:\n" for klass in chain]
    body = lines[unit.start - 1 : end]
    source = b"".join(wrapper + body)
    tree = python_tree(source, path)
    if isinstance(tree, Unparsable):
        return None
    statements = tree.body
    for _klass in chain:
        if len(statements) != 1 or not isinstance(statements[0], ast.If):
            return None
        statements = statements[0].body
    if len(statements) != 1 or statements[0].end_lineno != len(wrapper) + len(body):
        return None
    found = unit_of(statements[0], source.splitlines(keepends=True))
    offset = unit.start - 1 - len(wrapper)
    if found is None or found.name != unit.name or found.start + offset != unit.start:
        return None
    return Unit(found.name, found.start + offset, found.body + offset, found.end + offset)


def _recheck_unit(
    last: TextCheck, new: list[bytes], edited: Outline, unit: Unit, old_unit: Unit, first: int, delta: int, facts_kept: bool
) -> Optional[TextCheck]:
    # As in `check_whole`.
    from kvlint.running.checker import check_bytes

    chain = next((chain for found, chain in edited.units() if found is unit), None)
    if chain is None:
        return None
    source, unit_line = context_source(new, edited.items, unit, chain)
    result = check_bytes(replace(last.request, project_rules=()), source)
    if not result.outcome.parsed or result.outcome.errors:
        return None
    shift = unit.start - unit_line
    length = unit.end - unit.start
    fresh = [
        _moved_to(finding, shift) for finding in result.outcome.findings if unit_line <= finding.line <= unit_line + length
    ]
    kept = [
        _moved_to(finding, delta) if finding.line >= first else finding
        for finding in last.findings
        if not old_unit.start <= finding.line <= old_unit.end
    ]
    return _result(last, new, edited, kept + fresh, "function", facts_kept)


def _moved(last: TextCheck, new: list[bytes], edited: Outline, first: int, delta: int, facts_kept: bool) -> TextCheck:
    findings = [_moved_to(finding, delta) if finding.line >= first else finding for finding in last.findings]
    return _result(last, new, edited, findings, "kept", facts_kept)


def _result(last: TextCheck, new: list[bytes], edited: Outline, findings: list[Finding], how: str, facts_kept: bool) -> TextCheck:
    findings.sort(key=lambda finding: finding.sort_key)
    outcome = replace(last.outcome, findings=tuple(findings))
    return TextCheck(
        last.request, new, findings, outcome, last.facts, facts_stale=last.facts_stale or not facts_kept, how=how,
        _outline=edited,
    )


def _indent(line: bytes) -> bytes:
    found = _INDENT.match(line)
    return found.group() if found is not None else b""


def _moved_to(finding: Finding, delta: int) -> Finding:
    if not delta:
        return finding
    return replace(finding, line=finding.line + delta, end_line=finding.end_line + delta)


def _common_prefix(a: list[bytes], b: list[bytes]) -> int:
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count
