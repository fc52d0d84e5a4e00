"""Check (and optionally fix) one file's bytes: the unit of work a worker runs.

Nothing here reads the file system or prints; `engine` feeds bytes in and
collects `FileOutcome`s. A crash inside one rule becomes an internal error for
that file and rule, and the other rules still run.
"""

from __future__ import annotations

import ast
import traceback
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Optional, Sequence

import libcst as cst

from kvlint.analysis.class_invariants import ruled_out
from kvlint.running.fragment import skeleton
from kvlint.running.preparse import Unparsable, python_tree, source_text, too_deep, too_large
from kvlint.running.plan import CheckRequest, helper_words, rule_groups, whole_file_groups, with_words
from kvlint.api.triggers import passes
from kvlint.api.contract import Contract
from kvlint.api.rule import WHOLE_TREE, FileContext, Replacement, Rule, SourceFile, Violation
from kvlint.running.decide import Candidate, FileDecisions, fingerprint
from kvlint.running.suppression import parse_suppressions
from kvlint.api.types import SYNTAX_ERROR, Applicability, FileOutcome, Finding, FixInfo, RunError, Suppression, fix_allowed

if TYPE_CHECKING:
    from kvlint.analysis.locate import Location



# What `parse_ahead` parsed, for the check that asks next: CPython's tree by the file's bytes,
# LibCST's by the exact bytes it parsed (a skeleton's, most often).
_TREES_AHEAD: dict[bytes, ast.Module] = {}
_PARSED_AHEAD: dict[bytes, cst.Module] = {}


@dataclass(frozen=True)
class CheckResult:
    outcome: FileOutcome
    # Facts for each project rule (by code) that extracted any from this file.
    facts: dict[str, Any] = field(default_factory=dict)


def check_bytes(request: CheckRequest, data: bytes) -> CheckResult:
    oversized = too_large(data)
    if oversized is not None:
        return CheckResult(FileOutcome(request.path, False, errors=(RunError(request.path, oversized, unchecked=True),)))
    tree = _TREES_AHEAD.pop(data, None) or python_tree(data, request.path)
    if isinstance(tree, Unparsable):
        return _syntax_error(request.path, tree.line, tree.column, tree.message, request.project_path)
    facts, errors = _project_facts(request, data, tree)
    request = _rules_that_may_flag(request, data, tree)
    if not request.rules:
        # Nothing reads LibCST's tree: project rules read CPython's.
        text = source_text(data) if request.report_unused_ignores else None
        open_suppressions = FileDecisions.for_source(request.path, request.ignored_codes, text,
                                                     request.project_path).open_suppressions()
        return CheckResult(FileOutcome(request.path, True, (), tuple(errors), None, open_suppressions), facts)
    deep = too_deep(tree)
    if deep is not None:
        finding = _syntax_error_finding(request.path, deep.line, deep.column, deep.message, request.project_path)
        return CheckResult(FileOutcome(request.path, False, (finding,), tuple(errors)), facts)
    parsed = _source_to_parse(request, data, tree)
    module = _libcst_module(request, parsed)
    if isinstance(module, Finding):
        return CheckResult(FileOutcome(request.path, False, (module,), tuple(errors)), facts)

    # The text LibCST parsed, decoded as it did: `module.code` would generate it all again.
    source = parsed.decode(module.encoding)

    # CPython's tree of the parsed text places flagged nodes; a skeleton's is parsed only if one is flagged.
    checked = check_module(request, module, source, tree if parsed is data else None, data)
    errors.extend(checked.errors)
    fixed_source: Optional[bytes] = None
    if request.fix is not None and any(_applies(v, request.fix) for v in checked.violations):
        # The skeleton found something to fix: the fix rewrites the whole file.
        whole = module if parsed is data else _libcst_module(request, data)
        if isinstance(whole, Finding):
            errors.append(RunError(request.path, f"not fixed: {whole.message}"))
        else:
            fixed_source, fix_error = _fix(request, whole, may_suppress=bool(parse_suppressions(whole.code)))
            if fix_error is not None:
                errors.append(fix_error)
    outcome = FileOutcome(
        request.path, True, tuple(checked.findings), tuple(errors), fixed_source, checked.open_suppressions
    )
    return CheckResult(outcome, facts)


def parse_ahead(request: CheckRequest, data: bytes) -> None:
    """Parse with LibCST, in this process, what `check_bytes(request, data)` would parse, for a later check.

    The check finds the tree when it parses the very same bytes: it may not, when the request it
    gets differs (the project index's helper facts keep more functions of the file).
    """
    kept = _kept_by_rules(request, data)
    if kept is None:
        return
    parsed = _source_to_parse(kept, data, _TREES_AHEAD[data])
    module = _libcst_module(request, parsed)
    if isinstance(module, cst.Module):
        _PARSED_AHEAD[parsed] = module


def would_parse(request: CheckRequest, data: bytes) -> bool:
    """Whether `check_bytes(request, data)` would parse `data` with LibCST: some rule's `may_flag` keeps it."""
    return _kept_by_rules(request, data) is not None


def _kept_by_rules(request: CheckRequest, data: bytes) -> Optional[CheckRequest]:
    """`request` with only the rules that may flag `data`, or None where the check would not parse
    it with LibCST; CPython's tree of it is kept for the check."""
    if too_large(data) is not None:
        return None
    tree = _TREES_AHEAD.get(data) or python_tree(data, request.path)
    if isinstance(tree, Unparsable):
        return None
    _TREES_AHEAD[data] = tree
    request = _rules_that_may_flag(request, data, tree)
    if not request.rules or too_deep(tree) is not None:
        return None
    return request


def _rules_that_may_flag(request: CheckRequest, data: bytes, tree: ast.Module) -> CheckRequest:
    """`request` without the rules CPython's tree shows cannot flag the file."""
    names = frozenset(word.decode() for word in helper_words(request.helpers))
    rules = tuple(rule for rule in request.rules if _may_flag(rule, data, tree, request.contract, names))
    return request if rules == request.rules else replace(request, rules=rules)


def _may_flag(rule: type[Rule], data: bytes, tree: ast.Module, contract: Contract, names: frozenset[str]) -> bool:
    try:
        return rule.may_flag(data, tree, contract, names)
    except Exception:  # noqa: BLE001 - a crash here keeps the rule: its check then runs, isolated
        return True


def _libcst_module(request: CheckRequest, parsed: bytes) -> cst.Module | Finding:
    """LibCST's tree of `parsed`, or the KV000 finding saying why there is none."""
    path, project_path = request.path, request.project_path
    ahead = _PARSED_AHEAD.pop(parsed, None)
    if ahead is not None:
        return ahead
    try:
        return cst.parse_module(parsed)
    except cst.ParserSyntaxError as exc:
        # CPython accepted the file (`python_tree`), so this is LibCST's own limit: report its words.
        return _syntax_error_finding(path, exc.raw_line, exc.raw_column + 1, _first_line(exc.message), project_path)
    except UnicodeDecodeError as exc:
        line = parsed[: exc.start].count(b"\n") + 1
        return _syntax_error_finding(path, line, 1, f"file is not valid {exc.encoding}: {exc.reason}", project_path)
    except (SyntaxError, LookupError) as exc:
        # LookupError: a coding cookie naming an unknown encoding.
        return _syntax_error_finding(path, getattr(exc, "lineno", None) or 1, 1, str(exc), project_path)
    except RecursionError:
        return _syntax_error_finding(path, 1, 1, "too deeply nested to parse", project_path)


def _project_facts(request: CheckRequest, data: bytes, tree: ast.Module) -> tuple[dict[str, Any], list[RunError]]:
    """Each project rule's facts of the file (by code), and the rules that crashed."""
    facts: dict[str, Any] = {}
    errors: list[RunError] = []
    text = source_text(data) if request.project_rules else ""
    for project_rule in request.project_rules:
        whole = passes(data, whole_file_groups(type(project_rule), project_rule.options, request.contract))
        file = SourceFile(request.path, text, tree, request.contract, whole)
        try:
            extracted = project_rule.extract(file)
        except Exception:  # noqa: BLE001 - isolation: one rule's crash must not stop the run
            errors.append(_internal_error(request.path, project_rule.code))
            continue
        if extracted is not None:
            facts[project_rule.code] = extracted
    return facts, errors


@dataclass(frozen=True)
class ModuleCheck:
    """The per-file rules run on one parsed module, after the decisions."""

    findings: list[Finding]
    # The violation behind each finding, in the same order (its fix is a `Replacement` to apply).
    violations: list[Violation]
    # Rules that crashed: their violations are dropped, the other rules' stand.
    errors: list[RunError]
    open_suppressions: tuple[Suppression, ...]


def check_module(
    request: CheckRequest,
    module: cst.Module,
    source: Optional[str] = None,
    tree: Optional[ast.Module] = None,
    whole_data: Optional[bytes] = None,
) -> ModuleCheck:
    """What `request`'s per-file rules report on `module` (project rules' facts are `check_bytes`' business).

    `source`: `module.code`, when the caller has it already; `tree`: CPython's tree of it, when the caller has that;
    `whole_data`: the file's bytes, where `module` may be a skeleton of them.
    """
    ctx = FileContext(request.path, module, request.contract, helpers=request.helpers, source=source,
                      whole_data=whole_data)
    if tree is not None and whole_data is not None:
        # The module is the whole file (the caller passes its tree only then): nothing parses it again.
        ctx.analysis(WHOLE_TREE, lambda: tree)
    errors = _run_rules(ctx, request.rules)
    findings, kept, open_suppressions = _to_findings(request, module, ctx.violations, source, tree)
    return ModuleCheck(findings, kept, errors, open_suppressions)


def _source_to_parse(request: CheckRequest, data: bytes, tree: ast.Module) -> bytes:
    """Only the functions the per-file rules could flag, unless unused-ignore reports need every comment.

    A fix parses the whole file again, where the skeleton shows something to fix.
    """
    if request.report_unused_ignores:
        return data
    words = helper_words(request.helpers)
    groups = [with_words(rule_groups(rule, request.contract), words) for rule in request.rules]
    cut = skeleton(data, tree, groups)
    return data if cut is None else cut


def _run_rules(ctx: FileContext, rules: Sequence[type[Rule]]) -> list[RunError]:
    errors = []
    for rule in rules:
        ctx.current_code = rule.code
        try:
            rule().check(ctx)
        except Exception:  # noqa: BLE001 - isolation: one rule's crash must not stop the run
            ctx.violations = [v for v in ctx.violations if v.code != rule.code]
            errors.append(_internal_error(ctx.path, rule.code))
    if ctx.violations:
        dead = ruled_out(ctx)
        ctx.violations = [v for v in ctx.violations if id(v.node) not in dead]
    ctx.drop_analyses()
    return errors


def _internal_error(path: str, code: str) -> RunError:
    last = traceback.format_exc().strip().splitlines()[-1]
    return RunError(path, f"internal error in rule {code}: {last}", internal=True)


def _to_findings(
    request: CheckRequest,
    module: cst.Module,
    violations: list[Violation],
    source: Optional[str] = None,
    tree: Optional[ast.Module] = None,
) -> tuple[list[Finding], list[Violation], tuple[Suppression, ...]]:
    """Findings for the violations that survive the decisions, those violations, and the unused suppressions."""
    violations = [v for v in violations if v.code not in request.ignored_codes]
    need_comments = bool(violations) or request.report_unused_ignores
    text = (module.code if source is None else source) if need_comments else None
    decisions = FileDecisions.for_source(request.path, request.ignored_codes, text, request.project_path)
    if not violations and not (request.report_unused_ignores and decisions.suppressions):
        return [], [], ()
    # Imported here: placing nodes loads LibCST's position machinery, which a file nothing flags never needs.
    from kvlint.analysis.locate import locate

    locations: dict[int, Location] = {}
    if violations:
        assert text is not None  # violations need the comments
        locations = locate(module, [v.node for v in violations], ast.parse(text) if tree is None else tree)
    rules = {rule.code: rule for rule in request.rules}
    findings: list[Finding] = []
    kept: list[Violation] = []
    for violation in violations:
        where = locations[id(violation.node)]
        start, end = where.range.start, where.range.end
        rule = rules[violation.code]
        candidate = Candidate(
            code=rule.code,
            name=rule.name,
            severity=rule.severity,
            path=request.path,
            line=start.line,
            column=start.column + 1,
            end_line=end.line,
            end_column=end.column + 1,
            message=violation.message,
            snippet=" ".join(module.code_for_node(violation.node).split()),
            statement_line=where.statement_line,
            scope=where.scope,
            fix=_fix_info(module, violation),
        )
        finding = decisions.admit(candidate)
        if finding is not None:
            findings.append(finding)
            kept.append(violation)
    open_suppressions = decisions.open_suppressions() if request.report_unused_ignores else ()
    return findings, kept, open_suppressions


def _fix_info(module: cst.Module, violation: Violation) -> Optional[FixInfo]:
    if violation.fix is None:
        return None
    return FixInfo(
        applicability=violation.fix.applicability,
        description=violation.fix.description,
        replacement=module.code_for_node(violation.fix.new),
    )


def _applies(violation: Violation, allowed: Applicability) -> bool:
    return violation.fix is not None and fix_allowed(violation.fix.applicability, allowed)


def fixable_replacements(
    request: CheckRequest, module: cst.Module, may_suppress: bool = True
) -> list[Replacement]:
    """The fixes `request` allows on `module`, after selection and suppressions.

    `may_suppress` False: the caller knows the source has no suppression comment.
    """
    if request.fix is None:
        return []
    ctx = FileContext(request.path, module, request.contract, helpers=request.helpers)
    if _run_rules(ctx, request.rules):
        return []
    violations = [v for v in ctx.violations if v.code not in request.ignored_codes]
    if not may_suppress:
        # Nothing can suppress a violation, so every one is kept: no positions
        # needed, and those cost a metadata pass over each flagged class.
        kept = violations
    else:
        _, kept, _ = _to_findings(request, module, violations)
    return [v.fix for v in kept if _applies(v, request.fix) and v.fix is not None]


def _fix(request: CheckRequest, module: cst.Module, may_suppress: bool) -> tuple[Optional[bytes], Optional[RunError]]:
    """Apply fixes until none applies; the result must compile or nothing is written."""
    # LibCST's codemod visitors are needed only by `fix`, not by a plain check.
    from kvlint.fix import fix_until_stable

    # Fixes add no comments, so a source without suppressions stays without them.
    fixed, failure = fix_until_stable(
        module, request.path, lambda tree: fixable_replacements(request, tree, may_suppress)
    )
    return fixed, None if failure is None else RunError(request.path, failure)


def _syntax_error(path: str, line: int, column: int, message: str, project_path: str) -> CheckResult:
    return CheckResult(FileOutcome(path, False, (_syntax_error_finding(path, line, column, message, project_path),)))


def _syntax_error_finding(path: str, line: int, column: int, message: str, project_path: str) -> Finding:
    return Finding(
        code=SYNTAX_ERROR.code,
        name=SYNTAX_ERROR.name,
        severity=SYNTAX_ERROR.severity,
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        message=message,
        fingerprint=fingerprint(SYNTAX_ERROR.code, project_path or path, "", message, 1),
    )


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "syntax error"
