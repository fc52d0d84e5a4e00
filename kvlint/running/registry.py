"""Every rule kvlint has, found by walking the rule families under `kvlint.rules`.

A family is a package (`kvlint.rules.write_loc`, `.layout`, `.tbo`); each of
its public modules holds one rule class named after the module. Adding a rule
is adding one module to a family (or a new family package); nothing else lists
rules. Modules whose name starts with `_` are a family's own helpers.

The rules import LibCST, but read it only when they check a file LibCST parsed:
the registry defers loading it until then (`kvlint.running.deferred_libcst`).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

import kvlint.rules as package
from kvlint.api.rule import ProjectRule, Rule
from kvlint.api.types import ENGINE_CODES
from kvlint.running.deferred_libcst import defer

AnyRule = type[Rule] | type[ProjectRule]


@lru_cache(maxsize=1)
def all_rules() -> tuple[AnyRule, ...]:
    found: list[AnyRule] = []
    defer()
    for family in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if not family.ispkg or family.name.startswith("_"):
            continue
        family_package = importlib.import_module(f"{package.__name__}.{family.name}")
        for info in sorted(pkgutil.iter_modules(family_package.__path__), key=lambda info: info.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{family_package.__name__}.{info.name}")
            found.extend(_rules_defined_in(module))
    return tuple(sorted(found, key=lambda rule: rule.code))


def _rules_defined_in(module: ModuleType) -> list[AnyRule]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, (Rule, ProjectRule))
        and value not in (Rule, ProjectRule)
        and value.__module__ == module.__name__
        and "code" in vars(value)
    ]


def rule_by_code(code: str) -> AnyRule | None:
    return next((rule for rule in all_rules() if rule.code == code.upper()), None)


def all_codes() -> list[str]:
    # KV000 and KV001 are the engine's own findings, not rules with a check.
    return [*(engine.code for engine in ENGINE_CODES), *(rule.code for rule in all_rules())]
