"""The token-major byte law, checked against a second, independent derivation."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_shim import (
    ENTRY_ALIGN_BYTES,
    DenseEntryLayout,
    DensePart,
    build_dense_views,
    mha_entry_layout,
    mla_entry_layout,
    paged_view,
)


def _raw(layout: DenseEntryLayout, num_slots: int) -> torch.Tensor:
    return torch.zeros(num_slots * layout.entry_bytes, dtype=torch.uint8)


def _page_slot_byte(page: int, slot: int, layer: int, *, page_size: int, entry: int,
                    rows_before_layer: int, part_offset: int) -> int:
    """Where (page, slot)'s row lives, derived from pages of entries rather
    than from the view builder's slot-stride formula."""
    page_bytes = page_size * entry
    return page * page_bytes + slot * entry + layer * rows_before_layer + part_offset


def _byte_of(view_row: torch.Tensor, raw: torch.Tensor) -> int:
    return view_row.data_ptr() - raw.data_ptr()


def _check_byte_law(layout: DenseEntryLayout, first: str, second: str, page_size: int,
                    num_pages: int) -> None:
    num_slots = page_size * num_pages
    raw = _raw(layout, num_slots)
    a, b = layout.part(first), layout.part(second)
    per_layer = a.row_bytes + b.row_bytes
    for part, part_offset in ((a, 0), (b, a.row_bytes)):
        views = build_dense_views(raw, layout=layout, part_name=part.name, num_slots=num_slots)
        assert len(views) == part.layer_num
        for layer, view in enumerate(views):
            assert tuple(view.shape) == (num_slots, *part.row_shape)
            paged = paged_view(view, page_size)
            for t in range(num_slots):
                law = t * layout.entry_bytes + layer * per_layer + part_offset
                assert _byte_of(view[t], raw) == law
                page, slot = divmod(t, page_size)
                independent = _page_slot_byte(
                    page, slot, layer, page_size=page_size, entry=layout.entry_bytes,
                    rows_before_layer=per_layer, part_offset=part_offset,
                )
                assert independent == law
                assert _byte_of(paged[page, slot], raw) == independent
            # A value written through the view must appear at the law's bytes.
            marker = torch.arange(1, math.prod(part.row_shape) + 1, dtype=part.dtype)
            t = num_slots - 1
            view[t] = marker.view(part.row_shape)
            start = t * layout.entry_bytes + layer * per_layer + part_offset
            got = raw[start : start + part.row_bytes].view(part.dtype)
            assert torch.equal(got, marker)
            view[t] = 0


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize(
    "k_heads,k_dim,v_heads,v_dim",
    [(2, 16, 2, 16), (2, 16, 1, 8), (1, 24, 3, 32)],
    ids=["uniform", "narrow-v", "wide-v"],
)
def test_mha_byte_law_matches_page_slot_description(page_size, k_heads, k_dim, v_heads, v_dim):
    layout = mha_entry_layout(3, k_heads, k_dim, v_heads, v_dim, torch.float16)
    _check_byte_law(layout, "k", "v", page_size, num_pages=3)


@pytest.mark.parametrize("page_size", [1, 4])
def test_mla_byte_law_matches_page_slot_description(page_size):
    layout = mla_entry_layout(3, latent_dim=64, rope_dim=16, dtype=torch.bfloat16)
    _check_byte_law(layout, "latent", "rope", page_size, num_pages=3)


_ROW_DIMS_FP16 = st.integers(1, 6).map(lambda n: 8 * n)  # 16-byte multiples in fp16


@settings(max_examples=60, deadline=None)
@given(
    layer_num=st.integers(1, 4),
    k_heads=st.integers(1, 3),
    k_dim=_ROW_DIMS_FP16,
    v_heads=st.integers(1, 3),
    v_dim=_ROW_DIMS_FP16,
    page_size=st.sampled_from([1, 2, 4]),
    num_pages=st.integers(1, 3),
)
def test_byte_law_holds_for_random_mha_layouts(layer_num, k_heads, k_dim, v_heads, v_dim,
                                               page_size, num_pages):
    layout = mha_entry_layout(layer_num, k_heads, k_dim, v_heads, v_dim, torch.float16)
    assert layout.entry_bytes % ENTRY_ALIGN_BYTES == 0
    assert layout.entry_bytes >= layer_num * 2 * (k_heads * k_dim + v_heads * v_dim)
    _check_byte_law(layout, "k", "v", page_size, num_pages)


@settings(max_examples=30, deadline=None)
@given(
    layer_num=st.integers(1, 4),
    latent_dim=st.integers(1, 8).map(lambda n: 4 * n),
    rope_dim=st.integers(1, 4).map(lambda n: 4 * n),
    page_size=st.sampled_from([1, 4]),
)
def test_byte_law_holds_for_random_mla_layouts(layer_num, latent_dim, rope_dim, page_size):
    layout = mla_entry_layout(layer_num, latent_dim, rope_dim, torch.float32)
    _check_byte_law(layout, "latent", "rope", page_size, num_pages=2)


def _byte_set(view: torch.Tensor, raw: torch.Tensor) -> set:
    row = view[0].numel() * view.element_size()
    return {
        _byte_of(view[t], raw) + i for t in range(view.shape[0]) for i in range(row)
    }


def test_views_of_different_layers_and_parts_never_alias():
    layout = mha_entry_layout(4, 1, 8, 2, 16, torch.float16)
    raw = _raw(layout, 8)
    views = [
        v
        for name in ("k", "v")
        for v in build_dense_views(raw, layout=layout, part_name=name, num_slots=8)
    ]
    footprints = [_byte_set(v, raw) for v in views]
    for i, a in enumerate(footprints):
        for b in footprints[i + 1 :]:
            assert not a & b
    # And through the data itself: writing one layer leaves every other alone.
    views[0].fill_(7)
    assert all(int(v.abs().sum()) == 0 for v in views[1:])


def test_short_raw_buffer_fails_loudly():
    layout = mha_entry_layout(2, 1, 8, 1, 8, torch.float16)
    raw = torch.zeros(4 * layout.entry_bytes - 1, dtype=torch.uint8)
    with pytest.raises(ValueError, match=rf"{raw.numel()} bytes.*4 slots.*{4 * layout.entry_bytes}"):
        build_dense_views(raw, layout=layout, part_name="k", num_slots=4)


def test_unknown_part_name_is_a_key_error():
    layout = mla_entry_layout(1, 8, 8, torch.float32)
    with pytest.raises(KeyError, match="'k'.*'latent', 'rope'"):
        build_dense_views(_raw(layout, 1), layout=layout, part_name="k", num_slots=1)


def _part(name="a", *, layers=1, row=(8,), offset=0, stride=0, dtype=torch.float16):
    return DensePart(name, layers, row, dtype, offset, stride)


def test_validate_rejects_overlapping_parts():
    layout = DenseEntryLayout((_part("k"), _part("v", offset=0)), 32)
    with pytest.raises(ValueError, match=r"'k' layer 0 bytes \[0, 16\) overlaps part 'v'"):
        layout.validate()


def test_validate_rejects_a_part_overlapping_itself_across_layers():
    layout = DenseEntryLayout((_part("k", layers=2, row=(16,), stride=16),), 64)
    with pytest.raises(ValueError, match=r"'k' layer 0 bytes \[0, 32\) overlaps part 'k' layer 1"):
        layout.validate()


def test_validate_rejects_a_part_outside_the_entry():
    layout = DenseEntryLayout((_part("v", layers=2, offset=16, stride=32),), 32)
    with pytest.raises(ValueError, match=r"'v': layer 1 spans bytes \[48, 64\), outside the entry of 32"):
        layout.validate()


@pytest.mark.parametrize(
    "part,label,value",
    [
        (_part("k", row=(4,)), "row", 8),
        (_part("k", offset=8), "offset", 8),
        (_part("k", layers=2, stride=24), "layer stride", 24),
    ],
)
def test_validate_rejects_unaligned_rows_offsets_and_strides(part, label, value):
    layout = DenseEntryLayout((part,), 64)
    with pytest.raises(ValueError, match=rf"'k': {label} of {value} bytes .* ROW_ALIGN_BYTES=16"):
        layout.validate()


def test_validate_rejects_an_unaligned_entry():
    layout = DenseEntryLayout((_part("k"),), 48)
    with pytest.raises(ValueError, match="entry_bytes=48 .* ENTRY_ALIGN_BYTES=32"):
        layout.validate()


def test_builders_refuse_rows_not_16_byte_aligned():
    # 4 fp16 elements = 8 bytes: the per-rank row a unified pool cannot hold.
    with pytest.raises(ValueError, match="'k': row of 8 bytes"):
        mha_entry_layout(2, 1, 4, 1, 8, torch.float16)


def test_entry_is_padded_to_the_entry_alignment():
    # One layer of 16-byte K and V rows is 32 bytes; three layers are 96.
    # A single 16-byte K plus 32-byte V is 48 bytes, padded to 64.
    assert mha_entry_layout(3, 1, 8, 1, 8, torch.float16).entry_bytes == 96
    assert mha_entry_layout(1, 1, 8, 1, 16, torch.float16).entry_bytes == 64
