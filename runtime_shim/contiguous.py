"""Page-major reference pools: one contiguous buffer per layer, no mark check.

They take the token-major pools' constructor arguments and expose the same
accessors and write doors, so a test can run identical code against both and
compare results; the strict mark check is deliberately absent here, as in a
static pool, where a loc is physical by construction.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from runtime_shim._doors import MHAAccessors, PoolGeometry, layer_index, store_rows, target_loc
from runtime_shim.write_loc import LocInfo


class _ContiguousPool(PoolGeometry):
    # `strict` is accepted for signature parity: a static pool has nothing to check.

    def _zeros(self, *row_shape: int) -> list:
        return [
            torch.zeros((self.num_slots, *row_shape), dtype=self.dtype, device=self.device)
            for _ in range(self.layer_num)
        ]


class ContiguousMHAPool(MHAAccessors, _ContiguousPool):
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
        super().__init__(
            num_slots=num_slots,
            page_size=page_size,
            layer_num=layer_num,
            dtype=dtype,
            device=device,
            strict=strict,
        )
        self.k_buffer = self._zeros(k_heads, k_dim)
        self.v_buffer = self._zeros(v_heads, v_dim)

    def set_kv_buffer(
        self, layer: Any, loc_info: LocInfo, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        index = layer_index(layer, self.layer_num)
        loc = target_loc(loc_info)
        store_rows(self.k_buffer[index], loc, k, "k")
        store_rows(self.v_buffer[index], loc, v, "v")


class ContiguousMLAPool(_ContiguousPool):
    """Same accessors as `TokenMajorMLAPool`: the key is the latent + rope row."""

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
        self.kv_buffer = self._zeros(1, latent_dim + rope_dim)

    def get_key_buffer(self, layer: Any) -> torch.Tensor:
        return self.kv_buffer[layer_index(layer, self.layer_num)]

    def get_value_buffer(self, layer: Any) -> torch.Tensor:
        return self.kv_buffer[layer_index(layer, self.layer_num)][..., : self.latent_dim]

    def get_kv_buffer(self, layer: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.get_key_buffer(layer), self.get_value_buffer(layer)

    def set_kv_buffer(
        self,
        layer: Any,
        loc_info: LocInfo,
        k: torch.Tensor,
        v: Optional[torch.Tensor] = None,
    ) -> None:
        index = layer_index(layer, self.layer_num)
        store_rows(self.kv_buffer[index], target_loc(loc_info), k, "k")

    def set_mla_kv_buffer(
        self, layer: Any, loc_info: LocInfo, latent: torch.Tensor, rope: torch.Tensor
    ) -> None:
        index = layer_index(layer, self.layer_num)
        loc = target_loc(loc_info)
        row = self.kv_buffer[index]
        store_rows(row[..., : self.latent_dim], loc, latent, "latent")
        store_rows(row[..., self.latent_dim :], loc, rope, "rope")
