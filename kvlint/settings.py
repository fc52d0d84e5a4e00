"""Settings for callers outside `kvlint check/fix`: LibCST's codemod runner."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kvlint.checker import CheckRequest
from kvlint.config import load_config
from kvlint.learn import learn_contract
from kvlint.registry import all_rules
from kvlint.rule import Rule
from kvlint.types import Applicability


@lru_cache(maxsize=None)
def codemod_request(path: str, codes: tuple[str, ...]) -> CheckRequest:
    """What `kvlint fix` would apply to `path`, limited to `codes` (all when empty)."""
    config = load_config(start=Path.cwd())
    contract = learn_contract(config, {})
    rules = tuple(
        rule for rule in all_rules() if issubclass(rule, Rule) and (not codes or rule.code in codes)
    )
    return CheckRequest(path=path, rules=rules, contract=contract, fix=Applicability.SAFE)
