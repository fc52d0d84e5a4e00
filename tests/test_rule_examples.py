"""Every rule's documented VALID and INVALID examples are tests (as in Fixit)."""

from __future__ import annotations

import pytest

from kvlint.prefilter import encode_groups, passes
from kvlint.registry import all_rules
from kvlint.rule import Rule
from kvlint.testing import fixed_source, run_source
from kvlint.contract import Contract

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
