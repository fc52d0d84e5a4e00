"""The token-major entry: one slot's bytes hold every layer's K and V.

A page-major pool gives each layer a contiguous buffer, so a layer's row for
token ``t`` sits at ``t * row``. The token-major pool instead packs one *entry*
per slot, ``[K_0 | V_0 | K_1 | V_1 | ...]``, and every per-layer view is a
strided tensor whose slot stride is the whole entry::

    byte(t, l, K) = t * entry_bytes + l * (k_row + v_row)
    byte(t, l, V) = byte(t, l, K) + k_row

so a kernel-facing id is the physical token id, and K and V rows may differ in
width (only the part offsets change, never the slot stride). This module holds
the byte map (`DensePart`, `DenseEntryLayout`), the two builders the pools use
(`mha_entry_layout`, `mla_entry_layout`) and `build_dense_views`, which turns a
raw byte buffer into per-layer views that obey the law above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch

# The store kernels write rows with 16-byte vector stores, so every row, part
# offset and layer stride must keep that alignment.
ROW_ALIGN_BYTES = 16
# Entries are padded so that consecutive slots stay aligned for the widest
# (32-byte) vector accesses the copy paths use.
ENTRY_ALIGN_BYTES = 32


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    """Element strides of a C-contiguous tensor of ``shape``."""
    strides: List[int] = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= int(size)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class DensePart:
    """One row family inside the entry (K, V, an MLA latent, ...).

    Layer ``l``'s row starts at ``offset_bytes + l * layer_stride_bytes`` within
    the entry and has ``row_shape`` elements of ``dtype``.
    """

    name: str
    layer_num: int
    row_shape: Tuple[int, ...]
    dtype: torch.dtype
    offset_bytes: int
    layer_stride_bytes: int

    @property
    def row_bytes(self) -> int:
        return math.prod(self.row_shape) * _itemsize(self.dtype)

    def layer_span(self, layer: int) -> Tuple[int, int]:
        """Half-open byte range ``[start, end)`` of layer ``layer``'s row."""
        start = self.offset_bytes + layer * self.layer_stride_bytes
        return start, start + self.row_bytes


@dataclass(frozen=True)
class DenseEntryLayout:
    """The byte map of one slot: its parts and the entry size (slot stride)."""

    parts: Tuple[DensePart, ...]
    entry_bytes: int

    def part(self, name: str) -> DensePart:
        for part in self.parts:
            if part.name == name:
                return part
        known = ", ".join(repr(p.name) for p in self.parts)
        raise KeyError(f"no part named {name!r} in this layout (parts: {known})")

    def validate(self) -> "DenseEntryLayout":
        """Raise ``ValueError`` unless every part is aligned, inside, and alone.

        Returns ``self`` so builders can end with ``return layout.validate()``.
        """
        if self.entry_bytes <= 0 or self.entry_bytes % ENTRY_ALIGN_BYTES:
            raise ValueError(
                f"entry_bytes={self.entry_bytes} must be a positive multiple of "
                f"ENTRY_ALIGN_BYTES={ENTRY_ALIGN_BYTES}"
            )
        spans: List[Tuple[int, int, str, int]] = []
        for part in self.parts:
            _check_part_alignment(part)
            if part.layer_num < 1:
                raise ValueError(
                    f"part {part.name!r}: layer_num={part.layer_num} must be >= 1"
                )
            if part.offset_bytes < 0:
                raise ValueError(
                    f"part {part.name!r}: offset_bytes={part.offset_bytes} is negative"
                )
            last_start, last_end = part.layer_span(part.layer_num - 1)
            if last_end > self.entry_bytes:
                raise ValueError(
                    f"part {part.name!r}: layer {part.layer_num - 1} spans bytes "
                    f"[{last_start}, {last_end}), outside the entry of "
                    f"{self.entry_bytes} bytes"
                )
            spans.extend(
                (*part.layer_span(layer), part.name, layer)
                for layer in range(part.layer_num)
            )
        spans.sort()
        for (a_start, a_end, a_name, a_layer), (b_start, b_end, b_name, b_layer) in zip(
            spans, spans[1:]
        ):
            if b_start < a_end:
                raise ValueError(
                    f"part {a_name!r} layer {a_layer} bytes [{a_start}, {a_end}) "
                    f"overlaps part {b_name!r} layer {b_layer} bytes "
                    f"[{b_start}, {b_end})"
                )
        return self


def _itemsize(dtype: torch.dtype) -> int:
    return dtype.itemsize


def _check_part_alignment(part: DensePart) -> None:
    for label, value in (
        ("row", part.row_bytes),
        ("offset", part.offset_bytes),
        ("layer stride", part.layer_stride_bytes),
    ):
        if value % ROW_ALIGN_BYTES:
            raise ValueError(
                f"part {part.name!r}: {label} of {value} bytes is not a multiple "
                f"of ROW_ALIGN_BYTES={ROW_ALIGN_BYTES}"
            )


def _interleaved_layout(
    layer_num: int,
    first: Tuple[str, Tuple[int, ...]],
    second: Tuple[str, Tuple[int, ...]],
    dtype: torch.dtype,
) -> DenseEntryLayout:
    (first_name, first_shape), (second_name, second_shape) = first, second
    itemsize = _itemsize(dtype)
    first_row = math.prod(first_shape) * itemsize
    second_row = math.prod(second_shape) * itemsize
    layer_stride = first_row + second_row
    parts = (
        DensePart(first_name, layer_num, first_shape, dtype, 0, layer_stride),
        DensePart(second_name, layer_num, second_shape, dtype, first_row, layer_stride),
    )
    entry = _round_up(layer_num * layer_stride, ENTRY_ALIGN_BYTES)
    return DenseEntryLayout(parts, entry).validate()


def mha_entry_layout(
    layer_num: int,
    k_heads: int,
    k_dim: int,
    v_heads: int,
    v_dim: int,
    dtype: torch.dtype,
) -> DenseEntryLayout:
    """Entry ``[K_0 | V_0 | K_1 | V_1 | ...]`` with parts ``"k"`` and ``"v"``."""
    return _interleaved_layout(
        layer_num, ("k", (k_heads, k_dim)), ("v", (v_heads, v_dim)), dtype
    )


def mla_entry_layout(
    layer_num: int, latent_dim: int, rope_dim: int, dtype: torch.dtype
) -> DenseEntryLayout:
    """Entry ``[latent_0 | rope_0 | latent_1 | rope_1 | ...]``.

    Parts ``"latent"`` and ``"rope"`` have a single head, as MLA pools store
    one compressed row per token; latent and rope of a layer are adjacent, so
    one row view can cover both (what MLA kernels read as the key).
    """
    return _interleaved_layout(
        layer_num, ("latent", (1, latent_dim)), ("rope", (1, rope_dim)), dtype
    )


def dense_part_views(
    raw: torch.Tensor, part: DensePart, *, entry_bytes: int, num_slots: int
) -> List[torch.Tensor]:
    """Per-layer ``(num_slots, *part.row_shape)`` views of ``part`` over ``raw``.

    Lower level than `build_dense_views`: ``part`` need not belong to a
    validated layout, which lets a pool view two adjacent parts as one row.
    """
    if raw.dtype != torch.uint8 or raw.dim() != 1 or not raw.is_contiguous():
        raise ValueError(
            f"raw must be a contiguous 1-D uint8 buffer, got dtype={raw.dtype} "
            f"shape={tuple(raw.shape)}"
        )
    needed = num_slots * entry_bytes
    if raw.numel() < needed:
        raise ValueError(
            f"raw buffer holds {raw.numel()} bytes, but {num_slots} slots of "
            f"{entry_bytes}-byte entries need {needed}"
        )
    itemsize = _itemsize(part.dtype)
    if entry_bytes % itemsize or part.offset_bytes % itemsize or part.layer_stride_bytes % itemsize:
        raise ValueError(
            f"part {part.name!r}: entry {entry_bytes}, offset {part.offset_bytes} "
            f"and layer stride {part.layer_stride_bytes} bytes must be multiples "
            f"of the {itemsize}-byte element"
        )
    if (raw.storage_offset() % itemsize) != 0:
        raise ValueError(
            f"raw starts at byte {raw.storage_offset()} of its storage, not a "
            f"multiple of the {itemsize}-byte element"
        )
    typed = raw[:needed].view(part.dtype)
    size = (num_slots, *part.row_shape)
    stride = (entry_bytes // itemsize, *contiguous_strides(part.row_shape))
    return [
        typed.as_strided(
            size,
            stride,
            typed.storage_offset()
            + (part.offset_bytes + layer * part.layer_stride_bytes) // itemsize,
        )
        for layer in range(part.layer_num)
    ]


def build_dense_views(
    raw: torch.Tensor, *, layout: DenseEntryLayout, part_name: str, num_slots: int
) -> List[torch.Tensor]:
    """Per-layer views of one part, indexed by the physical token id.

    A view is ``num_slots`` entries long whatever the page size: pages only
    group consecutive slots, they do not change where a slot lives.
    """
    layout.validate()
    return dense_part_views(
        raw, layout.part(part_name), entry_bytes=layout.entry_bytes, num_slots=num_slots
    )
