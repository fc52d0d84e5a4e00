"""MHA paged decode on a real token-major pool against a contiguous one.

Identical page contents go through the write doors of a `TokenMajorMHAPool`
and a `ContiguousMHAPool`. The stride-aware kernel must give bit-identical
output over both (the fixed spelling, `paged_kv_view`, costs nothing in
correctness), and both must match the float32 torch reference. The
stride-naive kernel over `.view(-1, page_size, H, D)` (the spelling KV201
flags) must corrupt the token-major output while staying right on the
contiguous pool: the failure is real, silent and specific to the layout.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from kv_gpu_helpers import CORRUPTION, DEVICE, DTYPES, Layer, fill_mha_pools, make_sequences, rel_err, sized, tolerance
from runtime_shim import ContiguousMHAPool, TokenMajorMHAPool, paged_kv_view
from runtime_shim.kernels import (
    paged_decode_attention,
    paged_decode_attention_reference,
    paged_decode_attention_reference_stride_naive,
    paged_decode_attention_stride_naive,
)

LAYER_NUM = sized(4, 3)
KV_HEADS = 2
GROUP = 4  # grouped-query: 4 query heads share each KV head
BATCH = sized(5, 2)
MAX_LEN = sized(300, 40)
# Compiled: every page size x head dim x dtype. Interpreted: page sizes 1 and
# 16, both dtypes, both head dims, in two cases.
CASES = sized(
    list(itertools.product((1, 16, 64), (64, 128), DTYPES)),
    [(1, 64, DTYPES[0]), (16, 128, DTYPES[1])],
)
LAYERS = sized([0, LAYER_NUM - 1], [LAYER_NUM - 1])


def _ids(case):
    ps, hd, dtype = case
    return f"ps{ps}-hd{hd}-{str(dtype).removeprefix('torch.')}"


@pytest.fixture(scope="module", params=CASES, ids=[_ids(c) for c in CASES])
def filled(request):
    page_size, head_dim, dtype = request.param
    gen = torch.Generator().manual_seed(1000 + page_size * 7 + head_dim)
    num_pages = BATCH * (-(-MAX_LEN // page_size)) + 3
    num_slots = num_pages * page_size
    dims = dict(
        num_slots=num_slots,
        page_size=page_size,
        layer_num=LAYER_NUM,
        k_heads=KV_HEADS,
        k_dim=head_dim,
        v_heads=KV_HEADS,
        v_dim=head_dim,
        dtype=dtype,
        device=DEVICE,
    )
    token_major = TokenMajorMHAPool(**dims, strict=True)
    contiguous = ContiguousMHAPool(**dims)
    fill_mha_pools(
        [token_major, contiguous], gen,
        layer_num=LAYER_NUM, num_slots=num_slots, k_heads=KV_HEADS, k_dim=head_dim,
        v_heads=KV_HEADS, v_dim=head_dim, dtype=dtype,
    )
    page_table, seq_lens = make_sequences(gen, BATCH, num_pages, page_size, MAX_LEN)
    q = torch.randn((BATCH, KV_HEADS * GROUP, head_dim), generator=gen).to(dtype).to(DEVICE)
    return dict(
        token_major=token_major, contiguous=contiguous, page_table=page_table,
        seq_lens=seq_lens, q=q, page_size=page_size, head_dim=head_dim, dtype=dtype,
    )


def _paged(pool, layer, f):
    k, v = pool.get_kv_buffer(layer)
    ps, hd = f["page_size"], f["head_dim"]
    return paged_kv_view(k, ps, KV_HEADS, hd), paged_kv_view(v, ps, KV_HEADS, hd)


@pytest.mark.parametrize("layer_id", LAYERS)
def test_token_major_view_has_the_entry_as_in_page_stride(filled, layer_id):
    k_tm, _ = _paged(filled["token_major"], Layer(layer_id), filled)
    k_c, _ = _paged(filled["contiguous"], Layer(layer_id), filled)
    hd = filled["head_dim"]
    assert k_tm.shape == k_c.shape
    assert k_c.stride(1) == KV_HEADS * hd
    # The token-major slot stride is the whole entry: every layer's K and V.
    assert k_tm.stride(1) == filled["token_major"].entry_bytes // k_tm.element_size()
    assert k_tm.stride(1) >= 2 * LAYER_NUM * KV_HEADS * hd


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_aware_kernel_is_bit_identical_across_layouts(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    out_tm = paged_decode_attention(f["q"], *_paged(f["token_major"], layer, f), f["page_table"], f["seq_lens"])
    out_c = paged_decode_attention(f["q"], *_paged(f["contiguous"], layer, f), f["page_table"], f["seq_lens"])
    assert torch.isfinite(out_tm.float()).all()
    assert torch.equal(out_tm, out_c)


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_aware_kernel_matches_the_reference(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    for pool in (f["token_major"], f["contiguous"]):
        k, v = _paged(pool, layer, f)
        out = paged_decode_attention(f["q"], k, v, f["page_table"], f["seq_lens"])
        ref = paged_decode_attention_reference(f["q"], k, v, f["page_table"], f["seq_lens"])
        assert rel_err(out, ref) < tolerance(f["dtype"]), type(pool).__name__


def test_forced_split_counts_agree(filled):
    # One split and several must combine to the same answer (within rounding).
    f, layer = filled, Layer(1)
    k, v = _paged(f["token_major"], layer, f)
    one = paged_decode_attention(f["q"], k, v, f["page_table"], f["seq_lens"], num_splits=1)
    many = paged_decode_attention(f["q"], k, v, f["page_table"], f["seq_lens"], num_splits=4)
    assert rel_err(many, one) < tolerance(f["dtype"])


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_naive_kernel_corrupts_token_major_view_silently(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    ps, hd = f["page_size"], f["head_dim"]
    k_raw, v_raw = f["token_major"].get_kv_buffer(layer)
    # The spelling KV201 flags: it does not raise on the strided view.
    k_view = k_raw.view(-1, ps, KV_HEADS, hd)
    v_view = v_raw.view(-1, ps, KV_HEADS, hd)
    ref = paged_decode_attention_reference(f["q"], *_paged(f["token_major"], layer, f), f["page_table"], f["seq_lens"])
    out = paged_decode_attention_stride_naive(f["q"], k_view, v_view, f["page_table"], f["seq_lens"])
    assert torch.isfinite(out.float()).all(), "the corruption is silent: no NaN, no exception"
    assert rel_err(out, ref) > CORRUPTION
    # ... and it is exactly the shape-derived misread, not some other failure.
    naive_ref = paged_decode_attention_reference_stride_naive(f["q"], k_view, v_view, f["page_table"], f["seq_lens"])
    assert rel_err(out, naive_ref) < tolerance(f["dtype"])


@pytest.mark.parametrize("layer_id", LAYERS)
def test_stride_naive_kernel_is_right_on_the_contiguous_pool(filled, layer_id):
    f, layer = filled, Layer(layer_id)
    ps, hd = f["page_size"], f["head_dim"]
    k_raw, v_raw = f["contiguous"].get_kv_buffer(layer)
    k_view = k_raw.view(-1, ps, KV_HEADS, hd)
    v_view = v_raw.view(-1, ps, KV_HEADS, hd)
    naive = paged_decode_attention_stride_naive(f["q"], k_view, v_view, f["page_table"], f["seq_lens"])
    aware = paged_decode_attention(f["q"], *_paged(f["token_major"], layer, f), f["page_table"], f["seq_lens"])
    ref = paged_decode_attention_reference(f["q"], k_view, v_view, f["page_table"], f["seq_lens"])
    assert torch.equal(naive, aware)
    assert rel_err(naive, ref) < tolerance(f["dtype"])
