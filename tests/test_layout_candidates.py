"""Layout rules on CPython's tree, before LibCST: a file whose functions hold no paged-KV start
next to a view, copy or layout-helper call cannot be flagged, and is not parsed for them."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from kvlint.api.contract import Contract
from kvlint.rules.layout._candidates import may_hold_layout_finding
from kvlint.running.checker import check_bytes
from kvlint.running.plan import CheckRequest
from kvlint.running.registry import all_rules

LAYOUT_RULES = tuple(rule for rule in all_rules() if rule.code.startswith("KV2"))
# A view in one function, the pool's buffer in another: the tracker follows neither across.
APART = """\
def reshape_rows(x, page_size):
    return x.view(-1, page_size, 8)


def read_layer(pool, layer):
    return pool.get_key_buffer(layer)
"""
TOGETHER = """\
def paged(pool, layer, page_size):
    return pool.get_key_buffer(layer).view(-1, page_size, 8)
"""


def _may_hold(source: str, helpers: frozenset[str] = frozenset(), contract: Contract = Contract()) -> bool:
    return may_hold_layout_finding(source.encode(), ast.parse(source), contract, helpers)


def test_a_call_and_a_start_count_only_in_the_same_function() -> None:
    assert not _may_hold(APART)
    assert _may_hold(TOGETHER)


@pytest.mark.parametrize(
    "start",
    [
        "self.k_buffer[layer]",
        "paged_view(buf, page_size)",
        "k_cache",
        "fetch(layer)",
    ],
    ids=["buffer-attribute", "paged-helper", "kv-named-parameter", "helper-with-a-fact"],
)
def test_each_start_of_paged_kv_counts(start: str) -> None:
    params = "k_cache, layer" if start == "k_cache" else "layer"
    source = f"class A:\n    def f(self, {params}, page_size):\n        x = {start}\n        return x.reshape(-1)\n"
    without = source.replace("k_cache, ", "") if start == "k_cache" else source.replace(start, "other")
    assert _may_hold(source, frozenset({"fetch"}))
    assert not _may_hold(without, frozenset({"fetch"}))


def test_module_level_code_is_a_unit_of_its_own() -> None:
    assert _may_hold("import torch\nkv = pool.get_kv_buffer(0)\nflat = kv.flatten()\n")


def test_a_custom_kv_name_pattern_is_read() -> None:
    source = "def f(cache_of_k, page_size):\n    return cache_of_k.view(-1, page_size, 8)\n"
    assert not _may_hold(source)
    assert _may_hold(source, contract=Contract().with_overrides({"kv-name-fallback": "^cache_of_k$"}))


def test_a_file_no_layout_rule_may_flag_is_not_parsed_with_libcst(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    real_parse = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda source: parsed.append(source) or real_parse(source))
    request = CheckRequest(path="m.py", rules=LAYOUT_RULES, contract=Contract())
    assert check_bytes(request, APART.encode()).outcome.parsed
    assert parsed == []
    check_bytes(request, TOGETHER.encode())
    assert len(parsed) == 1


def test_a_rule_whose_test_crashes_still_checks_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object) -> bool:
        raise RuntimeError("bug in may_flag")

    rule = LAYOUT_RULES[0]
    monkeypatch.setattr(rule, "may_flag", classmethod(crash))
    request = CheckRequest(path="m.py", rules=(rule,), contract=Contract())
    outcome = check_bytes(request, TOGETHER.encode()).outcome
    assert not outcome.errors
    assert [finding.code for finding in outcome.findings] == [rule.code]
