"""Every rule's documented VALID and INVALID examples are tests (as in Fixit)."""

from __future__ import annotations

import ast

import pytest

from kvlint.api.triggers import encode_groups, passes
from kvlint.running.registry import all_rules
from kvlint.api.rule import ProjectRule, Rule
from kvlint.testing import fixed_source, run_project, run_source
from kvlint.api.contract import Contract

FILE_RULES = [rule for rule in all_rules() if issubclass(rule, Rule)]


def _cases(kind: str) -> list[pytest.param]:
    return [
        pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}")
        for rule in FILE_RULES
        for i, example in enumerate(getattr(rule, kind))
    ]


@pytest.mark.parametrize(("rule", "example"), _cases("VALID"))
def test_valid_example_has_no_finding(rule: type[Rule], example) -> None:
    outcome = run_source(example.code, [rule], overrides=example.contract)
    assert not outcome.errors
    assert [f for f in outcome.findings if f.code == rule.code] == []


@pytest.mark.parametrize(("rule", "example"), _cases("INVALID"))
def test_invalid_example_is_flagged_and_fixed(rule: type[Rule], example) -> None:
    outcome = run_source(example.code, [rule], overrides=example.contract)
    assert not outcome.errors
    findings = [f for f in outcome.findings if f.code == rule.code]
    assert len(findings) == example.expected_count, findings
    if example.line is not None:
        assert findings[0].line == example.line
    if example.column is not None:
        assert findings[0].column == example.column
    if example.expected_replacement is None:
        assert fixed_source(example.code, [rule], overrides=example.contract) == example.code
        return
    assert all(f.fix is not None for f in findings)
    fixed = fixed_source(example.code, [rule], overrides=example.contract)
    assert fixed == example.expected_replacement
    compile(fixed, "fixed.py", "exec")
    assert fixed_source(fixed, [rule], overrides=example.contract) == fixed, "fix is not idempotent"
    refound = run_source(fixed, [rule], overrides=example.contract).findings
    assert not [f for f in refound if f.code == rule.code and f.fix is not None]


@pytest.mark.parametrize(("rule", "example"), _cases("INVALID"))
def test_prefilter_keeps_every_invalid_example(rule: type[Rule], example) -> None:
    contract = Contract().with_overrides(example.contract)
    assert passes(example.code.encode(), encode_groups(rule.trigger_groups(contract)))
    # No helper facts: an example flags what it holds itself.
    assert rule.may_flag(example.code.encode(), ast.parse(example.code), contract, frozenset())


PROJECT_RULES = [rule for rule in all_rules() if issubclass(rule, ProjectRule)]


def _project_cases(kind: str) -> list[pytest.param]:
    return [
        pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}")
        for rule in PROJECT_RULES
        for i, example in enumerate(getattr(rule, kind))
    ]


def test_every_project_rule_has_multi_file_examples() -> None:
    for rule in PROJECT_RULES:
        assert rule.VALID and rule.INVALID, rule.code
        assert all(len(example.files) > 1 for example in (*rule.VALID, *rule.INVALID)), rule.code


@pytest.mark.parametrize(("rule", "example"), _project_cases("VALID"))
def test_valid_project_example_has_no_finding(rule: type[ProjectRule], example) -> None:
    findings, fixed = run_project(example.files, rule, options=example.options)
    assert findings == [] and fixed == {}


@pytest.mark.parametrize(("rule", "example"), _project_cases("INVALID"))
def test_invalid_project_example_is_flagged_where_expected(rule: type[ProjectRule], example) -> None:
    findings, fixed = run_project(example.files, rule, options=example.options)
    assert [(f.path, f.line, f.severity.value) for f in findings] == list(example.expected)
    assert fixed == (dict([example.expected_fix]) if example.expected_fix else {})
    for path, source in fixed.items():
        compile(source, path, "exec")
        again, _ = run_project({**example.files, path: source}, rule, options=example.options)
        assert len(again) < len(findings), "the fix did not remove its finding"


@pytest.mark.parametrize(("rule", "example"), _project_cases("INVALID"))
def test_a_suppression_on_the_flagged_line_hides_a_project_finding(rule: type[ProjectRule], example) -> None:
    path, line, _severity = example.expected[0]
    lines = example.files[path].splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].rstrip("\n") + f"  # kvlint: ignore[{rule.code}]\n"
    findings, _ = run_project({**example.files, path: "".join(lines)}, rule, options=example.options)
    assert (path, line) not in [(f.path, f.line) for f in findings]
