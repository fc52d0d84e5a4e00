"""Zigzag context parallelism: each CP rank holds two chunks of every
sequence; full K/V is all-gathered and written by every rank."""

from __future__ import annotations

from typing import Any, Optional

import torch

from runtime_shim import KVWriteLoc


def get_token_to_kv_pool():
    from examples.model_executor.model_runner import get_global_model_runner

    return get_global_model_runner().token_to_kv_pool


class ZigzagCPHelper:
    def __init__(self, cp_rank: int, cp_size: int, cp_group: Any):
        self.cp_rank = cp_rank
        self.cp_size = cp_size
        self.cp_group = cp_group

    def gather_kv_cache(self, x: torch.Tensor, forward_batch) -> torch.Tensor:
        meta = forward_batch.attn_cp_metadata
        chunks = [torch.empty_like(x) for _ in range(self.cp_size)]
        torch.distributed.all_gather(chunks, x.contiguous(), group=self.cp_group)
        # Undo the zigzag: rank r holds chunks r and 2*cp_size-1-r.
        return torch.cat(chunks, dim=0)[meta.reverse_split_index]

    def local_write_loc(self, forward_batch) -> torch.Tensor:
        # This rank's own tokens only, for the rank-local (non-gathered) pool.
        meta = forward_batch.attn_cp_metadata
        return forward_batch.out_cache_loc_virtual[meta.local_token_index]

    def materialize_full_kv(
        self,
        forward_batch,
        layer: Any,
        k: torch.Tensor,
        v: torch.Tensor,
        swa_loc: Optional[torch.Tensor] = None,
    ) -> None:
        cache_loc = forward_batch.out_cache_loc
        k_dim = k.shape[-1]
        kv_local = torch.cat([k, v], dim=-1).contiguous()
        key_full, value_full = self.gather_kv_cache(kv_local, forward_batch).split([k_dim, v.shape[-1]], dim=-1)
        # Every rank writes the whole gathered sequence to its own pool.
        get_token_to_kv_pool().set_kv_buffer(layer, cache_loc, key_full.contiguous(), value_full.contiguous())

    def materialize_local_mla_kv(self, forward_batch, layer: Any, k_nope: torch.Tensor, k_rope: torch.Tensor) -> None:
        kv_lora_rank = k_nope.shape[-1]
        local_loc = self.local_write_loc(forward_batch)
        # local_loc is cut from the virtual ids; nothing here says so.
        get_token_to_kv_pool().set_mla_kv_buffer(
            layer,
            KVWriteLoc(local_loc),
            k_nope[..., :kv_lora_rank],
            k_rope,
        )
