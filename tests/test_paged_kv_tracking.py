"""Which expressions the layout rules treat as paged KV (kvlint.rules.layout._paged_kv)."""

from __future__ import annotations

import libcst as cst
import pytest

from kvlint.api.contract import Contract
from kvlint.analysis.index import build_index
from kvlint.api.rule import FileContext
from kvlint.rules.layout._paged_kv import paged_kv, paged_kv_trigger


def probed(source: str, contract: Contract = Contract()) -> list[bool]:
    """For each `probe(expr)` in `source`, in order: is `expr` paged KV where it stands?"""
    module = cst.parse_module(source)
    tracker = paged_kv(FileContext("probe.py", module, contract))
    return [tracker.holds(site.call.args[0].value, site.function) for site in build_index(module).calls("probe")]


def in_function(body: str, params: str = "self, pool, layer, q, n, loc, c") -> str:
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return f"def f({params}):\n{indented}"


@pytest.mark.parametrize(
    "body",
    [
        "probe(self.token_to_kv_pool.get_key_buffer(layer.layer_id))",
        "probe(pool.get_value_buffer(0))",
        "probe(get_kv_buffer(0)[1])",
        "probe(self.k_buffer[layer.layer_id])",
        "probe(self.kv_buffer[layer.layer_id - self.start_layer])",
        "kv = pool.get_kv_buffer(0)\nprobe(kv[0])",
        "k = pool.get_key_buffer(0)\nprobe(k[:n])",
        "kv_cache = pool.get_key_buffer(0)\nprobe(kv_cache[:, :, layer.v_head_dim:])",
        "probe(paged_view(q, 16))",
        "probe(paged_kv_view(q, 16, 4, 128))",
        "k = pool.get_key_buffer(0).view(-1, 4, 128)\nprobe(k)",
        "if (k := pool.get_key_buffer(0)) is not None:\n    probe(k)",
        "for buf in self.k_buffer:\n    probe(buf)",
    ],
)
def test_values_from_buffer_accessors_and_their_views_are_paged(body: str) -> None:
    assert probed(in_function(body)) == [True]


def test_tuple_unpacked_get_kv_buffer_gives_two_paged_tensors() -> None:
    body = "k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)\nprobe(k_cache)\nprobe(v_cache)"
    assert probed(in_function(body)) == [True, True]


def test_unpacked_tuple_literal_follows_each_element() -> None:
    body = "k, other = pool.get_key_buffer(0), q\nprobe(k)\nprobe(other)"
    assert probed(in_function(body)) == [True, False]


@pytest.mark.parametrize(
    "body",
    [
        "probe(q)",
        "probe(self.k_cache)",
        "k = pool.get_key_buffer(0)\nprobe(k[loc])",
        "k = pool.get_key_buffer(0)\nk = q\nprobe(k)",
        "k = pool.get_key_buffer(0)\nprobe(k.shape)",
        "k = pool.get_key_buffer(0)\nprobe(k.float())",
        "probe(pool.get_buffer(0))",
    ],
)
def test_other_values_are_not_paged(body: str) -> None:
    assert probed(in_function(body)) == [False]


def test_a_definition_on_one_branch_is_enough() -> None:
    body = "if c:\n    k = pool.get_key_buffer(0)\nelse:\n    k = q\nprobe(k)"
    assert probed(in_function(body)) == [True]


def test_a_loop_feeding_a_slice_back_into_itself_terminates_and_stays_paged() -> None:
    body = "k = pool.get_key_buffer(0)\nwhile c:\n    k = k[:n]\nprobe(k)"
    assert probed(in_function(body)) == [True]


@pytest.mark.parametrize(
    ("name", "paged"),
    [
        ("k_cache", True),
        ("v_cache", True),
        ("key_cache", True),
        ("value_cache", True),
        ("kv_cache", True),
        ("k_cache_raw", True),
        ("cache", False),
        ("k_cache2", False),
        ("q_cache", False),
    ],
)
def test_parameters_named_like_a_kv_cache_are_paged(name: str, paged: bool) -> None:
    assert probed(f"def f({name}):\n    probe({name})\n") == [paged]


def test_the_name_fallback_applies_to_parameters_only() -> None:
    source = "def f(q):\n    k_cache = q\n    probe(k_cache)\n\nprobe(k_cache)\n"
    assert probed(source) == [False, False]


def test_a_closure_variable_is_followed_to_the_function_that_binds_it() -> None:
    source = "def f(pool):\n    k = pool.get_key_buffer(0)\n    def g():\n        probe(k)\n"
    assert probed(source) == [True]
    own = "def f(pool):\n    k = torch.zeros(4, 8)\n    def g():\n        probe(k)\n"
    assert probed(own) == [False]
    # A parameter named like a cache that every caller feeds its own allocation, read in a closure,
    # or fed from one.
    fed = "def f(k_cache):\n    def g():\n        probe(k_cache)\n\ndef caller():\n    f(torch.zeros(4))\n"
    assert probed(fed) == [False]
    fed_in_closure = "def f(k_cache):\n    probe(k_cache)\n\ndef caller():\n    buf = torch.zeros(4)\n    def g():\n        f(buf)\n"
    assert probed(fed_in_closure) == [False]


def test_accessors_and_fallback_come_from_the_contract() -> None:
    contract = Contract(buffer_accessors=("layer_cache",), kv_name_fallback=r"^cache$")
    source = "def f(pool, cache, k_cache):\n    probe(pool.layer_cache(0))\n    probe(pool.get_key_buffer(0))\n    probe(cache)\n    probe(k_cache)\n"
    assert probed(source, contract) == [True, False, True, False]


def test_trigger_words_cover_the_default_fallback_and_drop_for_a_custom_one() -> None:
    (words,) = paged_kv_trigger(Contract())
    assert {"get_kv_buffer", "k_buffer", "paged_view", "k_cache", "v_cache"} <= set(words)
    for name in ("k_cache", "v_cache", "kv_cache", "key_cache", "value_cache", "kv_cache_raw"):
        assert any(word in name for word in words), name
    assert paged_kv_trigger(Contract(kv_name_fallback=r"^cache$")) == ()
