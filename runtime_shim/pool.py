"""Token-major KV pools over one raw byte buffer, with marked write doors.

Every layer's K and V (or MLA latent and rope) for one slot live in that slot's
entry (see `runtime_shim.layout`), so the per-layer views handed out are
strided with the entry as slot stride and are indexed by physical token id.
Because a virtual id is just as valid an index into such a view, the write
doors refuse, when ``strict``, any loc that is not a `KVWriteLoc` marked
``id_space="kernel"``: a skipped translation must fail here rather than write
another request's slot. With ``strict=False`` the write goes through and an
active `kv_layout_guard` records it.

`ContiguousMHAPool` / `ContiguousMLAPool` (in `runtime_shim.contiguous`,
re-exported here) have the same interface over page-major per-layer buffers,
for parity tests.
"""

from __future__ import annotations

import mmap
from typing import Any, Optional, Tuple

import torch

from runtime_shim import _hooks
from runtime_shim._doors import MHAAccessors, PoolGeometry, describe_loc, layer_index, store_rows, target_loc
from runtime_shim.contiguous import ContiguousMHAPool, ContiguousMLAPool
from runtime_shim.layout import (
    DenseEntryLayout,
    DensePart,
    build_dense_views,
    dense_part_views,
    mha_entry_layout,
    mla_entry_layout,
)
from runtime_shim.write_loc import LocInfo, write_loc_is_kernel_facing

__all__ = [
    "ContiguousMHAPool",
    "ContiguousMLAPool",
    "TokenMajorMHAPool",
    "TokenMajorMLAPool",
]


# CPU pools at least this large take lazily zeroed pages from an anonymous
# mapping: a pool past 2^31 elements (the 32-bit offset cases) then costs only
# the rows written, not a multi-GiB memset.
_LAZY_ZERO_BYTES = 1 << 30


def _zeroed_bytes(nbytes: int, device: torch.device) -> torch.Tensor:
    if device.type == "cpu" and nbytes >= _LAZY_ZERO_BYTES:
        return torch.frombuffer(mmap.mmap(-1, nbytes), dtype=torch.uint8)
    return torch.zeros(nbytes, dtype=torch.uint8, device=device)


class _TokenMajorPool(PoolGeometry):
    layout: DenseEntryLayout

    def __init__(self, **geometry: Any) -> None:
        super().__init__(**geometry)
        # One raw byte buffer: every layer's K/V of a slot sits in that slot's entry.
        self.raw = _zeroed_bytes(self.num_slots * self.layout.entry_bytes, self.device)

    @property
    def entry_bytes(self) -> int:
        return self.layout.entry_bytes

    def _views(self, part_name: str) -> list:
        with _hooks.trusted():
            return build_dense_views(
                self.raw, layout=self.layout, part_name=part_name, num_slots=self.num_slots
            )

    def _admit(self, door: str, layer_id: int, loc_info: LocInfo) -> torch.Tensor:
        if not write_loc_is_kernel_facing(loc_info):
            if self.strict:
                raise AssertionError(
                    f"{type(self).__name__}.{door}: write loc is not marked "
                    f"kernel-facing (got {describe_loc(loc_info)}); pass "
                    f"KVWriteLoc.for_batch(batch) after rebind_write_loc(batch)"
                )
            _hooks.report_unmarked_write(self, door, layer_id, loc_info)
        loc = target_loc(loc_info)
        _hooks.report_write_index(self, door, layer_id, loc)
        return loc


class TokenMajorMHAPool(MHAAccessors, _TokenMajorPool):
    """MHA pool: K and V rows per layer, ``[num_slots, heads, dim]`` views."""

    def __init__(
        self,
        *,
        num_slots: int,
        page_size: int,
        layer_num: int,
        k_heads: int,
        k_dim: int,
        v_heads: int,
        v_dim: int,
        dtype: torch.dtype,
        device: "str | torch.device",
        strict: bool = True,
    ) -> None:
        self.layout = mha_entry_layout(layer_num, k_heads, k_dim, v_heads, v_dim, dtype)
        super().__init__(
            num_slots=num_slots,
            page_size=page_size,
            layer_num=layer_num,
            dtype=dtype,
            device=device,
            strict=strict,
        )
        self.k_buffer = self._views("k")
        self.v_buffer = self._views("v")
        _hooks.announce_pool(self)

    def set_kv_buffer(
        self, layer: Any, loc_info: LocInfo, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        index = layer_index(layer, self.layer_num)
        loc = self._admit("set_kv_buffer", index, loc_info)
        with _hooks.trusted():
            store_rows(self.k_buffer[index], loc, k, "k")
            store_rows(self.v_buffer[index], loc, v, "v")


class TokenMajorMLAPool(_TokenMajorPool):
    """MLA pool: one latent and one rope row per layer, single-head views.

    ``get_key_buffer`` returns the whole ``[num_slots, 1, latent + rope]`` row,
    what MLA kernels read as the key (and what SGLang's MLA pool returns);
    ``get_value_buffer`` returns its ``[num_slots, 1, latent]`` prefix. Both
    alias the same entry bytes, as in SGLang, where V is a slice of the key.
    """

    def __init__(
        self,
        *,
        num_slots: int,
        page_size: int,
        layer_num: int,
        latent_dim: int,
        rope_dim: int,
        dtype: torch.dtype,
        device: "str | torch.device",
        strict: bool = True,
    ) -> None:
        self.layout = mla_entry_layout(layer_num, latent_dim, rope_dim, dtype)
        super().__init__(
            num_slots=num_slots,
            page_size=page_size,
            layer_num=layer_num,
            dtype=dtype,
            device=device,
            strict=strict,
        )
        self.latent_dim = latent_dim
        self.rope_dim = rope_dim
        self.latent_buffer = self._views("latent")
        self.rope_buffer = self._views("rope")
        latent = self.layout.part("latent")
        # The layout puts rope right after latent in each layer, so one row
        # of latent + rope starting at the latent offset covers both.
        row = DensePart(
            "kv",
            layer_num,
            (1, latent_dim + rope_dim),
            dtype,
            latent.offset_bytes,
            latent.layer_stride_bytes,
        )
        with _hooks.trusted():
            self.kv_buffer = dense_part_views(
                self.raw, row, entry_bytes=self.entry_bytes, num_slots=num_slots
            )
        _hooks.announce_pool(self)

    def get_key_buffer(self, layer: Any) -> torch.Tensor:
        return self.kv_buffer[layer_index(layer, self.layer_num)]

    def get_value_buffer(self, layer: Any) -> torch.Tensor:
        return self.latent_buffer[layer_index(layer, self.layer_num)]

    def get_kv_buffer(self, layer: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        index = layer_index(layer, self.layer_num)
        return self.kv_buffer[index], self.latent_buffer[index]

    def set_kv_buffer(
        self,
        layer: Any,
        loc_info: LocInfo,
        k: torch.Tensor,
        v: Optional[torch.Tensor] = None,
    ) -> None:
        """Write whole ``[tokens, 1, latent + rope]`` rows; ``v`` is unused.

        The value is the latent prefix of the key, so there is nothing
        separate to store (SGLang's MLA pool takes and ignores it too).
        """
        index = layer_index(layer, self.layer_num)
        loc = self._admit("set_kv_buffer", index, loc_info)
        with _hooks.trusted():
            store_rows(self.kv_buffer[index], loc, k, "k")

    def set_mla_kv_buffer(
        self, layer: Any, loc_info: LocInfo, latent: torch.Tensor, rope: torch.Tensor
    ) -> None:
        index = layer_index(layer, self.layer_num)
        loc = self._admit("set_mla_kv_buffer", index, loc_info)
        with _hooks.trusted():
            store_rows(self.latent_buffer[index], loc, latent, "latent")
            store_rows(self.rope_buffer[index], loc, rope, "rope")
