"""Buffers by the pool that hands them out (issue 36, items 2 and 3): a pool whose gate is off and
whose accessors read its own buffers, or those of sub-pools it builds by size (never a unified
pool, whose constructor takes the unified buffer), hands out no token-major view. A backend that
asserts its pool is such a class gets contiguous per-layer buffers: no layout finding, in the
backend or in the helper it hands them to (sglang's MiniMax sparse backend). Each way the tree
lets a unified buffer in brings the findings back."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.api.class_facts import AccessorRead
from kvlint.cli import main
from kvlint.learn.accessor_reads import accessor_reads
from edited_tree import write_edited
from test_door_classes import WRITE_LOC

POOLS = '''
import torch

from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class KVCache:
    requires_physical_write_loc = False

    def get_key_buffer(self, layer_id):
        raise NotImplementedError()


class MHAPool(KVCache):
    def __init__(self, size, dtype, layer_num):
        self.k_buffer = [torch.zeros(size, 8, 128, dtype=dtype) for _ in range(layer_num)]
        self.v_buffer = [torch.zeros(size, 8, 128, dtype=dtype) for _ in range(layer_num)]

    def set_kv_buffer(self, layer, loc_info, k, v):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")
        loc, _ = unwrap_write_loc(loc_info)
        self.k_buffer[layer][loc] = k

    def _get_key_buffer(self, layer_id):
        return self.k_buffer[layer_id]

    def get_key_buffer(self, layer_id):
        return self._get_key_buffer(layer_id)

    def get_value_buffer(self, layer_id):
        return self.v_buffer[layer_id]

    def get_kv_buffer(self, layer_id):
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)


class UnifiedMHAPool(MHAPool):
    requires_physical_write_loc = True

    def __init__(self, *, unified_buffer):
        self.k_buffer, self.v_buffer = unified_buffer.views()
'''

SPARSE_POOL = '''
from engine.pools import KVCache, MHAPool
from engine.write_loc import unwrap_write_loc


class SparsePool(KVCache):
    def __init__(self, size, dtype, layer_num, main_pool_cls=MHAPool):
        self.main_pool = main_pool_cls(size=size, dtype=dtype, layer_num=layer_num)

    def _pool_for(self, layer_id):
        return self.main_pool

    def _wait_for_layer(self, layer_id):
        pass

    def get_kv_buffer(self, layer_id):
        self._wait_for_layer(layer_id)
        return self._pool_for(layer_id).get_kv_buffer(layer_id)

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        self.main_pool.set_kv_buffer(layer, loc, k, v)
'''

BACKEND = '''
from engine.sparse_pool import SparsePool


def _to_pages(k_cache, v_cache, page_size):
    return k_cache.view(-1, page_size, 8, 128), v_cache.view(-1, page_size, 8, 128)


class SparseBackend:
    def __init__(self, runner):
        assert isinstance(runner.token_to_kv_pool, SparsePool)
        self.kv_pool = runner.token_to_kv_pool

    def forward(self, layer, page_size):
        k_cache, v_cache = self.kv_pool.get_kv_buffer(layer.layer_id)
        direct = k_cache.view(-1, page_size, 8, 128)
        return direct, self._decode(k_cache, v_cache, page_size)

    def _decode(self, k_cache, v_cache, page_size):
        return _to_pages(k_cache, v_cache, page_size)
'''


def layout_findings(root: Path, edits: dict[str, list[tuple[str, str]]] = {}) -> list[tuple[str, int]]:
    write_edited(root, {"engine/write_loc.py": WRITE_LOC, "engine/pools.py": POOLS, "engine/sparse_pool.py": SPARSE_POOL,
                        "engine/sparse_backend.py": BACKEND}, edits)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "--select", "KV2", "."],
                                catch_exceptions=False)
    return sorted((f["code"], f["line"]) for f in json.loads(result.stdout)["findings"])


def test_a_backend_asserting_a_pool_that_builds_its_sub_pools_by_size_gets_its_own_buffers(in_tmp: Path) -> None:
    assert layout_findings(in_tmp) == []


DIRECT_VIEW = ("KV201", 16)


@pytest.mark.parametrize("edits", [
    # Nothing says which pool the backend holds.
    {"engine/sparse_backend.py": [("        assert isinstance(runner.token_to_kv_pool, SparsePool)\n", "")]},
    # The sparse pool holds a unified pool.
    {"engine/sparse_pool.py": [("main_pool_cls(size=size, dtype=dtype, layer_num=layer_num)",
                                "UnifiedMHAPool(unified_buffer=size)"),
                               ("import KVCache, MHAPool", "import KVCache, MHAPool, UnifiedMHAPool")]},
    # A unified pool whose constructor takes `size` may be what the handed class builds.
    {"engine/pools.py": [("def __init__(self, *, unified_buffer):",
                          "def __init__(self, size=None, dtype=None, layer_num=None, *, unified_buffer=None):")]},
    # A subclass of the asserted class turns the gate on: the assert allows it.
    {"engine/sparse_pool.py": [("        self.main_pool.set_kv_buffer(layer, loc, k, v)\n",
                                "        self.main_pool.set_kv_buffer(layer, loc, k, v)\n\n\n"
                                "class UnifiedSparsePool(SparsePool):\n    requires_physical_write_loc = True\n")]},
    # Which pool `_pool_for` returns is not read.
    {"engine/sparse_pool.py": [("        return self.main_pool\n", "        return self.pools[layer_id]\n")]},
    # A subclass of the asserted class names its pools its own way.
    {"engine/sparse_pool.py": [("        self.main_pool.set_kv_buffer(layer, loc, k, v)\n",
                                "        self.main_pool.set_kv_buffer(layer, loc, k, v)\n\n\n"
                                "class ShardedSparsePool(SparsePool):\n    def _pool_for(self, layer_id):\n"
                                "        return self.pools[layer_id]\n")]},
    # A pool the handed class may be reads its keys, through the helper it redefines, from a pool it
    # was handed: that may be anything.
    {"engine/pools.py": [("class UnifiedMHAPool(MHAPool):",
                          "class SourcedPool(MHAPool):\n    def _get_key_buffer(self, layer_id):\n"
                          "        return self.source.get_key_buffer(layer_id)\n\n\nclass UnifiedMHAPool(MHAPool):")]},
    # A tree with no gate has not moved to the unified pool: every pool may yet become token-major.
    {"engine/pools.py": [("    requires_physical_write_loc = False\n", ""),
                         ("    requires_physical_write_loc = True\n", ""),
                         ("if self.requires_physical_write_loc and not write_loc_is_physical(loc_info)",
                          "if not write_loc_is_physical(loc_info)")]},
], ids=["no-assert", "unified-sub-pool", "unified-by-size", "gated-subclass", "unread-pool-for", "redefined-pool-for",
        "redefined-helper",
        "no-gate"])
def test_each_way_a_unified_buffer_may_come_in_brings_the_findings_back(
    in_tmp: Path, edits: dict[str, list[tuple[str, str]]]
) -> None:
    assert DIRECT_VIEW in layout_findings(in_tmp, edits)


def test_the_direct_view_is_the_line_the_edits_expect(in_tmp: Path) -> None:
    assert BACKEND.splitlines()[DIRECT_VIEW[1] - 1].strip().startswith("direct = k_cache.view(")


def reads(source: str, klass: str, methods: set[str]) -> tuple[AccessorRead, ...]:
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == klass)
    read = accessor_reads(node, frozenset({"get_key_buffer", "get_kv_buffer", "k_buffer"}))
    return tuple(each for each in read if each.name in methods)


def test_accessor_reads_name_the_pools_helpers_and_inherited_definitions() -> None:
    source = SPARSE_POOL + (
        "\n\nclass Interleaved(MHAPool):\n"
        "    def get_key_buffer(self, layer_id):\n"
        "        if self.sharded:\n            slot = self._slot_for(layer_id)\n            return slot.k\n"
        "        return super().get_key_buffer(layer_id)\n\n"
        "    def get_kv_buffer(self, layer_id):\n"
        "        pool = self.full if layer_id else self.swa\n        return pool.get_kv_buffer(layer_id)\n\n"
        "    def k_buffer(self):\n        return self.handed.k_buffer\n"
    )
    # `_wait_for_layer`'s result is dropped; `_pool_for`'s is read in the class and used.
    assert reads(source, "SparsePool", {"get_kv_buffer"}) == (
        AccessorRead("get_kv_buffer", pools=("main_pool",), helpers=("_pool_for",), through=("_pool_for",)),)
    assert reads(source, "Interleaved", {"get_key_buffer", "get_kv_buffer", "k_buffer"}) == (
        AccessorRead("get_key_buffer", helpers=("_slot_for",), inherited=("get_key_buffer",)),
        AccessorRead("get_kv_buffer", pools=("full", "swa")),
        AccessorRead("k_buffer", pools=("handed",)),
    )
    # A receiver that is a parameter may be any pool.
    assert reads("class P:\n    def get_key_buffer(self, pool):\n        return pool.get_key_buffer(0)\n", "P",
                 {"get_key_buffer"}) == (AccessorRead("get_key_buffer", unknown=True),)


def test_kvlint_contract_names_the_pools_handing_out_own_buffers(in_tmp: Path) -> None:
    layout_findings(in_tmp)
    result = CliRunner().invoke(main, ["contract", "--no-cache", "."], catch_exceptions=False)
    [line] = [line for line in result.stdout.splitlines() if line.startswith("own-buffer pools")]
    assert json.loads(line.split(": ", 1)[1]) == ["KVCache", "MHAPool", "SparsePool"]


class _Composite:
    """MiniMax's sparse pool, reduced: `get_kv_buffer` hands over to the pool it built."""

    def __init__(self, main_pool: object) -> None:
        self.main_pool = main_pool

    def get_kv_buffer(self, layer_id: int) -> tuple:
        return self.main_pool.get_kv_buffer(layer_id)  # type: ignore[attr-defined]


@pytest.mark.parametrize("page_size", [1, 16, 256])
def test_at_run_time_a_held_contiguous_pools_view_is_what_the_paged_helpers_give(page_size: int) -> None:
    torch = pytest.importorskip("torch")
    from runtime_shim import ContiguousMHAPool, TokenMajorMHAPool, paged_kv_view

    geometry = dict(num_slots=1024, page_size=page_size, layer_num=4, k_heads=4, k_dim=128, v_heads=4, v_dim=128,
                    dtype=torch.float16, device="cpu")
    k_cache, _ = _Composite(ContiguousMHAPool(**geometry)).get_kv_buffer(1)
    viewed, helped = k_cache.view(-1, page_size, 4, 128), paged_kv_view(k_cache, page_size, 4, 128)
    assert (viewed.shape, viewed.stride(), viewed.data_ptr()) == (helped.shape, helped.stride(), helped.data_ptr())
    # Held token-major, the same `.view` at page size 1 gives the row stride where the slot stride belongs.
    k_cache, _ = _Composite(TokenMajorMHAPool(**geometry)).get_kv_buffer(1)
    viewed, helped = k_cache.view(-1, page_size, 4, 128), paged_kv_view(k_cache, page_size, 4, 128)
    assert (viewed.stride(1) == helped.stride(1)) == (page_size > 1)
