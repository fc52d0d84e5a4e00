"""FlashMLA-style decode: one compressed latent + rope row per token."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from examples.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


class FlashMLABackend(AttentionBackend):
    def __init__(self, model_runner):
        config = model_runner.model_config
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.kv_lora_rank = config.kv_lora_rank
        self.qk_rope_head_dim = config.qk_rope_head_dim
        self.kv_cache_dim = self.kv_lora_rank + self.qk_rope_head_dim
        self.forward_metadata = None

    def forward_extend(self, q, k, k_rope, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if save_kv_cache:
            # The loc comes from the inherited helper (base_attn_backend.py), which returns it bare.
            self.token_to_kv_pool.set_mla_kv_buffer(layer, self._kv_write_loc(forward_batch), k, k_rope)
        return self.forward_decode(q, k, k_rope, layer, forward_batch, save_kv_cache=False)

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        # The model wrote the latent row already (set_mla_kv_buffer in
        # deepseek_common); this backend only reads.
        kv_lora_rank = self.kv_lora_rank
        qk_rope_head_dim = self.qk_rope_head_dim
        page_size = self.page_size

        kv_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
        # Rows of latent + rope, paged for the kernel's block table.
        kv_cache = kv_cache.view(-1, page_size, kv_lora_rank + qk_rope_head_dim)

        q = q.view(-1, layer.tp_q_head_num, self.kv_cache_dim)
        o = self.flash_mla_with_kvcache(
            q=q.unsqueeze(1),
            k_cache=kv_cache.unsqueeze(2),
            block_table=self.forward_metadata.block_table,
            cache_seqlens=forward_batch.seq_lens.to(torch.int32),
            head_dim_v=kv_lora_rank,
            softmax_scale=layer.scaling,
        )
        return o.view(-1, layer.tp_q_head_num * kv_lora_rank)

    def flash_mla_with_kvcache(self, **kwargs):
        raise NotImplementedError("the FlashMLA kernel is not part of the example")
