"""The pools' write doors and the layout guard on the device's tensors
(CUDA when present, else CPU; the kernel step runs interpreted there).

Marked locs must land at the bytes the token-major law names, and nowhere
else; unmarked locs are refused by a strict pool before anything is written;
`kv_layout_guard` flags the stride-silent `.view` split on a CUDA pool while
the fixed spelling and the kernel run under it unchanged.
"""

from __future__ import annotations

import pytest
import torch

from kv_gpu_helpers import DEVICE, Layer, make_sequences, marked_loc, synchronize
from runtime_shim import (
    ENTRY_ALIGN_BYTES,
    KVLayoutError,
    KVWriteLoc,
    TokenMajorMHAPool,
    TokenMajorMLAPool,
    kv_layout_guard,
    paged_kv_view,
    paged_row_view,
)
from runtime_shim.kernels import paged_decode_attention

LAYERS, K_HEADS, K_DIM, V_HEADS, V_DIM = 3, 2, 64, 2, 32  # K and V rows of different widths
PAGE_SIZE, NUM_SLOTS = 16, 16 * 32


def _mha_pool(strict=True, dtype=torch.float16):
    return TokenMajorMHAPool(
        num_slots=NUM_SLOTS, page_size=PAGE_SIZE, layer_num=LAYERS, k_heads=K_HEADS, k_dim=K_DIM,
        v_heads=V_HEADS, v_dim=V_DIM, dtype=dtype, device=DEVICE, strict=strict,
    )


def _poison(pool, gen):
    pool.raw.copy_(torch.randint(0, 256, pool.raw.shape, generator=gen, dtype=torch.uint8).to(DEVICE))
    return pool.raw.clone()


def _round_up(x, m):
    return -(-x // m) * m


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_marked_mha_write_lands_at_the_token_major_bytes_and_nowhere_else(dtype):
    gen = torch.Generator().manual_seed(7)
    pool = _mha_pool(dtype=dtype)
    before = _poison(pool, gen)
    itemsize = torch.empty((), dtype=dtype).element_size()
    k_row, v_row = K_HEADS * K_DIM * itemsize, V_HEADS * V_DIM * itemsize
    # The law, derived independently of the pool's layout code.
    entry = _round_up(LAYERS * (k_row + v_row), ENTRY_ALIGN_BYTES)
    assert pool.entry_bytes == entry

    layer = 1
    loc = torch.randperm(NUM_SLOTS, generator=gen)[:40].to(DEVICE)
    k = torch.randn((40, K_HEADS, K_DIM), generator=gen).to(dtype).to(DEVICE)
    v = torch.randn((40, V_HEADS, V_DIM), generator=gen).to(dtype).to(DEVICE)
    pool.set_kv_buffer(Layer(layer), marked_loc(loc), k, v)
    synchronize()

    raw = pool.raw
    touched = torch.zeros_like(raw, dtype=torch.bool)
    for i, t in enumerate(loc.tolist()):
        k_at = t * entry + layer * (k_row + v_row)
        v_at = k_at + k_row
        assert torch.equal(raw[k_at : k_at + k_row].view(dtype), k[i].flatten())
        assert torch.equal(raw[v_at : v_at + v_row].view(dtype), v[i].flatten())
        touched[k_at : v_at + v_row] = True
    assert torch.equal(raw[~touched], before[~touched]), "a write door touched bytes outside its rows"
    # Read back through the public views too.
    assert torch.equal(pool.get_key_buffer(Layer(layer))[loc], k)
    assert torch.equal(pool.get_value_buffer(Layer(layer))[loc], v)


def test_marked_mla_write_lands_in_latent_and_rope_rows():
    gen = torch.Generator().manual_seed(8)
    latent_dim, rope_dim, dtype = 128, 32, torch.bfloat16
    pool = TokenMajorMLAPool(
        num_slots=NUM_SLOTS, page_size=PAGE_SIZE, layer_num=LAYERS, latent_dim=latent_dim,
        rope_dim=rope_dim, dtype=dtype, device=DEVICE,
    )
    before = _poison(pool, gen)
    row_bytes = (latent_dim + rope_dim) * 2
    entry = _round_up(LAYERS * row_bytes, ENTRY_ALIGN_BYTES)
    assert pool.entry_bytes == entry
    layer = 2
    loc = torch.randperm(NUM_SLOTS, generator=gen)[:25].to(DEVICE)
    latent = torch.randn((25, 1, latent_dim), generator=gen).to(dtype).to(DEVICE)
    rope = torch.randn((25, 1, rope_dim), generator=gen).to(dtype).to(DEVICE)
    pool.set_mla_kv_buffer(Layer(layer), marked_loc(loc), latent, rope)
    synchronize()
    touched = torch.zeros_like(pool.raw, dtype=torch.bool)
    for i, t in enumerate(loc.tolist()):
        at = t * entry + layer * row_bytes
        got = pool.raw[at : at + row_bytes].view(dtype)
        assert torch.equal(got, torch.cat([latent[i, 0], rope[i, 0]]))
        touched[at : at + row_bytes] = True
    assert torch.equal(pool.raw[~touched], before[~touched])
    rows = paged_row_view(pool.get_key_buffer(Layer(layer)), PAGE_SIZE)
    first = int(loc[0])
    assert torch.equal(rows[first // PAGE_SIZE, first % PAGE_SIZE, :latent_dim], latent[0, 0])


@pytest.mark.parametrize(
    "loc_info",
    [
        pytest.param(lambda loc: loc, id="bare-tensor"),
        pytest.param(lambda loc: KVWriteLoc(loc), id="kvwriteloc-without-mark"),
        pytest.param(lambda loc: KVWriteLoc(loc, id_space="virtual"), id="kvwriteloc-virtual"),
    ],
)
def test_strict_pool_refuses_unmarked_locs_before_writing(loc_info):
    gen = torch.Generator().manual_seed(9)
    pool = _mha_pool(strict=True)
    before = _poison(pool, gen)
    loc = torch.arange(8, device=DEVICE)
    k = torch.randn((8, K_HEADS, K_DIM), device=DEVICE, dtype=torch.float16)
    v = torch.randn((8, V_HEADS, V_DIM), device=DEVICE, dtype=torch.float16)
    with pytest.raises(AssertionError, match="not marked"):
        pool.set_kv_buffer(Layer(0), loc_info(loc), k, v)
    assert torch.equal(pool.raw, before)


def test_strict_mla_pool_refuses_unmarked_locs():
    pool = TokenMajorMLAPool(
        num_slots=NUM_SLOTS, page_size=PAGE_SIZE, layer_num=LAYERS, latent_dim=64, rope_dim=32,
        dtype=torch.float16, device=DEVICE,
    )
    loc = torch.arange(4, device=DEVICE)
    latent = torch.randn((4, 1, 64), device=DEVICE, dtype=torch.float16)
    rope = torch.randn((4, 1, 32), device=DEVICE, dtype=torch.float16)
    with pytest.raises(AssertionError, match="not marked"):
        pool.set_mla_kv_buffer(Layer(0), loc, latent, rope)


def test_non_strict_pool_writes_and_the_guard_records_the_unmarked_write():
    pool = _mha_pool(strict=False)
    loc = torch.arange(4, device=DEVICE)
    k = torch.randn((4, K_HEADS, K_DIM), device=DEVICE, dtype=torch.float16)
    v = torch.randn((4, V_HEADS, V_DIM), device=DEVICE, dtype=torch.float16)
    with kv_layout_guard(pool) as guard:
        pool.set_kv_buffer(Layer(2), loc, k, v)
    assert torch.equal(pool.get_key_buffer(Layer(2))[loc], k)
    assert len(guard.unmarked_writes) == 1
    assert guard.unmarked_writes[0].door == "set_kv_buffer"


def test_guard_flags_view_split_of_a_cuda_pool_created_inside_it():
    with kv_layout_guard():
        pool = _mha_pool()
        k = pool.get_key_buffer(Layer(0))
        assert k.device.type == DEVICE.type
        with pytest.raises(KVLayoutError, match="KV201"):
            k.view(-1, PAGE_SIZE, K_HEADS, K_DIM)


@pytest.mark.parametrize("page_size", [1, 16])
def test_guard_flags_view_split_of_a_registered_cuda_pool(page_size):
    pool = TokenMajorMHAPool(
        num_slots=64, page_size=page_size, layer_num=2, k_heads=2, k_dim=64, v_heads=2, v_dim=64,
        dtype=torch.float16, device=DEVICE,
    )
    v = pool.get_value_buffer(Layer(1))
    with kv_layout_guard(pool):
        with pytest.raises(KVLayoutError, match="KV201"):
            v.view(-1, page_size, 2, 64)
    # Outside the guard the same call succeeds: that is the silent hazard.
    assert v.view(-1, page_size, 2, 64).shape == (64 // page_size, page_size, 2, 64)


def test_fixed_spelling_and_kernel_run_unchanged_under_the_guard():
    gen = torch.Generator().manual_seed(10)
    pool = TokenMajorMHAPool(
        num_slots=NUM_SLOTS, page_size=PAGE_SIZE, layer_num=2, k_heads=2, k_dim=64, v_heads=2,
        v_dim=64, dtype=torch.float16, device=DEVICE,
    )
    loc = torch.arange(NUM_SLOTS, device=DEVICE)
    k = torch.randn((NUM_SLOTS, 2, 64), generator=gen).half().to(DEVICE)
    v = torch.randn((NUM_SLOTS, 2, 64), generator=gen).half().to(DEVICE)
    pool.set_kv_buffer(Layer(1), marked_loc(loc), k, v)
    page_table, seq_lens = make_sequences(gen, 3, NUM_SLOTS // PAGE_SIZE, PAGE_SIZE, 100)
    q = torch.randn((3, 8, 64), generator=gen).half().to(DEVICE)

    def step():
        kb, vb = pool.get_kv_buffer(Layer(1))
        return paged_decode_attention(
            q, paged_kv_view(kb, PAGE_SIZE, 2, 64), paged_kv_view(vb, PAGE_SIZE, 2, 64), page_table, seq_lens
        )

    outside = step()
    with kv_layout_guard(pool) as guard:
        inside = step()
    assert torch.equal(inside, outside)
    assert guard.unmarked_writes == []
