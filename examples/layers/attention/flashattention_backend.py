"""FlashAttention-3 backend, already migrated to the token-major contract.

Nothing in this file should produce a finding: it is the "after" picture
the other backends are fixed towards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from runtime_shim import KVWriteLoc
from runtime_shim.paged import paged_kv_view

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


class FlashAttentionBackend:
    def __init__(self, model_runner):
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        # Draft model of speculative decoding: a static page-major pool.
        self.draft_token_to_kv_pool = model_runner.draft_token_to_kv_pool
        self.kv_index_translator = model_runner.kv_index_translator
        self.forward_metadata = None

    def _translate(self, loc: torch.Tensor) -> torch.Tensor:
        return self.kv_index_translator.translate(loc)

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)

        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        key_cache = paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)
        value_cache = paged_kv_view(v_cache, self.page_size, layer.tp_v_head_num, layer.v_head_dim)
        # Keeps the slot dim: a row view, not a page split.
        rows = k_cache.view(k_cache.shape[0], -1)
        assert rows.shape[1] == layer.tp_k_head_num * layer.head_dim

        q = q.view(-1, layer.tp_q_head_num, layer.head_dim)
        o = self.flash_attn_with_kvcache(
            q=q.unsqueeze(1),
            k_cache=key_cache,
            v_cache=value_cache,
            page_table=self.forward_metadata.page_table,
            cache_seqlens=self.forward_metadata.cache_seqlens_int32,
            softmax_scale=layer.scaling,
        )
        return o.view(-1, layer.tp_q_head_num * layer.v_head_dim)

    def write_translated(self, layer, forward_batch: ForwardBatch, k, v):
        # A batch captured before rebind carries virtual ids: translate here
        # and state the id space the result is in.
        loc = self._translate(forward_batch.out_cache_loc)
        self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc(loc, id_space="kernel"), k, v)

    def write_draft_kv(self, layer, forward_batch: ForwardBatch, k, v):
        # The draft pool is static: its ids are physical by construction and
        # its door checks no mark.
        loc = self._translate(forward_batch.out_cache_loc)
        self.draft_token_to_kv_pool.set_kv_buffer(layer, loc, k, v)

    def flash_attn_with_kvcache(self, **kwargs):
        raise NotImplementedError("the FA3 kernel is not part of the example")
