"""Triton-kernel attention backend (extend, decode, draft-extend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch

from runtime_shim import KVWriteLoc

if TYPE_CHECKING:
    from examples.model_executor.forward_batch_info import ForwardBatch


@dataclass
class ForwardMetadata:
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    max_extend_len: Optional[int] = None
    # Write ids of this forward in the sliding-window sub-pool, translated
    # once per forward from the full-attention ids (None without SWA layers).
    swa_out_cache_loc: Optional[torch.Tensor] = None


class TritonAttnBackend:
    def __init__(self, model_runner, skip_prefill: bool = False):
        self.page_size = model_runner.page_size
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.kv_index_translator = model_runner.kv_index_translator
        self.sliding_window_size = model_runner.sliding_window_size
        self.skip_prefill = skip_prefill
        self.forward_metadata: Optional[ForwardMetadata] = None

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        bs = forward_batch.batch_size
        kv_indptr = torch.zeros(bs + 1, dtype=torch.int32, device=forward_batch.seq_lens.device)
        kv_indptr[1:] = torch.cumsum(forward_batch.seq_lens, dim=0)
        kv_indices = torch.cat(
            [
                self.req_to_token[req, :seq_len]
                for req, seq_len in zip(forward_batch.req_pool_indices.tolist(), forward_batch.seq_lens.tolist())
            ]
        )
        swa_out_cache_loc = None
        if self.sliding_window_size is not None:
            swa_out_cache_loc = self.kv_index_translator.write_ids(forward_batch, kind="sliding_window")
        self.forward_metadata = ForwardMetadata(kv_indptr, kv_indices, swa_out_cache_loc=swa_out_cache_loc)

    def _set_kv_buffer(self, forward_batch: ForwardBatch, layer, loc_info, k, v):
        # One door for every write of this backend; it forwards loc_info
        # as it came, mark and sub-pool locs included.
        self.token_to_kv_pool.set_kv_buffer(layer, loc_info, k, v)

    def forward_extend(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        if layer.qk_head_dim != layer.v_head_dim:
            o = q.new_empty((q.shape[0], layer.tp_q_head_num * layer.v_head_dim))
        else:
            o = torch.empty_like(q)

        if save_kv_cache:
            # Encoder tokens of a cross-attention layer have their own loc; the
            # decoder's loc was rebound to kernel ids, the encoder's never is.
            cache_loc = (
                forward_batch.out_cache_loc
                if not layer.is_cross_attention
                else forward_batch.encoder_out_cache_loc
            )
            self.token_to_kv_pool.set_kv_buffer(layer, cache_loc, k, v)

        self.extend_attention_fwd(
            q.view(-1, layer.tp_q_head_num, layer.qk_head_dim),
            k.contiguous(),
            v.contiguous(),
            o.view(-1, layer.tp_q_head_num, layer.v_head_dim),
            self.token_to_kv_pool.get_key_buffer(layer.layer_id),
            self.token_to_kv_pool.get_value_buffer(layer.layer_id),
            self.forward_metadata,
            sm_scale=layer.scaling,
        )
        return o

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch, save_kv_cache: bool = True):
        q = q.reshape(-1, layer.tp_q_head_num * layer.qk_head_dim)
        o = q.new_empty((q.shape[0], layer.tp_q_head_num * layer.v_head_dim))

        cache_loc = forward_batch.out_cache_loc
        if save_kv_cache:
            # The SWA loc comes from the same plan as cache_loc, but building
            # the bundle by hand leaves the batch's id-space mark behind.
            loc_info = KVWriteLoc(cache_loc, self.forward_metadata.swa_out_cache_loc)
            self._set_kv_buffer(forward_batch, layer, loc_info, k, v)

        self.decode_attention_fwd(
            q.view(-1, layer.tp_q_head_num, layer.qk_head_dim),
            self.token_to_kv_pool.get_key_buffer(layer.layer_id),
            self.token_to_kv_pool.get_value_buffer(layer.layer_id),
            o.view(-1, layer.tp_q_head_num, layer.v_head_dim),
            self.forward_metadata,
            sm_scale=layer.scaling,
        )
        return o

    def forward_extend_piecewise(self, q, k, v, layer, forward_batch: ForwardBatch, num_tokens: int):
        # Piecewise CUDA graphs pad the batch to the captured size; only the
        # first num_tokens rows are real, so only those are written.
        self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc[:num_tokens], k[:num_tokens], v[:num_tokens])
        return self.forward_extend(q, k, v, layer, forward_batch, save_kv_cache=False)

    def forward_draft_extend(self, q, k, v, layer, forward_batch: ForwardBatch):
        # The draft model's extend writes through the backend's own door;
        # k and v are cloned because the door may quantize them in place.
        self._set_kv_buffer(forward_batch, layer, forward_batch.out_cache_loc, k.clone(), v.clone())
        return self.forward_extend(q, k, v, layer, forward_batch, save_kv_cache=False)

    def extend_attention_fwd(self, *args, **kwargs):
        raise NotImplementedError("the Triton extend kernel is not part of the example")

    def decode_attention_fwd(self, *args, **kwargs):
        raise NotImplementedError("the Triton decode kernel is not part of the example")
