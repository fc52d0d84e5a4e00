"""Write locations that carry their id space to the pool.

Under token-major views a virtual id and a physical one are both in range and
look alike, so a pool cannot tell a loc whose translation was skipped from a
translated one. The batch records which space ``out_cache_loc`` is in
(``out_cache_loc_id_space``: ``"virtual"`` until `rebind_write_loc` makes it
``"kernel"``); `KVWriteLoc.for_batch` carries that mark to the write door,
which refuses anything not marked ``"kernel"``. A bare tensor carries no mark,
and neither does a ``KVWriteLoc`` built without ``id_space``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import torch

VIRTUAL = "virtual"
KERNEL = "kernel"
ID_SPACES = (VIRTUAL, KERNEL)


@dataclass
class KVWriteLoc:
    """Write target(s) for a pool's write door.

    ``loc`` is the per-token location; ``swa_loc`` / ``full_loc`` are
    pre-resolved physical locations into a sliding-window or full-attention
    sub-pool (``None`` when the pool has none). ``id_space`` says whether
    ``loc`` is already kernel-facing.
    """

    loc: torch.Tensor
    swa_loc: Optional[torch.Tensor] = None
    full_loc: Optional[torch.Tensor] = None
    id_space: str = VIRTUAL

    def __post_init__(self) -> None:
        if self.id_space not in ID_SPACES:
            raise ValueError(f"id_space must be one of {ID_SPACES}, got {self.id_space!r}")
        # The sub-pool locs are resolved once from the padded batch loc; paths
        # that later narrow `loc` (piecewise graphs, DP padding) must see them
        # narrowed the same way, token for token.
        n = self.loc.shape[0]
        if self.swa_loc is not None and self.swa_loc.shape[0] != n:
            self.swa_loc = self.swa_loc[:n]
        if self.full_loc is not None and self.full_loc.shape[0] != n:
            self.full_loc = self.full_loc[:n]

    @classmethod
    def for_batch(
        cls,
        batch: Any,
        *,
        swa_loc: Optional[torch.Tensor] = None,
        full_loc: Optional[torch.Tensor] = None,
    ) -> "KVWriteLoc":
        """The batch's ``out_cache_loc``, marked with the batch's id space."""
        return cls(
            batch.out_cache_loc,
            swa_loc,
            full_loc,
            id_space=getattr(batch, "out_cache_loc_id_space", VIRTUAL),
        )

    @classmethod
    def for_layer(
        cls,
        batch: Any,
        layer: Any,
        *,
        swa_loc: Optional[torch.Tensor] = None,
        full_loc: Optional[torch.Tensor] = None,
    ) -> "KVWriteLoc":
        """The loc a layer writes to; cross-attention layers write the encoder loc.

        The encoder loc is never rebound, so it stays unmarked: a unified
        pool must refuse it rather than take an untranslated id as physical.
        """
        if getattr(layer, "is_cross_attention", False):
            return cls(batch.encoder_out_cache_loc, swa_loc, full_loc)
        return cls.for_batch(batch, swa_loc=swa_loc, full_loc=full_loc)


LocInfo = Union[KVWriteLoc, torch.Tensor]


def unwrap_write_loc(
    loc_info: LocInfo,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """``(loc, swa_loc, full_loc)`` from a ``KVWriteLoc`` or a bare loc."""
    if isinstance(loc_info, KVWriteLoc):
        return loc_info.loc, loc_info.swa_loc, loc_info.full_loc
    return loc_info, None, None


def write_loc_is_kernel_facing(loc_info: Any) -> bool:
    """True only for a ``KVWriteLoc`` explicitly marked ``id_space="kernel"``."""
    return isinstance(loc_info, KVWriteLoc) and loc_info.id_space == KERNEL
