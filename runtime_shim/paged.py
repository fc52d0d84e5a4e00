"""Paged views that keep the buffer's own strides.

Under the token-major layout the slot stride of a per-layer view is the whole
entry, not ``heads * dim``. ``x.view(-1, page_size, H, D)`` on such a view does
not raise: it returns the expected shape with in-page token stride
``entry_elems``, and a kernel that derives strides from the shape reads bytes
``2 * layer_num`` times too close together. At ``page_size == 1`` ``.view``
gives the size-1 page dim the row stride rather than the slot stride, which
survives a later permute into a position no stride canonicalisation repairs.
These helpers build the paged view with ``as_strided`` from the buffer's own
strides, so the slot stride is carried explicitly on token-major and
contiguous buffers alike.
"""

from __future__ import annotations

import torch

from runtime_shim._hooks import trusted


def _check_divisible(num_slots: int, page_size: int) -> None:
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    if num_slots % page_size:
        raise ValueError(
            f"{num_slots} slots are not divisible into pages of {page_size} "
            f"({num_slots} % {page_size} = {num_slots % page_size})"
        )


def paged_view(flat: torch.Tensor, page_size: int) -> torch.Tensor:
    """``(num_slots, *rest)`` -> ``(num_slots // page_size, page_size, *rest)``.

    The page stride is ``page_size`` slot strides and the in-page stride is
    the slot stride itself, whatever that is.
    """
    num_slots = int(flat.shape[0])
    _check_divisible(num_slots, page_size)
    slot_stride = flat.stride(0)
    with trusted():
        return flat.as_strided(
            (num_slots // page_size, page_size, *flat.shape[1:]),
            (slot_stride * page_size, slot_stride, *flat.stride()[1:]),
            flat.storage_offset(),
        )


def paged_row_view(flat: torch.Tensor, page_size: int) -> torch.Tensor:
    """Pages of whole rows: ``(num_slots, ...)`` -> ``(pages, page_size, row)``."""
    num_slots = int(flat.shape[0])
    _check_divisible(num_slots, page_size)
    with trusted():
        rows = flat.view(num_slots, -1)
    return paged_view(rows, page_size)


def paged_kv_view(
    buf: torch.Tensor, page_size: int, head_num: int, head_dim: int
) -> torch.Tensor:
    """Pages of a K or V buffer: ``(num_slots, ...)`` -> ``(pages, page_size, H, D)``."""
    num_slots = int(buf.shape[0])
    _check_divisible(num_slots, page_size)
    with trusted():
        heads = buf.view(num_slots, head_num, head_dim)
    return paged_view(heads, page_size)
