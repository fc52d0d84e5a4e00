"""Property tests: for generated serving-engine-shaped functions, `fix` output
parses, is idempotent, changes nothing outside the flagged nodes and imports,
and leaves no fixable finding behind. Runs every registered per-file rule."""

from __future__ import annotations

import ast
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fix_scope import changes_outside_fixes
from kvlint.running.registry import all_rules
from kvlint.api.rule import Rule
from kvlint.testing import run_source
from kvlint.api.types import Applicability

RULES = [rule for rule in all_rules() if issubclass(rule, Rule)]

LOCS = [
    "forward_batch.out_cache_loc",
    "forward_batch.out_cache_loc[:n]",
    "loc",
    "translated",
    "KVWriteLoc.for_batch(forward_batch)",
    "KVWriteLoc(forward_batch.out_cache_loc)",
    "KVWriteLoc(translated, id_space='kernel')",
    "cache_loc",
    "forward_batch.out_cache_loc if not layer.is_cross_attention else forward_batch.encoder_out_cache_loc",
]
SIMPLE_STATEMENTS = [
    *(f"pool.set_kv_buffer(layer, {loc}, k, v)" for loc in LOCS),
    "self.token_to_kv_pool.set_kv_buffer(layer, loc=forward_batch.out_cache_loc, cache_k=k, cache_v=v)",
    "pool.set_mla_kv_buffer(layer, loc, k, k_rope)",
    "loc = forward_batch.out_cache_loc",
    "loc = forward_batch.out_cache_loc[:n]",
    "loc = KVWriteLoc.for_batch(forward_batch)",
    "translated = page_table[forward_batch.out_cache_loc]",
    "k_cache = pool.get_key_buffer(layer.layer_id)",
    "v_cache = pool.get_value_buffer(layer.layer_id)",
    "k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)",
    "k_pages = k_cache.view(-1, page_size, H, D)",
    "k_pages = k_cache.view(-1, 1, H, D)",
    "rows = v_cache.view(-1, page_size, H * D)",
    "grouped = k_cache.view(-1, page_size * 2, H // 2, D)",
    "flat = k_cache.reshape(-1, H * D)",
    "packed = v_cache.contiguous()",
    "k_cache = k_cache[:n]",
    "out = attention(q, k_pages, v_cache)",
]


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _block(statements: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    """One statement, or a branch or loop around a block of them."""
    simple = st.sampled_from(SIMPLE_STATEMENTS).map(lambda s: [s])
    nested = st.tuples(
        st.sampled_from(["if save_kv_cache:", "for i in range(n):", "while pending:", "if layer.is_cross_attention:"]),
        statements,
        st.one_of(st.none(), statements),
    ).map(lambda t: [t[0], *_indent(t[1])] + ([] if t[2] is None or not t[0].startswith("if") else ["else:", *_indent(t[2])]))
    return st.one_of(simple, nested)


BODIES = st.recursive(
    st.lists(st.sampled_from(SIMPLE_STATEMENTS), min_size=1, max_size=4),
    lambda inner: st.lists(_block(inner), min_size=1, max_size=4).map(lambda blocks: [l for b in blocks for l in b]),
    max_leaves=12,
)
HEADERS = st.sampled_from(
    [
        "",
        "import torch\n",
        "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n",
        "from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, KVWriteLoc\n",
    ]
)


@st.composite
def modules(draw: Any) -> str:
    header = draw(HEADERS)
    functions = draw(st.lists(BODIES, min_size=1, max_size=2))
    defs = [
        f"def forward_{i}(self, q, k, v, layer, forward_batch, pool, n, page_size, H, D, save_kv_cache=True):\n"
        + "\n".join(_indent(body))
        + "\n"
        for i, body in enumerate(functions)
    ]
    return header + ("\n\n" if header else "") + "\n\n".join(defs)


def _findings(source: str) -> list[dict[str, Any]]:
    outcome = run_source(source, RULES)
    assert not outcome.errors, outcome.errors
    return [finding.to_json() for finding in outcome.findings]


def _fixed(source: str) -> str:
    outcome = run_source(source, RULES, fix=Applicability.UNSAFE)
    assert not outcome.errors, outcome.errors
    return source if outcome.fixed_source is None else outcome.fixed_source.decode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_fix_parses_is_idempotent_stays_in_bounds_and_leaves_nothing_fixable(source: str) -> None:
    ast.parse(source)
    findings = _findings(source)
    fixed = _fixed(source)
    ast.parse(fixed)
    compile(fixed, "fixed.py", "exec")
    assert _fixed(fixed) == fixed, "fix is not idempotent"
    assert changes_outside_fixes(source, fixed, findings) == []
    assert [f for f in _findings(fixed) if f["fix"] is not None] == []
    if not any(f["fix"] is not None for f in findings):
        assert fixed == source
