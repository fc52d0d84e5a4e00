"""A small decode-attention backend in the shape of SGLang's paged backends.

This is the runnable example of the README demo. As written it carries two
hazards of the token-major change:

* ``forward_decode`` hands the pool's write door the batch's bare
  ``out_cache_loc`` (KV101): the batch's id-space mark stays behind, so a
  strict token-major pool refuses the write.
* it pages the cache with ``k_cache.view(-1, self.page_size, H, D)`` (KV201).
  On a token-major per-layer view that does not raise; at ``page_size == 1``
  it gives the size-1 page dim the row stride ``H * D`` instead of the slot
  stride, and `paged_decode_attention` below, like the hand-written kernels
  it stands for, trusts that stride.

``kvlint fix`` rewrites both (``KVWriteLoc.for_batch(forward_batch)`` and
``paged_kv_view(...)``); ``examples/run_backend.py`` runs the file before and
after against token-major and contiguous pools.

Self-contained on purpose (torch only, until the fix adds the ``runtime_shim``
imports): tests load a fixed copy of this file by path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import torch


@dataclass
class DecodeMetadata:
    # [batch, max_pages]: page ids of each request's tokens, in order
    page_table: torch.Tensor
    # [batch]: tokens each request attends to, the new one included
    seq_lens: torch.Tensor


def paged_decode_attention(
    q: torch.Tensor,
    k_pages: torch.Tensor,
    v_pages: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> torch.Tensor:
    """One query token per request against its paged K/V; ``[batch, q_heads, v_dim]``.

    Addressed the way a hand-written paged kernel addresses its cache: it
    takes the token, head and element strides from the tensor it is handed
    and derives the page stride as ``page_size * token_stride``. That law
    holds on every layout whose pages are runs of consecutive slots
    (page-major and token-major alike), so the kernel is correct on both, as
    long as ``stride(1)`` really is the slot stride. ``x.view(-1, 1, H, D)``
    breaks exactly that on a token-major view: the size-1 page dim gets the
    row stride ``H * D``, not the entry, so every page lands ``H * D``
    elements after the previous one, inside the wrong slot's entry.
    """
    page_size = k_pages.shape[1]
    kv_heads = k_pages.shape[2]
    group = q.shape[1] // kv_heads
    out = torch.empty((q.shape[0], q.shape[1], v_pages.shape[3]), dtype=q.dtype, device=q.device)
    k_lin = _kernel_addressing(k_pages, page_size)
    v_lin = _kernel_addressing(v_pages, page_size)
    for b, n in enumerate(seq_lens.tolist()):
        t = torch.arange(n, device=q.device)
        page_ids = page_table[b, t // page_size].long()
        slots = t % page_size
        k = k_lin[page_ids, slots].float().repeat_interleave(group, dim=1)  # [n, q_heads, d]
        v = v_lin[page_ids, slots].float().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,nhd->hn", q[b].float(), k) * sm_scale
        out[b] = torch.einsum("hn,nhd->hd", scores.softmax(dim=-1), v).to(q.dtype)
    return out


def _kernel_addressing(pages: torch.Tensor, page_size: int) -> torch.Tensor:
    # The kernel's own pointer arithmetic, spelled as a tensor: base pointer
    # plus (page_size * token stride, token stride, head stride, 1).
    _, token_stride, head_stride, elem_stride = pages.stride()
    return torch.as_strided(
        pages,
        tuple(pages.shape),
        (page_size * token_stride, token_stride, head_stride, elem_stride),
        pages.storage_offset(),
    )


class TokenMajorAttnBackend:
    """Decode-only paged attention over a pool's per-layer K/V views."""

    def __init__(self, page_size: int, device: Any = "cpu") -> None:
        self.page_size = page_size
        self.device = torch.device(device)
        self.forward_metadata: Optional[DecodeMetadata] = None

    def init_forward_metadata(self, forward_batch: Any) -> None:
        req_to_token = forward_batch.req_to_token_pool.req_to_token
        seq_lens = forward_batch.seq_lens
        max_len = int(seq_lens.max())
        # Every page starts at a multiple of page_size, so one token id per
        # page names the page.
        token_ids = req_to_token[forward_batch.req_pool_indices, :max_len:self.page_size]
        self.forward_metadata = DecodeMetadata(
            page_table=torch.div(token_ids, self.page_size, rounding_mode="floor"),
            seq_lens=seq_lens,
        )

    def forward_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: Any,
        forward_batch: Any,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        if save_kv_cache:
            # The batch was rebound to kernel ids before the forward; the bare
            # tensor arrives at the door without that mark.
            forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)

        k_cache, v_cache = forward_batch.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        # Written when every per-layer view was contiguous; on a token-major
        # view it keeps the shape and changes what stride(1) means.
        k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)
        v_cache = v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.v_head_dim)

        q = q.view(-1, layer.tp_q_head_num, layer.head_dim)
        metadata = self.forward_metadata
        assert metadata is not None, "init_forward_metadata must run before forward_decode"
        o = paged_decode_attention(
            q,
            k_cache,
            v_cache,
            metadata.page_table,
            metadata.seq_lens,
            sm_scale=layer.scaling if layer.scaling is not None else 1.0 / math.sqrt(layer.head_dim),
        )
        return o.view(-1, layer.tp_q_head_num * layer.v_head_dim)
