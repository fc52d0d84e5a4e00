"""The guard reports int32 indices into a pool of 2^31 elements or more.

Past 2^31 elements, ``index * slot_stride`` in 32 bits overflows: under
token-major the slot stride is the whole entry, so that happens at 32,768
slots of a 32-layer, 8-head, head-dim-128 pool (tests/gpu shows upstream's
decode kernel crash on it). These pools are float8, the narrowest KV dtype,
so the smallest crossing pool is 2 GiB; the write door is checked before
anything is written.
"""

from __future__ import annotations

import pytest
import torch

from runtime_shim import KVWriteLoc, TokenMajorMHAPool, kv_layout_guard
from runtime_shim.guard import INT32_OFFSET_LIMIT

FP8 = torch.float8_e4m3fn
LAYERS, HEADS, DIM = 32, 8, 128
ENTRY = LAYERS * 2 * HEADS * DIM  # 65,536 elements


def _marked(loc):
    return KVWriteLoc(loc, id_space="kernel")


@pytest.fixture(scope="module")
def large_pool():
    slots = INT32_OFFSET_LIMIT // ENTRY + 16  # the smallest page-aligned pool past 2^31
    pool = TokenMajorMHAPool(
        num_slots=slots, page_size=16, layer_num=LAYERS, k_heads=HEADS, k_dim=DIM, v_heads=HEADS,
        v_dim=DIM, dtype=FP8, device="cpu",
    )
    assert pool.raw.numel() // FP8.itemsize >= INT32_OFFSET_LIMIT
    # Lazily zeroed (an anonymous mapping on CPU): a fresh pool reads zeros.
    assert not pool.get_key_buffer(LAYERS - 1)[-1].float().any()
    yield pool
    del pool


def _rows(n):
    return torch.zeros((n, HEADS, DIM), dtype=FP8), torch.zeros((n, HEADS, DIM), dtype=FP8)


def test_int32_write_loc_into_a_large_pool_is_reported(large_pool):
    loc = torch.tensor([large_pool.num_slots - 1], dtype=torch.int32)
    with kv_layout_guard(large_pool) as guard:
        large_pool.set_kv_buffer(LAYERS - 1, _marked(loc), *_rows(1))
    assert len(guard.index_width_hazards) == 1
    hazard = guard.index_width_hazards[0]
    assert hazard.call == f"TokenMajorMHAPool.set_kv_buffer (layer {LAYERS - 1})"
    assert hazard.pool_elements >= 2**31
    assert "overflows 32-bit offsets" in str(hazard) and "test_shim_index_width.py" in hazard.where


def test_int64_write_loc_into_a_large_pool_is_not_reported(large_pool):
    loc = torch.tensor([large_pool.num_slots - 1], dtype=torch.int64)
    with kv_layout_guard(large_pool) as guard:
        large_pool.set_kv_buffer(0, _marked(loc), *_rows(1))
    assert guard.index_width_hazards == []


def test_kernel_call_with_int32_indices_into_a_large_pool_is_reported(large_pool):
    calls = []

    def decode(q, k_buffer, v_buffer, kv_indices, page_size=1):
        calls.append(kv_indices.dtype)

    k, v = large_pool.get_kv_buffer(LAYERS - 1)
    q = torch.zeros((1, HEADS, DIM))
    with kv_layout_guard(large_pool) as guard:
        checked = guard.kernel(decode)
        checked(q, k, v, torch.tensor([large_pool.num_slots - 1], dtype=torch.int64))
        assert guard.index_width_hazards == []
        checked(q, k, v, kv_indices=torch.tensor([large_pool.num_slots - 1], dtype=torch.int32))
    assert calls == [torch.int64, torch.int32], "the wrapped kernel still runs"
    [hazard] = guard.index_width_hazards
    assert hazard.call == "decode" and hazard.index == "kv_indices="


def test_small_pools_and_unwatched_tensors_are_not_reported():
    pool = TokenMajorMHAPool(
        num_slots=64, page_size=16, layer_num=2, k_heads=1, k_dim=16, v_heads=1, v_dim=16,
        dtype=torch.float16, device="cpu",
    )
    loc = torch.arange(4, dtype=torch.int32)
    with kv_layout_guard(pool) as guard:
        pool.set_kv_buffer(0, _marked(loc), torch.zeros(4, 1, 16), torch.zeros(4, 1, 16))
        guard.kernel(lambda *a: None)(pool.get_key_buffer(0), loc)
        guard.kernel(lambda *a: None)(torch.empty(8), loc)
    assert guard.index_width_hazards == []
