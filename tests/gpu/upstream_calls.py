"""Harness callables (`runtime_shim.parity`) that run upstream's kernels.

Each takes a `ParityRun` and calls the upstream function exactly as SGLang's
Triton backend does: the per-layer flat buffer (``[num_slots, heads, dim]``,
strides as given) with ``kv_indptr`` / ``kv_indices`` token ids and
``page_size``. They live in a module of their own so that the large-pool
child process can import them as ``"upstream_calls:decode_mha"``.
"""

from __future__ import annotations

import math

import torch

import upstream_kernels
from runtime_shim.parity import ParityRun

GROUP = 4  # query heads per KV head in the MHA/GQA calls
MLA_Q_HEADS = 4
MAX_KV_SPLITS = 2


def _decode(run: ParityRun, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, has_mla: bool) -> torch.Tensor:
    fwd = upstream_kernels.decode_attention_fwd()
    batch, heads = q.shape[0], q.shape[1]
    lv = v.shape[-1]
    o = torch.empty((batch, heads, lv), dtype=run.dtype, device=run.device)
    # Upstream's Triton backend allocates these as float32 [batch, heads, max splits, Lv].
    logits = torch.empty((batch, heads, MAX_KV_SPLITS, lv), dtype=torch.float32, device=run.device)
    lse = torch.empty((batch, heads, MAX_KV_SPLITS), dtype=torch.float32, device=run.device)
    splits = torch.full((batch,), MAX_KV_SPLITS, dtype=torch.int32, device=run.device)
    fwd(
        q, k, v, o, run.kv_indptr, run.kv_indices, logits, lse, splits, MAX_KV_SPLITS,
        1.0 / math.sqrt(q.shape[-1]), 1.0, 1.0, has_mla=has_mla, page_size=run.page_size,
    )
    return o


def decode_mha(run: ParityRun) -> torch.Tensor:
    """Grouped-query decode (kv_group_num = GROUP): the grouped stage-1 kernel."""
    heads = run.k.shape[1] * GROUP
    q = run.randn(run.batch, heads, run.k.shape[2], salt=1)
    return _decode(run, q, run.k, run.v, has_mla=False)


def decode_mha_group1(run: ParityRun) -> torch.Tensor:
    """Plain MHA decode (kv_group_num = 1): upstream's `_fwd_kernel_stage1`."""
    q = run.randn(run.batch, run.k.shape[1], run.k.shape[2], salt=2)
    return _decode(run, q, run.k, run.v, has_mla=False)


def decode_mla(run: ParityRun) -> torch.Tensor:
    """MLA decode (``has_mla=True``): K is the latent + rope row, V its latent prefix."""
    q = run.randn(run.batch, MLA_Q_HEADS, run.k.shape[2], salt=3)
    return _decode(run, q, run.k, run.v, has_mla=True)


EXTEND_LEN = 8  # new tokens per sequence in the extend (prefill) calls


def extend_mha(run: ParityRun) -> torch.Tensor:
    """Extend (prefill) over a cached prefix: the prefix comes from the pool
    through ``kv_indptr`` / ``kv_indices``, the new tokens from ``k_extend`` /
    ``v_extend``; causal mask, grouped-query heads."""
    fwd = upstream_kernels.extend_attention_fwd()
    kv_heads, dk, dv = run.k.shape[1], run.k.shape[2], run.v.shape[2]
    # The interpreter runs one program per (sequence, head, query block):
    # two query heads per KV head there keep the grouping and halve the cost.
    heads = kv_heads * (GROUP if run.device.type == "cuda" else 2)
    total = run.batch * EXTEND_LEN
    q = run.randn(total, heads, dk, salt=4)
    k_ext = run.randn(total, kv_heads, dk, salt=5)
    v_ext = run.randn(total, kv_heads, dv, salt=6)
    o = torch.empty((total, heads, dv), dtype=run.dtype, device=run.device)
    qo_indptr = torch.arange(0, total + 1, EXTEND_LEN, dtype=torch.int32, device=run.device)
    fwd(
        q, k_ext, v_ext, o, run.k, run.v, qo_indptr, run.kv_indptr, run.kv_indices,
        None, True, None, EXTEND_LEN, 1.0, 1.0, page_size=run.page_size,
    )
    return o


STORE_TOKENS = 4  # tokens written by the store calls, compiled (interpreted: 2, one program per token and head)


def rope_store(run: ParityRun):
    """Upstream's fused rope-and-store (``flash_layout=True``): rotates q and k
    and writes k / v into ``key_cache`` / ``value_cache`` at ``slot_mapping``.
    The caches are the pool's paged views (``paged_view``, the buffer's own
    strides); the slots are the first sequence's first tokens. Returns
    ``(q_out, k_out)``; the harness compares the pools byte for byte after."""
    store = upstream_kernels.fused_qk_rope_reshape_and_cache()
    kv_heads, dim = run.k.shape[1], run.k.shape[2]
    t = STORE_TOKENS if run.device.type == "cuda" else 2
    q = run.randn(t, kv_heads, dim, salt=7)
    k = run.randn(t, kv_heads, dim, salt=8)
    v = run.randn(t, kv_heads, dim, salt=9)
    pos = torch.arange(t, device=run.device) * 3
    freqs = run.randn(64, dim // 2, salt=10, dtype=torch.float32)
    cos_sin = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(run.dtype)
    slots = run.kv_indices[:t]
    q_out, k_out, _, _ = store(
        q, k, v, run.paged(run.k), run.paged(run.v), slots, pos, cos_sin, None, None,
        is_neox=True, flash_layout=True, output_zeros=False,
    )
    return q_out, k_out
