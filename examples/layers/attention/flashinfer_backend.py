"""FlashInfer-style backend: paged K/V handed to a wrapper as a (k, v) pair."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


class FlashInferAttnBackend:
    def __init__(self, model_runner):
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.decode_wrapper = model_runner.flashinfer_decode_wrapper
        self.prefill_wrapper = model_runner.flashinfer_prefill_wrapper
        self.cascade_wrapper: Optional[object] = None

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache and k is not None:
            assert v is not None
            self.token_to_kv_pool.set_kv_buffer(layer, loc=forward_batch.out_cache_loc, cache_k=k, cache_v=v)

        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        # The wrapper takes NHD pages; the pool hands out one row per slot.
        paged_kv_cache = (
            k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim),
            v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.head_dim),
        )
        o = self.decode_wrapper.forward(
            q.contiguous().view(-1, layer.tp_q_head_num, layer.head_dim),
            paged_kv_cache,
            sm_scale=layer.scaling,
            logits_soft_cap=layer.logit_cap,
        )
        return o.view(-1, layer.tp_q_head_num * layer.head_dim)

    def forward_extend(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache and k is not None:
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)

        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        # The ragged prefix kernel indexes rows, one head at a time, so heads
        # are folded into the row dim; the result is a packed copy.
        k_rows = k_cache.flatten(0, 1)
        v_rows = v_cache.reshape(-1, layer.head_dim)
        # Row width checked against the wrapper's plan; keeps the slot dim.
        row_width = k_cache.view(k_cache.shape[0], -1).shape[1]
        assert row_width == layer.tp_k_head_num * layer.head_dim, row_width
        o = self.prefill_wrapper.forward(
            q.view(-1, layer.tp_q_head_num, layer.head_dim),
            (k_rows, v_rows),
            causal=not layer.is_cross_attention,
            sm_scale=layer.scaling,
        )
        return o.view(-1, layer.tp_q_head_num * layer.head_dim)

    def forward_cascade_shared_prefix(self, q, layer, forward_batch: ForwardBatch, prefix_len: int):
        # Cascade attention reads the shared prefix as one dense block.
        k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)[:prefix_len]
        shared_k = k_cache.contiguous()
        shared_v = self.token_to_kv_pool.get_value_buffer(layer.layer_id)[:prefix_len]
        return self.cascade_wrapper.forward(q, shared_k, shared_v, sm_scale=layer.scaling)
