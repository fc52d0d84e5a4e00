"""Paged decode attention over a ``[num_pages, page_size, heads, head_dim]`` cache.

Two entry points share one Triton kernel:

* :func:`paged_decode_attention` hands the kernel the cache's own four
  ``stride()`` values. It is correct on any layout: the contiguous per-layer
  view of a page-major pool, and the strided per-layer view of a token-major
  pool, whose slot stride is a whole entry (``2 * layer_num * H * D`` elements
  for MHA, not ``H * D``).
* :func:`paged_decode_attention_stride_naive` is **deliberately wrong**. It
  derives the strides from the shape, as a kernel written for a contiguous
  cache does (``page_size * H * D``, ``H * D``, ``D``, ``1``). On a contiguous
  cache that is the same thing and it gives the same answer; on a token-major
  view it reads bytes ``2 * layer_num`` times too close together, with no
  exception and no shape mismatch. That silent failure is what kvlint's KV201
  rule and ``runtime_shim.paged`` exist for (see the review thread of the
  token-major change). It is here only so that tests and benchmarks can show
  the hazard on real tensors; nothing in a serving path may call it.

Triton is imported on first call, never at import time, so this module (and
``runtime_shim.kernels``) imports on a machine without Triton or CUDA.

MLA caches (one shared latent row per token, scores over latent + rope, values
from the latent part) go through :func:`paged_mla_decode_attention`, the same
kernel with one KV head whose V is the first ``latent_dim`` columns of K.
"""

from __future__ import annotations

import math
import os
from types import ModuleType
from typing import Optional, Tuple

import torch

__all__ = [
    "contiguous_strides",
    "paged_decode_attention",
    "paged_decode_attention_stride_naive",
    "paged_mla_decode_attention",
    "paged_mla_decode_attention_stride_naive",
    "triton_available",
]

_BLOCK_N = 64
# Aim for at least this many programs so that a decode batch fills an H200's
# 132 SMs several times over and short sequences do not leave a long tail of
# idle SMs; the split count depends only on shapes and lengths, never on the
# layout, so both layouts run the same schedule.
_TARGET_PROGRAMS = 8 * 132

_impl: Optional[ModuleType] = None


def triton_available() -> bool:
    """True when Triton imports; the kernels also need a CUDA device."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def _kernel_module() -> ModuleType:
    global _impl
    if _impl is None:
        from runtime_shim.kernels import _triton_paged_decode

        _impl = _triton_paged_decode
    return _impl


def contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """Row-major strides of ``shape``: what a stride-naive kernel assumes."""
    strides = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(int(size), 1)
    return tuple(reversed(strides))


def _next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _choose_split(batch: int, kv_heads: int, max_pages: int, page_size: int) -> Tuple[int, int]:
    """(num_splits, tokens_per_split) from shapes only."""
    max_tokens = max(max_pages * page_size, 1)
    base = max(batch * kv_heads, 1)
    want = max(1, min(_cdiv(_TARGET_PROGRAMS, base), _cdiv(max_tokens, 4 * _BLOCK_N)))
    tokens_per_split = _cdiv(_cdiv(max_tokens, want), _BLOCK_N) * _BLOCK_N
    return _cdiv(max_tokens, tokens_per_split), tokens_per_split


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _launch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_strides: Tuple[int, ...],
    v_strides: Tuple[int, ...],
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: Optional[float],
    num_splits: Optional[int],
) -> torch.Tensor:
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.dim() != 4:
        raise ValueError(
            "expected q [batch, q_heads, dk] and caches [num_pages, page_size, kv_heads, dim]; "
            f"got q {tuple(q.shape)}, k {tuple(k_cache.shape)}, v {tuple(v_cache.shape)}"
        )
    batch, q_heads, head_dim_k = q.shape
    _, page_size, kv_heads, k_dim = k_cache.shape
    if k_dim != head_dim_k:
        raise ValueError(f"q head dim {head_dim_k} != k head dim {k_dim}")
    if tuple(v_cache.shape[:3]) != tuple(k_cache.shape[:3]):
        raise ValueError(f"k {tuple(k_cache.shape)} and v {tuple(v_cache.shape)} disagree on pages/heads")
    if q_heads % kv_heads:
        raise ValueError(f"{q_heads} query heads are not a multiple of {kv_heads} KV heads")
    if page_table.dim() != 2 or page_table.shape[0] != batch or seq_lens.shape != (batch,):
        raise ValueError("page_table must be [batch, max_pages] and seq_lens [batch]")
    on_cuda = q.is_cuda and k_cache.is_cuda and v_cache.is_cuda
    if not on_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("paged decode attention runs on CUDA tensors (or under TRITON_INTERPRET=1)")
    head_dim_v = v_cache.shape[3]
    group = q_heads // kv_heads
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim_k)

    page_table = page_table.to(torch.int32)
    seq_lens = seq_lens.to(torch.int32)
    if num_splits is None:
        num_splits, tokens_per_split = _choose_split(batch, kv_heads, page_table.shape[1], page_size)
    else:
        tokens_per_split = _cdiv(max(page_table.shape[1] * page_size, 1), num_splits)
        tokens_per_split = _cdiv(tokens_per_split, _BLOCK_N) * _BLOCK_N

    partial = torch.empty(
        (batch, q_heads, num_splits, head_dim_v), dtype=torch.float32, device=q.device
    )
    lse = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)

    impl = _kernel_module()
    grid = (batch, kv_heads, num_splits)
    block_g = max(16, _next_pow2(group))
    block_dk = max(16, _next_pow2(head_dim_k))
    block_dv = max(16, _next_pow2(head_dim_v))
    # Keep a K tile (BLOCK_N x BLOCK_DK) near 32 KiB for wide MLA rows.
    block_n = _BLOCK_N if max(block_dk, block_dv) <= 256 else _BLOCK_N // 2
    impl.paged_decode_kernel[grid](
        q,
        k_cache,
        v_cache,
        page_table,
        seq_lens,
        partial,
        lse,
        float(sm_scale),
        *q.stride(),
        *k_strides,
        *v_strides,
        *page_table.stride(),
        *partial.stride(),
        *lse.stride(),
        page_size,
        tokens_per_split,
        GROUP=group,
        BLOCK_G=block_g,
        HEAD_DIM_K=head_dim_k,
        HEAD_DIM_V=head_dim_v,
        BLOCK_DK=block_dk,
        BLOCK_DV=block_dv,
        BLOCK_N=block_n,
        num_warps=4 if block_dk * block_g <= 128 * 16 else 8,
        num_stages=2,
    )
    if num_splits == 1:
        return partial[:, :, 0].to(q.dtype)
    # Flash-decoding combine: weigh each split by exp(lse - max lse).
    m = lse.amax(dim=-1, keepdim=True)
    w = torch.exp(lse - m)
    out = (partial * w.unsqueeze(-1)).sum(dim=2) / w.sum(dim=-1, keepdim=True)
    return out.to(q.dtype)


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: Optional[float] = None,
    num_splits: Optional[int] = None,
) -> torch.Tensor:
    """Decode attention for one new token per sequence, reading the caches' strides.

    ``q``: ``[batch, q_heads, dk]``; ``k_cache``: ``[num_pages, page_size,
    kv_heads, dk]``; ``v_cache``: ``[num_pages, page_size, kv_heads, dv]``, any
    strides (a ``paged_kv_view`` of a token-major pool, or a contiguous cache);
    ``page_table``: ``[batch, max_pages]`` page ids; ``seq_lens``: ``[batch]``,
    each at least 1. Grouped-query heads: query head ``h`` reads KV head
    ``h // (q_heads // kv_heads)``. Softmax and accumulation are float32;
    returns ``[batch, q_heads, dv]`` in ``q.dtype``.
    """
    return _launch(
        q, k_cache, v_cache, tuple(k_cache.stride()), tuple(v_cache.stride()),
        page_table, seq_lens, sm_scale, num_splits,
    )


def paged_decode_attention_stride_naive(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    sm_scale: Optional[float] = None,
    num_splits: Optional[int] = None,
) -> torch.Tensor:
    """DELIBERATELY WRONG on strided caches: addresses from the shape, not ``stride()``.

    The bug kvlint's rules exist for, kept for tests and benchmarks only. It
    computes every address as a contiguous cache would (strides
    ``contiguous_strides(cache.shape)`` from the cache's data pointer), which
    equals :func:`paged_decode_attention` on a contiguous cache and silently
    reads other tokens' (and other layers') bytes on a token-major view. The
    naive addresses are never larger than the true ones, so it stays inside
    the allocation and raises nothing.
    """
    return _launch(
        q, k_cache, v_cache,
        contiguous_strides(tuple(k_cache.shape)), contiguous_strides(tuple(v_cache.shape)),
        page_table, seq_lens, sm_scale, num_splits,
    )


def _mla_kv(kv_cache: torch.Tensor, latent_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    if kv_cache.dim() == 3:
        kv_cache = kv_cache.unsqueeze(2)
    if kv_cache.dim() != 4 or kv_cache.shape[2] != 1:
        raise ValueError(
            f"MLA cache must be [num_pages, page_size, row] or [num_pages, page_size, 1, row]; got {tuple(kv_cache.shape)}"
        )
    if not 0 < latent_dim <= kv_cache.shape[3]:
        raise ValueError(f"latent_dim {latent_dim} outside the row of {kv_cache.shape[3]}")
    return kv_cache, kv_cache[..., :latent_dim]


def paged_mla_decode_attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    latent_dim: int,
    sm_scale: Optional[float] = None,
    num_splits: Optional[int] = None,
) -> torch.Tensor:
    """MLA decode: ``q`` ``[batch, q_heads, latent + rope]`` against one shared
    row per token (``kv_cache`` ``[num_pages, page_size, latent + rope]``, e.g.
    a ``paged_row_view``); values are the row's first ``latent_dim`` columns.
    Returns ``[batch, q_heads, latent_dim]``."""
    k, v = _mla_kv(kv_cache, latent_dim)
    return paged_decode_attention(
        q, k, v, page_table, seq_lens, sm_scale=sm_scale, num_splits=num_splits
    )


def paged_mla_decode_attention_stride_naive(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    latent_dim: int,
    sm_scale: Optional[float] = None,
    num_splits: Optional[int] = None,
) -> torch.Tensor:
    """DELIBERATELY WRONG on strided caches: the MLA form of
    :func:`paged_decode_attention_stride_naive` (row addresses from the shape
    ``[num_pages, page_size, row]``). Tests and benchmarks only."""
    k, _ = _mla_kv(kv_cache, latent_dim)
    k_strides = contiguous_strides(tuple(k.shape))
    # The naive kernel reads V from the same naive rows, first latent_dim columns.
    return _launch(
        q, k, k[..., :latent_dim], k_strides, k_strides,
        page_table, seq_lens, sm_scale, num_splits,
    )
