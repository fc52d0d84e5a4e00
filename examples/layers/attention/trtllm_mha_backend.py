"""TRT-LLM-gen MHA backend: HND paged caches, one page table per request."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from runtime_shim import KVWriteLoc

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


class TRTLLMHAAttnBackend:
    def __init__(self, model_runner):
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.workspace_buffer = model_runner.trtllm_workspace
        self.forward_metadata = None

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)

        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        if self.page_size == 1:
            # A page-size-1 pool has no page dim; give the kernel one and
            # permute to HND. The size-1 dim gets the row stride, and after
            # the permute that stride sits where the kernel reads the token
            # stride.
            k_cache = k_cache.view(-1, 1, layer.tp_k_head_num, layer.head_dim).permute(0, 2, 1, 3)
            v_cache = v_cache.view(-1, 1, layer.tp_v_head_num, layer.head_dim).permute(0, 2, 1, 3)
        else:
            k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim).permute(0, 2, 1, 3)
            v_cache = v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.head_dim).permute(0, 2, 1, 3)

        q = q.contiguous().view(-1, layer.tp_q_head_num, layer.head_dim)
        o = self.batch_decode_with_kv_cache(
            query=q,
            kv_cache=(k_cache, v_cache),
            workspace_buffer=self.workspace_buffer,
            block_tables=self.forward_metadata.page_table,
            seq_lens=self.forward_metadata.cache_seqlens_int32,
            bmm1_scale=layer.scaling,
        )
        return o.view(-1, layer.tp_q_head_num * layer.head_dim)

    def forward_extend(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)

        # The prefill kernel asserts contiguous caches. On a token-major pool
        # this copies the layer's whole sub-pool, every layer, every step.
        k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id).contiguous()
        v_cache = self.token_to_kv_pool.get_value_buffer(layer.layer_id).contiguous()
        o = self.batch_context_with_kv_cache(
            query=q.view(-1, layer.tp_q_head_num, layer.head_dim),
            kv_cache=(k_cache, v_cache),
            workspace_buffer=self.workspace_buffer,
            block_tables=self.forward_metadata.page_table,
            seq_lens=self.forward_metadata.cache_seqlens_int32,
            bmm1_scale=layer.scaling,
        )
        return o.view(-1, layer.tp_q_head_num * layer.head_dim)

    def batch_decode_with_kv_cache(self, **kwargs):
        raise NotImplementedError("the trtllm-gen decode kernel is not part of the example")

    def batch_context_with_kv_cache(self, **kwargs):
        raise NotImplementedError("the trtllm-gen context kernel is not part of the example")
