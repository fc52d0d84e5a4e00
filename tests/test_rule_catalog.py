"""The rule catalogue stays consistent: codes, names, docs, modules, README table."""

from __future__ import annotations

import re
from pathlib import Path

from kvlint.face.docs import explain_rule, rules_table
from kvlint.running.registry import all_rules
from kvlint.api.rule import DOC_SECTIONS
from kvlint.api.types import ENGINE_CODES

README = Path(__file__).resolve().parent.parent / "README.md"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_codes_and_names_are_unique_and_well_formed() -> None:
    codes = [rule.code for rule in all_rules()]
    names = [rule.name for rule in all_rules()]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"KV[1-9][0-9]{2}", code) for code in codes)
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", name) for name in names)


def test_each_rule_lives_in_a_module_named_after_its_class_in_its_familys_package() -> None:
    from kvlint.rules import FAMILY_PREFIXES

    for rule in all_rules():
        family = rule.__module__.split(".")[2]
        assert rule.__module__ == f"kvlint.rules.{family}.{_snake(rule.__name__)}", rule
        assert rule.code.startswith(FAMILY_PREFIXES[family]), rule


def test_every_rule_doc_has_every_section() -> None:
    for rule in all_rules():
        doc = rule.__doc__ or ""
        missing = [section for section in DOC_SECTIONS if f"## {section}" not in doc]
        assert not missing, f"{rule.code} lacks {missing}"


def test_every_documented_engine_code_has_every_section() -> None:
    documented = [code for code in ENGINE_CODES if code.details]
    assert [code.code for code in documented] == ["KV104"]
    for code in documented:
        text = explain_rule(code.code) or ""
        missing = [section for section in DOC_SECTIONS if f"## {section}" not in text]
        assert not missing, f"{code.code} lacks {missing}"


def test_every_file_rule_has_examples() -> None:
    for rule in all_rules():
        if hasattr(rule, "VALID"):
            assert rule.VALID and rule.INVALID, rule.code


def test_readme_rule_table_matches_the_rules() -> None:
    text = README.read_text()
    start = text.index("<!-- rules:start -->") + len("<!-- rules:start -->")
    end = text.index("<!-- rules:end -->")
    assert text[start:end].strip() == rules_table("markdown"), (
        "README rule table is stale: regenerate it with `kvlint rules --format markdown`"
    )
