"""MLA paged decode (one latent + rope row per token) on token-major vs
contiguous pools: the same parity and hazard checks as the MHA module, over
`paged_row_view` (the fixed spelling) and `.view(-1, page_size, row)` (the one
KV201 flags)."""

from __future__ import annotations

import itertools

import pytest
import torch

from kv_gpu_helpers import CORRUPTION, DEVICE, DTYPES, Layer, fill_mla_pools, make_sequences, rel_err, sized, tolerance
from runtime_shim import ContiguousMLAPool, TokenMajorMLAPool, paged_row_view
from runtime_shim.kernels import (
    paged_mla_decode_attention,
    paged_mla_decode_attention_reference,
    paged_mla_decode_attention_reference_stride_naive,
    paged_mla_decode_attention_stride_naive,
)

LAYER_NUM = 3
Q_HEADS = sized(16, 4)
BATCH = sized(4, 2)
MAX_LEN = sized(200, 40)
CASES = sized(
    list(itertools.product((1, 16, 64), ((128, 32), (256, 64)), DTYPES)),
    [(1, (128, 32), DTYPES[0]), (16, (128, 32), DTYPES[1])],
)
LAYERS = sized([0, LAYER_NUM - 1], [LAYER_NUM - 1])


def _ids(case):
    ps, (latent, rope), dtype = case
    return f"ps{ps}-latent{latent}-rope{rope}-{str(dtype).removeprefix('torch.')}"


@pytest.fixture(scope="module", params=CASES, ids=[_ids(c) for c in CASES])
def filled(request):
    page_size, (latent_dim, rope_dim), dtype = request.param
    gen = torch.Generator().manual_seed(2000 + page_size * 5 + latent_dim)
    num_pages = BATCH * (-(-MAX_LEN // page_size)) + 2
    num_slots = num_pages * page_size
    dims = dict(
        num_slots=num_slots, page_size=page_size, layer_num=LAYER_NUM,
        latent_dim=latent_dim, rope_dim=rope_dim, dtype=dtype, device=DEVICE,
    )
    token_major = TokenMajorMLAPool(**dims, strict=True)
    contiguous = ContiguousMLAPool(**dims)
    fill_mla_pools(
        [token_major, contiguous], gen, layer_num=LAYER_NUM, num_slots=num_slots,
        latent_dim=latent_dim, rope_dim=rope_dim, dtype=dtype,
    )
    page_table, seq_lens = make_sequences(gen, BATCH, num_pages, page_size, MAX_LEN)
    q = torch.randn((BATCH, Q_HEADS, latent_dim + rope_dim), generator=gen).to(dtype).to(DEVICE)
    return dict(
        token_major=token_major, contiguous=contiguous, page_table=page_table, seq_lens=seq_lens,
        q=q, page_size=page_size, latent_dim=latent_dim, rope_dim=rope_dim, dtype=dtype,
    )


def _rows(pool, layer, f):
    return paged_row_view(pool.get_key_buffer(layer), f["page_size"])


def _attend(f, rows):
    return paged_mla_decode_attention(f["q"], rows, f["page_table"], f["seq_lens"], latent_dim=f["latent_dim"])


def _reference(f, rows):
    return paged_mla_decode_attention_reference(f["q"], rows, f["page_table"], f["seq_lens"], latent_dim=f["latent_dim"])


@pytest.mark.parametrize("layer_id", LAYERS)
def test_row_view_keeps_the_entry_stride(filled, layer_id):
    rows = _rows(filled["token_major"], Layer(layer_id), filled)
    row = filled["latent_dim"] + filled["rope_dim"]
    assert rows.shape[1:] == (filled["page_size"], row)
    assert rows.stride(1) == filled["token_major"].entry_bytes // rows.element_size()
    assert rows.stride(1) >= LAYER_NUM * row


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_aware_mla_kernel_is_bit_identical_across_layouts(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    out_tm = _attend(f, _rows(f["token_major"], layer, f))
    out_c = _attend(f, _rows(f["contiguous"], layer, f))
    assert out_tm.shape == (BATCH, Q_HEADS, f["latent_dim"])
    assert torch.isfinite(out_tm.float()).all()
    assert torch.equal(out_tm, out_c)


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_aware_mla_kernel_matches_the_reference(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    for pool in (f["token_major"], f["contiguous"]):
        rows = _rows(pool, layer, f)
        assert rel_err(_attend(f, rows), _reference(f, rows)) < tolerance(f["dtype"]), type(pool).__name__


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_naive_mla_kernel_corrupts_token_major_view_silently(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    row = f["latent_dim"] + f["rope_dim"]
    view = f["token_major"].get_key_buffer(layer).view(-1, f["page_size"], row)
    out = paged_mla_decode_attention_stride_naive(f["q"], view, f["page_table"], f["seq_lens"], latent_dim=f["latent_dim"])
    ref = _reference(f, _rows(f["token_major"], layer, f))
    assert torch.isfinite(out.float()).all()
    assert rel_err(out, ref) > CORRUPTION
    naive_ref = paged_mla_decode_attention_reference_stride_naive(
        f["q"], view, f["page_table"], f["seq_lens"], latent_dim=f["latent_dim"]
    )
    assert rel_err(out, naive_ref) < tolerance(f["dtype"])


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_naive_mla_kernel_is_right_on_the_contiguous_pool(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    row = f["latent_dim"] + f["rope_dim"]
    view = f["contiguous"].get_key_buffer(layer).view(-1, f["page_size"], row)
    naive = paged_mla_decode_attention_stride_naive(f["q"], view, f["page_table"], f["seq_lens"], latent_dim=f["latent_dim"])
    aware = _attend(f, _rows(f["token_major"], layer, f))
    assert torch.equal(naive, aware)
    assert rel_err(naive, _reference(f, view)) < tolerance(f["dtype"])
