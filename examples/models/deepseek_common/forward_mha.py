"""DeepSeek-V2/V3 MLA attention, MHA prefill path: the model writes the
compressed latent cache itself before running dense attention."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch

_is_cuda = torch.cuda.is_available()


def get_token_to_kv_pool():
    from examples.model_executor.model_runner import get_global_model_runner

    return get_global_model_runner().token_to_kv_pool


class DeepseekMHAForwardMixin:
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    num_local_heads: int

    def forward_normal_prepare(self, positions, hidden_states, forward_batch: ForwardBatch):
        q = self.q_proj(hidden_states)[0].view(-1, self.num_local_heads, self.qk_nope_head_dim + self.qk_rope_head_dim)
        _, q_pe = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

        latent_cache = self.kv_a_proj_with_mqa(hidden_states)[0]
        kv_a, _ = latent_cache.split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent_cache = latent_cache.unsqueeze(1)
        kv_a = self.kv_a_layernorm(kv_a)
        k_pe = latent_cache[:, :, self.kv_lora_rank :]
        q_pe, k_pe = self.rotary_emb(positions, q_pe, k_pe)
        q[..., self.qk_nope_head_dim :] = q_pe

        self._set_mla_kv_buffer(latent_cache, kv_a, k_pe, forward_batch)
        return q, kv_a, k_pe

    def _set_mla_kv_buffer(
        self,
        latent_cache: torch.Tensor,
        kv_a: torch.Tensor,
        k_pe: torch.Tensor,
        forward_batch: ForwardBatch,
    ):
        if _is_cuda:
            # Save latent cache; the fused door splits latent and rope rows.
            get_token_to_kv_pool().set_mla_kv_buffer(
                self.attn_mha,
                forward_batch.out_cache_loc,
                kv_a.unsqueeze(1),
                k_pe,
            )
        else:
            latent_cache[:, :, : self.kv_lora_rank] = kv_a.unsqueeze(1)
            latent_cache[:, :, self.kv_lora_rank :] = k_pe.clone()
            # Save latent cache as one row; an MLA pool ignores the value.
            get_token_to_kv_pool().set_kv_buffer(self.attn_mha, forward_batch.out_cache_loc, latent_cache, None)
