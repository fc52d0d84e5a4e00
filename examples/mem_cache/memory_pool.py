"""Composite KV pools: a hybrid full/sliding-window pool over two sub-pools,
and a draft-model pool that shares the target's write locations."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from runtime_shim import KVWriteLoc
from runtime_shim.write_loc import unwrap_write_loc


class SWAKVPool:
    """Hybrid cache: full-attention layers in one sub-pool, sliding-window
    layers in another, each with its own id space."""

    def __init__(self, full_kv_pool: Any, swa_kv_pool: Any, full_layer_ids: list, swa_layer_ids: list):
        self.full_kv_pool = full_kv_pool
        self.swa_kv_pool = swa_kv_pool
        self.layers_mapping: Dict[int, Tuple[int, bool]] = {}
        for pool_layer_id, layer_id in enumerate(full_layer_ids):
            self.layers_mapping[layer_id] = (pool_layer_id, False)
        for pool_layer_id, layer_id in enumerate(swa_layer_ids):
            self.layers_mapping[layer_id] = (pool_layer_id, True)

    def _sub_pool(self, layer_id: int) -> Tuple[Any, int, bool]:
        pool_layer_id, is_swa = self.layers_mapping[layer_id]
        return (self.swa_kv_pool if is_swa else self.full_kv_pool), pool_layer_id, is_swa

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        pool, pool_layer_id, _ = self._sub_pool(layer_id)
        return pool.get_key_buffer(pool_layer_id)

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        pool, pool_layer_id, _ = self._sub_pool(layer_id)
        return pool.get_value_buffer(pool_layer_id)

    def get_kv_buffer(self, layer_id: int) -> Tuple[torch.Tensor, torch.Tensor]:
        pool, pool_layer_id, _ = self._sub_pool(layer_id)
        return pool.get_kv_buffer(pool_layer_id)

    def set_kv_buffer(self, layer, loc_info, cache_k: torch.Tensor, cache_v: torch.Tensor):
        # loc_info bundles the full loc and the pre-translated SWA loc.
        pool_layer_id, is_swa = self.layers_mapping[layer.layer_id]
        if is_swa:
            # swa_loc is the full->SWA translation, computed once per forward
            # by the attention backend; this door never translates.
            assert loc_info.swa_loc is not None
            self.swa_kv_pool.set_kv_buffer(pool_layer_id, loc_info.swa_loc, cache_k, cache_v)
        else:
            loc, _, _ = unwrap_write_loc(loc_info)
            self.full_kv_pool.set_kv_buffer(pool_layer_id, loc, cache_k, cache_v)


class DraftSharedKVPool:
    """The draft model's layers live after the target's in one pool; the
    draft writes the same token slots, so it reuses the target's loc."""

    def __init__(self, target_pool: Any, num_target_layers: int):
        self.target_pool = target_pool
        self.num_target_layers = num_target_layers

    def _target_layer(self, layer) -> int:
        return self.num_target_layers + layer.layer_id

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.target_pool.get_key_buffer(self.num_target_layers + layer_id)

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.target_pool.get_value_buffer(self.num_target_layers + layer_id)

    def set_kv_buffer(self, layer, loc_info, cache_k: torch.Tensor, cache_v: torch.Tensor):
        # Forwarded whole: the mark travels with the loc.
        self.target_pool.set_kv_buffer(self._target_layer(layer), loc_info, cache_k, cache_v)

    def set_mla_kv_buffer(self, layer, loc_info, latent: torch.Tensor, rope: torch.Tensor):
        # Only the full loc applies to a non-hybrid target; rebuilt, but with
        # the incoming id space stated, so the mark is not dropped.
        loc, _, _ = unwrap_write_loc(loc_info)
        target_loc = KVWriteLoc(loc, id_space=loc_info.id_space)
        self.target_pool.set_mla_kv_buffer(self._target_layer(layer), target_loc, latent, rope)
