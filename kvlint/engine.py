"""Run kvlint over a set of paths and return findings; never prints.

The flow: discover files, read their bytes, learn the contract, prefilter by
the selected rules' trigger words, check the survivors (in worker processes
when there are enough of them), then run the project-level rules once over
the facts the workers extracted.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from kvlint.checker import CheckRequest, CheckResult, check_bytes, fingerprint
from kvlint.config import Config, ConfigError, TboConfig
from kvlint.contract import Contract
from kvlint.discovery import discover, display_path
from kvlint.learn import learn_contract
from kvlint.prefilter import Groups, encode_groups, passes
from kvlint.registry import all_codes, all_rules
from kvlint.rule import ProjectRule, ProjectViolation, Rule
from kvlint.selection import per_file_ignored, select_codes
from kvlint.suppression import SUPPRESSION_WORDS, parse_suppressions
from kvlint.types import Applicability, FileOutcome, Finding, FixInfo, RunError

# Below this many files to parse, worker start-up costs more than it saves.
MIN_FILES_FOR_WORKERS = 8

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunOptions:
    paths: tuple[Path, ...] = ()
    select: Optional[tuple[str, ...]] = None
    ignore: tuple[str, ...] = ()
    fix: Optional[Applicability] = None
    jobs: Optional[int] = None
    changed: Optional[str] = None
    report_unused_ignores: bool = False
    strict_tbo: bool = False


@dataclass
class RunResult:
    files_in_scope: int
    files_parsed: int
    findings: list[Finding]
    errors: list[RunError]
    contract: Contract
    # path -> (original bytes, fixed bytes), for `fix`.
    fixed: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def has_internal_error(self) -> bool:
        return any(error.internal for error in self.errors)


@dataclass(frozen=True)
class _Plan:
    rules: tuple[type[Rule], ...]
    project_rules: tuple[ProjectRule, ...]
    rule_groups: tuple[Groups, ...]
    project_groups: tuple[Groups, ...]
    extra_words: tuple[bytes, ...]


def run(config: Config, options: RunOptions, progress: Optional[Progress] = None) -> RunResult:
    paths = options.paths or tuple(config.root / include for include in config.include)
    scope = discover(paths, config.exclude, config.root)
    files = list(scope.files)
    if options.changed is not None:
        files = _only_changed(files, options.changed)
    cwd = Path.cwd()
    sources, read_errors = _read_all(files, cwd)
    contract = learn_contract(config, sources)
    plan = _plan(config, options, contract)

    requests: list[tuple[CheckRequest, bytes]] = []
    for path, data in sources.items():
        shown = display_path(path, cwd)
        rules = tuple(rule for rule, groups in zip(plan.rules, plan.rule_groups) if passes(data, groups))
        project_rules = tuple(
            rule for rule, groups in zip(plan.project_rules, plan.project_groups) if passes(data, groups)
        )
        wants_comments = options.report_unused_ignores and any(word in data for word in plan.extra_words)
        if not rules and not project_rules and not wants_comments:
            continue
        ignored = per_file_ignored(_config_relative(path, config), config.per_file_ignores, all_codes())
        requests.append(
            (
                CheckRequest(
                    path=shown,
                    rules=rules,
                    contract=contract,
                    ignored_codes=ignored,
                    report_unused_ignores=options.report_unused_ignores,
                    fix=options.fix,
                    project_rules=project_rules,
                ),
                data,
            )
        )

    results = _check_all(requests, options.jobs, progress)
    findings: list[Finding] = []
    errors = list(read_errors)
    fixed: dict[str, tuple[bytes, bytes]] = {}
    facts: dict[str, dict[str, Any]] = {}
    parsed = 0
    for (request, data), result in zip(requests, results):
        outcome = result.outcome
        parsed += outcome.parsed
        findings.extend(outcome.findings)
        errors.extend(outcome.errors)
        if outcome.fixed_source is not None:
            fixed[outcome.path] = (data, outcome.fixed_source)
        for code, fact in result.facts.items():
            facts.setdefault(code, {})[outcome.path] = fact

    by_path = {display_path(path, cwd): data for path, data in sources.items()}
    for project_rule in plan.project_rules:
        try:
            violations = project_rule.finish(facts.get(project_rule.code, {}))
        except Exception as exc:  # noqa: BLE001 - isolation, as for per-file rules
            errors.append(RunError("<project>", f"internal error in rule {project_rule.code}: {exc!r}", internal=True))
            continue
        for violation in violations:
            finding = _project_finding(project_rule, violation, by_path, config)
            if finding is None:
                continue
            findings.append(finding)
            if violation.fix is not None and _fix_allowed(violation.fix.applicability, options.fix):
                _apply_project_edit(violation.fix, by_path, fixed, errors)

    findings.sort(key=lambda finding: finding.sort_key)
    errors.sort(key=lambda error: error.path)
    return RunResult(len(files), parsed, findings, errors, contract, fixed, scope.skipped)


def _plan(config: Config, options: RunOptions, contract: Contract) -> _Plan:
    select = options.select if options.select is not None else config.select
    ignore = (*config.ignore, *options.ignore) if options.select is None else options.ignore
    codes = set(select_codes(all_codes(), select, ignore))
    rules = tuple(rule for rule in all_rules() if rule.code in codes and issubclass(rule, Rule))
    tbo_options = _tbo_options(config, options)
    project_rules = tuple(
        rule(tbo_options) for rule in all_rules() if rule.code in codes and issubclass(rule, ProjectRule)
    )
    extra = tuple(word.encode() for word in SUPPRESSION_WORDS) if "KV001" in codes else ()
    return _Plan(
        rules=rules,
        project_rules=project_rules,
        rule_groups=tuple(encode_groups(rule.trigger_groups(contract)) for rule in rules),
        project_groups=tuple(encode_groups(rule.trigger_groups(rule.options)) for rule in project_rules),
        extra_words=extra,
    )


def _tbo_options(config: Config, options: RunOptions) -> TboConfig:
    return replace(config.tbo, strict=config.tbo.strict or options.strict_tbo)


def _read_all(files: Sequence[Path], cwd: Path) -> tuple[dict[Path, bytes], list[RunError]]:
    sources: dict[Path, bytes] = {}
    errors: list[RunError] = []
    for path in files:
        try:
            sources[path] = path.read_bytes()
        except FileNotFoundError:
            errors.append(RunError(display_path(path, cwd), "file vanished before it could be read"))
        except IsADirectoryError:
            errors.append(RunError(display_path(path, cwd), "is a directory, not a Python file"))
        except OSError as exc:
            errors.append(RunError(display_path(path, cwd), f"cannot read: {exc.strerror or exc}"))
    return sources, errors


def _check_all(
    requests: list[tuple[CheckRequest, bytes]], jobs: Optional[int], progress: Optional[Progress]
) -> list[CheckResult]:
    total = len(requests)
    workers = jobs if jobs is not None else default_jobs()
    if workers <= 1 or total < MIN_FILES_FOR_WORKERS:
        results = []
        for done, (request, data) in enumerate(requests, 1):
            results.append(_check_guarded(request, data))
            if progress:
                progress(done, total)
        return results
    # Largest files first, so one big file does not finish last on its own.
    order = sorted(range(total), key=lambda i: -len(requests[i][1]))
    slots: list[Optional[CheckResult]] = [None] * total
    with ProcessPoolExecutor(max_workers=min(workers, total)) as pool:
        futures = {pool.submit(_check_guarded, *requests[i]): i for i in order}
        for done, future in enumerate(as_completed(futures), 1):
            index = futures[future]
            try:
                slots[index] = future.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker loses one file, not the run
                path = requests[index][0].path
                slots[index] = CheckResult(
                    FileOutcome(path, False, errors=(RunError(path, f"internal error: worker failed: {exc!r}", True),))
                )
            if progress:
                progress(done, total)
    return [slot for slot in slots if slot is not None]


def _check_guarded(request: CheckRequest, data: bytes) -> CheckResult:
    try:
        return check_bytes(request, data)
    except Exception as exc:  # noqa: BLE001 - anything unexpected is this file's internal error
        error = RunError(request.path, f"internal error: {exc!r}", internal=True)
        return CheckResult(FileOutcome(request.path, False, errors=(error,)))


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _only_changed(files: list[Path], rev: str) -> list[Path]:
    top = _git(["rev-parse", "--show-toplevel"], Path.cwd())
    if top is None:
        raise ConfigError("--changed needs a git repository")
    root = Path(top.strip())
    diff = _git(["diff", "--name-only", "-z", "--diff-filter=d", rev, "--"], root)
    if diff is None:
        raise ConfigError(f"--changed: git cannot diff against {rev!r}")
    untracked = _git(["ls-files", "-z", "--others", "--exclude-standard"], root) or ""
    changed = {(root / name).resolve() for name in (diff + untracked).split("\0") if name}
    return [path for path in files if path.resolve() in changed]


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def _config_relative(path: Path, config: Config) -> str:
    try:
        return path.relative_to(config.root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _project_finding(
    rule: ProjectRule, violation: ProjectViolation, sources: dict[str, bytes], config: Config
) -> Optional[Finding]:
    data = sources.get(violation.path)
    if data is not None:
        ignored = per_file_ignored(violation.path, config.per_file_ignores, [rule.code])
        if rule.code in ignored:
            return None
        comments = parse_suppressions(data.decode("utf-8", errors="replace"))
        if any(item.covers(rule.code) for item in comments.get(violation.line, ())):
            return None
    fix = None
    if violation.fix is not None:
        fix = FixInfo(violation.fix.applicability, violation.fix.description, violation.fix.text, violation.fix.path)
    return Finding(
        code=rule.code,
        name=rule.name,
        severity=violation.severity,
        path=violation.path,
        line=violation.line,
        column=violation.column,
        end_line=violation.end_line,
        end_column=violation.end_column,
        message=violation.message,
        fingerprint=fingerprint(rule.code, violation.path, "", violation.snippet, 1),
        fix=fix,
    )


def _fix_allowed(applicability: Applicability, allowed: Optional[Applicability]) -> bool:
    if allowed is None:
        return False
    return allowed is Applicability.UNSAFE or applicability is Applicability.SAFE


def _apply_project_edit(
    edit: Any, sources: dict[str, bytes], fixed: dict[str, tuple[bytes, bytes]], errors: list[RunError]
) -> None:
    from kvlint.project_edit import insert_after_line

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
