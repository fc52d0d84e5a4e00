"""Settings for callers outside `kvlint check/fix`: LibCST's codemod runner."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kvlint.checker import CheckRequest
from kvlint.config import Config, load_config
from kvlint.contract import Contract
from kvlint.discovery import discover
from kvlint.learn import learn_contract
from kvlint.registry import all_rules
from kvlint.rule import Rule
from kvlint.types import Applicability


@lru_cache(maxsize=None)
def codemod_request(path: str, codes: tuple[str, ...]) -> CheckRequest:
    """What `kvlint fix` would apply to `path`, limited to `codes` (all when empty)."""
    rules = tuple(
        rule for rule in all_rules() if issubclass(rule, Rule) and (not codes or rule.code in codes)
    )
    return CheckRequest(path=path, rules=rules, contract=_contract(), fix=Applicability.SAFE)


@lru_cache(maxsize=1)
def _contract() -> Contract:
    """The contract `kvlint check` would learn here, once per process (LibCST runs one per worker)."""
    config = load_config(start=Path.cwd())
    return learn_contract(config, _configured_sources(config))


def _configured_sources(config: Config) -> dict[Path, bytes]:
    scope = discover([config.root / include for include in config.include], config.exclude, config.root)
    sources: dict[Path, bytes] = {}
    for path in scope.files:
        try:
            sources[path] = path.read_bytes()
        except OSError:
            # Unreadable files are reported by `kvlint check`; learning just skips them.
            continue
    return sources
