"""KV201 only where a paging `.view` can differ from the helpers: at a page size of 1. Where the code
pins the page size above 1 on the way to the view, or copies the view at once, it is not flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.running.engine import RunOptions, run


def found(root: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> list[Finding]:
    (root / "backend.py").write_text(text)
    monkeypatch.chdir(root)
    return run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings


def flagged(root: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> list[int]:
    return [finding.line for finding in found(root, monkeypatch, text) if finding.code == "KV201"]


@pytest.mark.parametrize("constant", ["PAGE_SIZE = 1\n", "PAGE_SIZE = 64\nPAGE_SIZE = 1\n",
                                      "PAGE_SIZE = 64\n\n\ndef set_size():\n    global PAGE_SIZE\n    PAGE_SIZE = 1\n"])
def test_a_module_page_size_that_is_one_or_may_change_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, constant: str
) -> None:
    text = constant + "\n\ndef decode(pool):\n    ps = PAGE_SIZE\n    return pool.get_key_buffer(0).view(-1, ps, 576)\n"
    assert len(flagged(tmp_path, monkeypatch, text)) == 1


def test_a_module_page_size_above_one_through_an_alias_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "PAGE_SIZE = 64\n\n\ndef decode(pool):\n    ps = PAGE_SIZE\n    return pool.get_key_buffer(0).view(-1, ps, 576)\n"
    assert flagged(tmp_path, monkeypatch, text) == []


# aiter's gfx95 path: the kernel call sits after `self.page_size == 16` in one `and` chain.
AND_CHAIN = (
    "def forward(self, layer, forward_batch):\n"
    "    k_cache = forward_batch.token_to_kv_pool.get_key_buffer(layer.layer_id)\n"
    "    if (\n"
    "        supported()\n"
    "        and self.page_size == 16\n"
    "        and ragged(k=k_cache.view(-1, self.page_size, 8, 256))\n"
    "    ):\n"
    "        return\n"
    "    return ragged(k=k_cache.view(-1, self.page_size, 8, 256))\n"
)


def test_an_and_chain_pinning_the_page_size_covers_only_the_parts_after_the_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second view runs whatever the page size is.
    assert flagged(tmp_path, monkeypatch, AND_CHAIN) == [9]
    # A test that does not pin it above 1 pins nothing.
    assert flagged(tmp_path, monkeypatch, AND_CHAIN.replace("self.page_size == 16", "self.page_size == 1")) == [6, 9]
    assert flagged(tmp_path, monkeypatch, AND_CHAIN.replace("self.page_size == 16", "self.page_size != 16")) == [6, 9]
    # Nor does a test of another value.
    assert flagged(tmp_path, monkeypatch, AND_CHAIN.replace("self.page_size == 16", "self.block_size == 16")) == [6, 9]


# dsa's FlashMLA decode: the view is bound, then the page size asserted before any use.
ASSERTED = (
    "def decode(self, kv_cache, layer):\n"
    "    kv_cache = self.pool.get_key_buffer(layer.layer_id)\n"
    "    kv_cache = kv_cache.view(-1, self.physical_page_size, 1, self.kv_cache_dim)\n"
    "    assert self.physical_page_size == 64, 'only page size 64 is supported'\n"
    "    return flash_mla(kv_cache)\n"
)


def test_an_assert_right_after_binding_the_view_pins_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert flagged(tmp_path, monkeypatch, ASSERTED) == []
    # Used before the assert: the kernel may already have read it at page size 1.
    used_first = ASSERTED.replace("    kv_cache = kv_cache.view(", "    flash_mla(kv_cache.view(").replace(
        "self.kv_cache_dim)\n    assert", "self.kv_cache_dim))\n    assert")
    assert flagged(tmp_path, monkeypatch, used_first) == [3]


def test_a_view_copied_at_once_is_left_to_kv202(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "def decode(self, pool, layer):\n"
        "    k = pool.get_key_buffer(layer.layer_id)\n"
        "    return k.view(-1, self.page_size, 8, 64).contiguous(), k.view(-1, self.page_size, 8, 64).float()\n"
    )
    # The copied view is KV202's; the one handed on as it is stays KV201's.
    assert sorted((f.code, f.column) for f in found(tmp_path, monkeypatch, text)) == [("KV201", 60), ("KV202", 12)]


# aiter's MLA decode in sglang 0.4.7 rebinds the buffer to a view after the kernel call and never reads it.
DEAD = (
    "def decode(self, pool, layer):\n"
    "    k_buffer = pool.get_key_buffer(layer.layer_id)\n"
    "    run(k_buffer)\n"
    "    k_buffer = k_buffer.view(-1, self.page_size, layer.qk_head_dim)\n"
)


def test_a_view_bound_to_a_name_nothing_reads_is_not_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert flagged(tmp_path, monkeypatch, DEAD) == []
    assert flagged(tmp_path, monkeypatch, DEAD + "    return k_buffer\n") == [4]
    # A read in a nested function counts too, and so does handing back every local.
    assert flagged(tmp_path, monkeypatch, DEAD + "    return lambda: k_buffer\n") == [4]
    assert flagged(tmp_path, monkeypatch, DEAD + "    return locals()\n") == [4]
    # So does one in a loop's next turn.
    looped = (
        "def decode(self, pool, layers):\n"
        "    k_buffer = None\n"
        "    for layer in layers:\n"
        "        run(k_buffer)\n"
        "        k_buffer = pool.get_key_buffer(layer).view(-1, self.page_size, 576)\n"
    )
    assert flagged(tmp_path, monkeypatch, looped) == [5]


def test_a_dead_view_at_a_literal_page_size_of_one_is_not_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DEAD.replace("view(-1, self.page_size, layer.qk_head_dim)", "view(-1, 1, layer.qk_head_dim)")
    assert flagged(tmp_path, monkeypatch, text) == []
    assert flagged(tmp_path, monkeypatch, text + "    return k_buffer\n") == [4]


# minimax_m3's fused path: it leaves unless the caches are contiguous, which a token-major
# per-layer view never is; past that test `.view` splits a contiguous buffer, exact at any page size.
CONTIGUOUS_ONLY = (
    "def fused(kv_pool, layer_id):\n"
    "    k_cache, v_cache = kv_pool.get_kv_buffer(layer_id)\n"
    "    page_size = int(kv_pool.page_size)\n"
    "    if page_size <= 0 or not k_cache.is_contiguous() or not v_cache.is_contiguous():\n"
    "        return None\n"
    "    pages = k_cache.shape[0] // page_size\n"
    "    return kernel(k_cache.view(pages, page_size, 8, 128), v_cache.view(pages, page_size, 8, 128))\n"
)


def test_a_view_past_an_exit_unless_its_tensor_is_contiguous_is_not_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert flagged(tmp_path, monkeypatch, CONTIGUOUS_ONLY) == []
    # Only the tensor tested is covered.
    assert flagged(tmp_path, monkeypatch, CONTIGUOUS_ONLY.replace(" or not v_cache.is_contiguous()", "")) == [7]
    # A test `and`-ed with the exit's is no guarantee.
    anded = CONTIGUOUS_ONLY.replace("page_size <= 0 or not k_cache", "page_size <= 0 and not k_cache")
    assert flagged(tmp_path, monkeypatch, anded) == [7]
    # An exit that does not always leave is none either.
    assert flagged(tmp_path, monkeypatch, CONTIGUOUS_ONLY.replace("        return None\n", "        log()\n")) == [7, 7]
    # Nor is a test made before the tensor is bound again.
    rebound = CONTIGUOUS_ONLY.replace("    pages = ", "    k_cache = kv_pool.get_key_buffer(layer_id)\n    pages = ")
    assert flagged(tmp_path, monkeypatch, rebound) == [8]


def test_a_view_under_a_contiguity_test_or_assert_is_not_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = "def f(pool, page_size):\n    k = pool.get_key_buffer(0)\n{guard}    return kernel(k.view(-1, page_size, 8, 128))\n"
    assert flagged(tmp_path, monkeypatch, body.format(guard="    assert k.is_contiguous()\n")) == []
    # The view's line indented under the test.
    under = body.format(guard="    if k.is_contiguous() and page_size > 0:\n    ")
    assert flagged(tmp_path, monkeypatch, under) == []
    assert flagged(tmp_path, monkeypatch, body.format(guard="")) == [3]
