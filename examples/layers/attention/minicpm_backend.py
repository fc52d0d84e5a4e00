"""MiniCPM sparse attention: heads are grouped, and each group is read as
its own run of pseudo-pages by the block-sparse kernel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import torch

from runtime_shim import KVWriteLoc
from runtime_shim.paged import paged_kv_view

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


class MiniCPMSparseAttnBackend:
    def __init__(self, model_runner, num_q_heads: int, num_kv_heads: int):
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.head_group_num = num_kv_heads
        self.heads_per_group = num_q_heads // self.head_group_num

    def get_paged_kv_cache(self, layer, *, head_group_num: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
        key_cache, value_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        if head_group_num == 1:
            return (
                paged_kv_view(key_cache, self.page_size, layer.tp_k_head_num, layer.head_dim),
                paged_kv_view(value_cache, self.page_size, layer.tp_v_head_num, layer.v_head_dim),
            )
        # Reinterpret each page's heads as `head_group_num` pseudo-pages: a
        # flat re-chunk of the (token, head) plane, one stride per dim only
        # on a contiguous buffer.
        key_cache = key_cache.view(
            -1,
            self.page_size * head_group_num,
            layer.tp_k_head_num // head_group_num,
            layer.head_dim,
        )
        value_cache = value_cache.view(
            -1,
            self.page_size * head_group_num,
            layer.tp_v_head_num // head_group_num,
            layer.v_head_dim,
        )
        return key_cache, value_cache

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)
        key_cache, value_cache = self.get_paged_kv_cache(layer, head_group_num=self.head_group_num)
        q = q.view(-1, self.head_group_num, self.heads_per_group, layer.head_dim)
        return self.block_sparse_decode(q, key_cache, value_cache, forward_batch.seq_lens, sm_scale=layer.scaling)

    def block_sparse_decode(self, q, key_cache, value_cache, seq_lens, *, sm_scale: float):
        raise NotImplementedError("the block-sparse kernel is not part of the example")
