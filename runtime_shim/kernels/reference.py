"""Torch references for :mod:`runtime_shim.kernels.paged_decode`.

Gather each sequence's tokens through the page table (plain indexing, which
honours the cache's strides), then ``scaled_dot_product_attention`` in float32
with the math backend. The ``*_stride_naive`` references first re-read the
cache's storage with shape-derived strides, which is exactly what the naive
kernel does; tests use them to show that the naive kernel is computing the
wrong bytes faithfully, not failing some other way.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

from runtime_shim.kernels.paged_decode import contiguous_strides

__all__ = [
    "as_stride_naive",
    "paged_decode_attention_reference",
    "paged_decode_attention_reference_stride_naive",
    "paged_mla_decode_attention_reference",
    "paged_mla_decode_attention_reference_stride_naive",
]


def as_stride_naive(cache: torch.Tensor) -> torch.Tensor:
    """``cache``'s storage read with row-major strides for its shape, from its
    own data pointer: the tensor a stride-naive kernel believes it was given."""
    return torch.as_strided(
        cache, tuple(cache.shape), contiguous_strides(tuple(cache.shape)), cache.storage_offset()
    )


def _sdpa_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)
    except ImportError:  # torch < 2.3
        return F.scaled_dot_product_attention(q, k, v, scale=scale)


def paged_decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: Optional[float] = None,
) -> torch.Tensor:
    """Same contract as :func:`paged_decode_attention`; float32 throughout,
    result cast to ``q.dtype``."""
    batch, q_heads, head_dim_k = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim_k) if sm_scale is None else sm_scale
    lens = [int(n) for n in seq_lens.tolist()]
    table = page_table.to(device=k_cache.device, dtype=torch.long)
    out = torch.empty((batch, q_heads, v_cache.shape[3]), dtype=q.dtype, device=q.device)
    for b, n in enumerate(lens):
        t = torch.arange(n, device=k_cache.device)
        pages = table[b, t // page_size]
        slots = t % page_size
        k = k_cache[pages, slots].float()  # [n, kv_heads, dk]
        v = v_cache[pages, slots].float()
        k = k.permute(1, 0, 2).repeat_interleave(group, dim=0).unsqueeze(0)
        v = v.permute(1, 0, 2).repeat_interleave(group, dim=0).unsqueeze(0)
        qb = q[b].float().unsqueeze(0).unsqueeze(2)  # [1, q_heads, 1, dk]
        out[b] = _sdpa_math(qb, k, v, scale)[0, :, 0].to(q.dtype)
    return out


def paged_decode_attention_reference_stride_naive(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: Optional[float] = None,
) -> torch.Tensor:
    """What :func:`paged_decode_attention_stride_naive` computes: the reference
    over the caches re-read with shape-derived strides."""
    return paged_decode_attention_reference(
        q, as_stride_naive(k_cache), as_stride_naive(v_cache), page_table, seq_lens, sm_scale=sm_scale
    )


def _mla_rows(kv_cache: torch.Tensor) -> torch.Tensor:
    return kv_cache.unsqueeze(2) if kv_cache.dim() == 3 else kv_cache


def paged_mla_decode_attention_reference(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    latent_dim: int,
    sm_scale: Optional[float] = None,
) -> torch.Tensor:
    """Reference for :func:`paged_mla_decode_attention`."""
    rows = _mla_rows(kv_cache)
    return paged_decode_attention_reference(
        q, rows, rows[..., :latent_dim], page_table, seq_lens, sm_scale=sm_scale
    )


def paged_mla_decode_attention_reference_stride_naive(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    latent_dim: int,
    sm_scale: Optional[float] = None,
) -> torch.Tensor:
    """Reference for :func:`paged_mla_decode_attention_stride_naive`."""
    rows = as_stride_naive(_mla_rows(kv_cache))
    return paged_decode_attention_reference(
        q, rows, rows[..., :latent_dim], page_table, seq_lens, sm_scale=sm_scale
    )
