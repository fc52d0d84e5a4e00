"""Check or fix sources in memory: for rule examples and tests.

`run_source` checks one file with per-file rules; `run_project` checks several
files together with project rules, the way `kvlint check` does (contract
learned from the files, prefilter, extraction per file, `finish`, decisions),
without touching the file system.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from kvlint.running.checker import check_bytes
from kvlint.api.config import Config, TboConfig
from kvlint.api.contract import Contract
from kvlint.running.decide import FileDecisions, project_candidate
from kvlint.fix.project_edit import insert_after_line
from kvlint.learn.contract import learn_contract
from kvlint.running.plan import CheckRequest, project_groups
from kvlint.api.triggers import passes
from kvlint.api.rule import ProjectRule, Rule
from kvlint.api.types import Applicability, FileOutcome, Finding


def run_source(
    source: str,
    rules: Sequence[type[Rule]],
    *,
    contract: Optional[Contract] = None,
    overrides: Mapping[str, str] = {},
    fix: Optional[Applicability] = None,
    path: str = "example.py",
) -> FileOutcome:
    contract = (contract or Contract()).with_overrides(overrides)
    request = CheckRequest(path=path, rules=tuple(rules), contract=contract, fix=fix)
    return check_bytes(request, source.encode()).outcome


def fixed_source(source: str, rules: Sequence[type[Rule]], **kwargs: Any) -> str:
    """The source after `kvlint fix` (safe fixes unless `fix=` says otherwise)."""
    kwargs.setdefault("fix", Applicability.SAFE)
    outcome = run_source(source, rules, **kwargs)
    if outcome.errors:
        raise AssertionError(f"fix failed: {outcome.errors}")
    return source if outcome.fixed_source is None else outcome.fixed_source.decode()


def run_project(
    files: Mapping[str, str], rule: type[ProjectRule], *, options: Mapping[str, object] = {}
) -> tuple[list[Finding], dict[str, str]]:
    """The rule's findings over `files` (path -> source), and the files its unsafe fixes would rewrite."""
    tbo = replace(TboConfig(), **dict(options))  # type: ignore[arg-type]
    sources = {path: text.encode() for path, text in files.items()}
    contract = learn_contract(Config(tbo=tbo), {Path(path): data for path, data in sources.items()})
    instance = rule(tbo)
    groups = project_groups(rule, tbo, contract)
    facts: dict[str, Any] = {}
    for path, data in sources.items():
        if not passes(data, groups):
            continue
        result = check_bytes(CheckRequest(path=path, rules=(), contract=contract, project_rules=(instance,)), data)
        if result.outcome.errors:
            raise AssertionError(f"{path}: {result.outcome.errors}")
        if rule.code in result.facts:
            facts[path] = result.facts[rule.code]
    findings: list[Finding] = []
    fixed: dict[str, bytes] = {}
    decisions = {path: FileDecisions.for_source(path, frozenset(), text) for path, text in files.items()}
    for violation in instance.finish(facts):
        finding = decisions.setdefault(violation.path, FileDecisions(violation.path)).admit(
            project_candidate(instance, violation)
        )
        if finding is None:
            continue
        findings.append(finding)
        if violation.fix is not None:
            edit = violation.fix
            fixed[edit.path] = insert_after_line(fixed.get(edit.path, sources[edit.path]), edit.after_line, edit.text)
    findings.sort(key=lambda finding: finding.sort_key)
    return findings, {path: data.decode() for path, data in fixed.items()}
