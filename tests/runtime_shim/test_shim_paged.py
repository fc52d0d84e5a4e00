"""The review thread's stride figures, reproduced on real pools."""

from __future__ import annotations

import pytest
import torch

from runtime_shim import (
    ContiguousMHAPool,
    TokenMajorMHAPool,
    paged_kv_view,
    paged_row_view,
    paged_view,
)


@pytest.fixture
def token_major_k(thread_geometry):
    return TokenMajorMHAPool(**thread_geometry).get_key_buffer(0)


@pytest.fixture
def contiguous_k(thread_geometry):
    return ContiguousMHAPool(**thread_geometry).get_key_buffer(0)


def _geometry(t: torch.Tensor):
    return tuple(t.shape), t.stride()


def test_token_major_layer_view_has_the_entry_as_slot_stride(token_major_k):
    assert _geometry(token_major_k) == ((1024, 4, 128), (32768, 128, 1))


def test_view_and_paged_view_agree_at_page_size_256(token_major_k):
    expected = ((4, 256, 4, 128), (8388608, 32768, 128, 1))
    assert _geometry(token_major_k.view(-1, 256, 4, 128)) == expected
    assert _geometry(paged_view(token_major_k, 256)) == expected
    assert _geometry(paged_kv_view(token_major_k, 256, 4, 128)) == expected


def test_view_on_a_contiguous_buffer_has_heads_times_dim_as_token_stride(contiguous_k):
    assert _geometry(contiguous_k.view(-1, 256, 4, 128)) == ((4, 256, 4, 128), (131072, 512, 128, 1))
    assert _geometry(paged_view(contiguous_k, 256)) == ((4, 256, 4, 128), (131072, 512, 128, 1))


def test_in_page_stride_is_2_layer_num_times_what_the_shape_implies(token_major_k):
    paged = token_major_k.view(-1, 256, 4, 128)
    shape_derived = paged.shape[2] * paged.shape[3]
    assert paged.stride(1) == 2 * 32 * shape_derived


def test_page_size_one_spellings_differ_only_in_stride_1(token_major_k):
    by_view = token_major_k.view(-1, 1, 4, 128)
    by_helper = paged_view(token_major_k, 1)
    assert by_view.shape == by_helper.shape == (1024, 1, 4, 128)
    assert by_view.stride() == (32768, 512, 128, 1)
    assert by_helper.stride() == (32768, 32768, 128, 1)
    # Same bytes are addressed; only the size-1 dim's stride differs, and it
    # moves to stride(2) once the kernel permutes pages and heads.
    assert torch.equal(by_view, by_helper)
    assert by_view.permute(0, 2, 1, 3).stride(2) == 512
    assert by_helper.permute(0, 2, 1, 3).stride(2) == 32768


@pytest.fixture
def eight_head_geometry(thread_geometry):
    return {**thread_geometry, "k_heads": 8, "v_heads": 8, "dtype": torch.bfloat16}


@pytest.mark.parametrize("head_group_num", [2, 4])
def test_head_regroup_view_raises_on_the_strided_view(eight_head_geometry, head_group_num):
    k = TokenMajorMHAPool(**eight_head_geometry).get_key_buffer(0)
    paged = paged_view(k, 256)
    assert _geometry(paged) == ((4, 256, 8, 128), (16777216, 65536, 128, 1))
    assert _geometry(paged.view(-1, 256, 8, 128)) == _geometry(paged)  # head_group_num == 1
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        paged.view(-1, 256, 8 // head_group_num, 128)


@pytest.mark.parametrize("head_group_num", [2, 4])
def test_head_regroup_view_works_on_a_contiguous_buffer(eight_head_geometry, head_group_num):
    paged = paged_view(ContiguousMHAPool(**eight_head_geometry).get_key_buffer(0), 256)
    grouped = paged.view(-1, 256, 8 // head_group_num, 128)
    if head_group_num == 2:
        assert _geometry(grouped) == ((8, 256, 4, 128), (131072, 512, 128, 1))
    assert grouped.shape == (4 * head_group_num, 256, 8 // head_group_num, 128)


def test_reshape_packs_a_copy_that_writes_do_not_reach(token_major_k):
    packed = token_major_k.reshape(-1)
    assert packed.data_ptr() != token_major_k.data_ptr()
    packed.fill_(1)
    assert int(token_major_k.abs().sum()) == 0


def test_paged_row_view_pages_whole_rows(token_major_k):
    rows = paged_row_view(token_major_k, 4)
    assert _geometry(rows) == ((256, 4, 512), (4 * 32768, 32768, 1))
    assert rows.data_ptr() == token_major_k.data_ptr()


def test_paged_kv_view_accepts_a_flat_row_buffer():
    flat = torch.zeros(8, 2 * 16)
    view = paged_kv_view(flat, 4, 2, 16)
    assert _geometry(view) == ((2, 4, 2, 16), (128, 32, 16, 1))


def test_paged_view_keeps_the_storage_offset():
    base = torch.arange(40.0).view(10, 4)[2:]
    paged = paged_view(base, 2)
    assert torch.equal(paged[0, 0], base[0])
    assert torch.equal(paged[3, 1], base[7])


@pytest.mark.parametrize(
    "call",
    [
        lambda t: paged_view(t, 3),
        lambda t: paged_row_view(t, 3),
        lambda t: paged_kv_view(t, 3, 4, 128),
    ],
    ids=["paged_view", "paged_row_view", "paged_kv_view"],
)
def test_slot_count_not_divisible_by_page_size_is_refused(token_major_k, call):
    with pytest.raises(ValueError, match=r"1024 slots are not divisible into pages of 3 \(1024 % 3 = 1\)"):
        call(token_major_k)


def test_non_positive_page_size_is_refused(token_major_k):
    with pytest.raises(ValueError, match="page_size must be >= 1, got 0"):
        paged_view(token_major_k, 0)


@pytest.mark.parametrize("layer", [0, 31])
def test_a_token_major_layer_view_is_never_contiguous_so_a_contiguity_test_keeps_it_out(thread_geometry, layer):
    # KV201 clears a view past `if not k.is_contiguous(): return`: the pool's views never get there...
    pool = TokenMajorMHAPool(**thread_geometry)
    assert not pool.get_key_buffer(layer).is_contiguous()
    assert not pool.get_value_buffer(layer).is_contiguous()


@pytest.mark.parametrize("page_size", [1, 4, 256])
def test_on_a_contiguous_buffer_view_and_helper_agree_at_every_page_size(contiguous_k, page_size):
    # ...and what does is split exactly by `.view`, page size 1 included.
    assert _geometry(contiguous_k.view(-1, page_size, 4, 128)) == _geometry(paged_kv_view(contiguous_k, page_size, 4, 128))
