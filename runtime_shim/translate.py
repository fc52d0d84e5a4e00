"""Virtual token ids to physical ones, and the batch mark that records it.

The allocator hands out virtual ids; a page table maps each virtual page to a
physical page. Under token-major views the physical token id is the
kernel-facing id, so translation is one gather per batch:
``physical = page_table[v // page_size] * page_size + v % page_size``.
`KVIndexTranslator.rebind_write_loc` does it once on the batch and marks
``out_cache_loc_id_space = "kernel"``; that mark is the only thing that lets a
strict pool tell a translated loc from an untranslated one.
"""

from __future__ import annotations

from typing import Any

import torch

from runtime_shim.write_loc import KERNEL, VIRTUAL


def translate_loc(loc: torch.Tensor, page_table: torch.Tensor, page_size: int) -> torch.Tensor:
    """Physical token ids for virtual ``loc``; negative (padding) ids pass through.

    Padding slots carry ``-1``; gathering the page table with them would wrap
    to the last page and write into a live slot.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    loc = loc.to(torch.int64)
    valid = loc >= 0
    safe = torch.where(valid, loc, torch.zeros_like(loc))
    pages = safe // page_size
    if pages.numel() and int(pages.max()) >= page_table.shape[0]:
        raise IndexError(
            f"virtual page {int(pages.max())} is beyond the page table of "
            f"{page_table.shape[0]} pages"
        )
    physical = page_table.to(loc.device, torch.int64)[pages] * page_size + safe % page_size
    return torch.where(valid, physical, loc)


class KVIndexTranslator:
    """Holds the virtual-to-physical page table of one pool."""

    def __init__(self, page_table: torch.Tensor, page_size: int) -> None:
        if page_table.dim() != 1:
            raise ValueError(f"page_table must be 1-D, got shape {tuple(page_table.shape)}")
        self.page_table = page_table
        self.page_size = page_size

    def translate(self, loc: torch.Tensor) -> torch.Tensor:
        return translate_loc(loc, self.page_table, self.page_size)

    def bind_runner_slots(self, batch: Any) -> None:
        """Mark a batch built over a runner's own slot buffer (a graph capture's) kernel-facing.

        Those slots already index the pool; translating them as virtual ids
        would map them through the page table a second time.
        """
        batch.out_cache_loc_virtual = None
        batch.out_cache_loc_id_space = KERNEL

    def rebind_write_loc(self, batch: Any) -> None:
        """Translate ``batch.out_cache_loc`` in place and mark it kernel-facing.

        The virtual loc is kept as ``out_cache_loc_virtual``. A batch already
        marked ``"kernel"`` is left alone: translating twice would map a
        physical id through the table again and land on an unrelated slot.
        """
        space = getattr(batch, "out_cache_loc_id_space", VIRTUAL)
        if space == KERNEL:
            return
        if space != VIRTUAL:
            raise ValueError(f"batch.out_cache_loc_id_space is {space!r}")
        batch.out_cache_loc_virtual = batch.out_cache_loc
        batch.out_cache_loc = self.translate(batch.out_cache_loc)
        batch.out_cache_loc_id_space = KERNEL
