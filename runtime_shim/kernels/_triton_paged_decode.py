"""Triton body of the paged decode-attention kernel.

Imported only by :mod:`runtime_shim.kernels.paged_decode` on first use, so that
``import runtime_shim.kernels`` works on a machine without Triton or CUDA.

The kernel never assumes a layout: every address is
``page * stride_page + slot * stride_token + head * stride_head + d * stride_dim``
with the four strides passed in by the caller. Whether those strides are the
tensor's own (the stride-aware entry point) or derived from its shape (the
deliberately broken stride-naive one) is decided by the Python wrapper, so both
variants run exactly the same machine code and differ only in the addresses.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(
    Q,
    K,
    V,
    PageTable,
    SeqLens,
    PartialOut,
    PartialLse,
    sm_scale,
    stride_qb,
    stride_qh,
    stride_qd,
    stride_kp,
    stride_kt,
    stride_kh,
    stride_kd,
    stride_vp,
    stride_vt,
    stride_vh,
    stride_vd,
    stride_ptb,
    stride_ptp,
    stride_ob,
    stride_oh,
    stride_os,
    stride_od,
    stride_lb,
    stride_lh,
    stride_ls,
    page_size,
    tokens_per_split,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    HEAD_DIM_K: tl.constexpr,
    HEAD_DIM_V: tl.constexpr,
    BLOCK_DK: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # One program: one sequence, one KV head (and the GROUP query heads that
    # share it), one split of the sequence's tokens (flash-decoding).
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    seq_len = tl.load(SeqLens + b)
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    mask_g = offs_g < GROUP
    q_heads = kv_head * GROUP + offs_g
    offs_dk = tl.arange(0, BLOCK_DK)
    mask_dk = offs_dk < HEAD_DIM_K
    offs_dv = tl.arange(0, BLOCK_DV)
    mask_dv = offs_dv < HEAD_DIM_V

    q = tl.load(
        Q + b * stride_qb + q_heads[:, None] * stride_qh + offs_dk[None, :] * stride_qd,
        mask=mask_g[:, None] & mask_dk[None, :],
        other=0.0,
    )

    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_DV], dtype=tl.float32)

    k_head = kv_head.to(tl.int64) * stride_kh
    v_head = kv_head.to(tl.int64) * stride_vh
    for n in range(start, end, BLOCK_N):
        offs_n = n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < end
        page = tl.load(
            PageTable + b * stride_ptb + (offs_n // page_size) * stride_ptp,
            mask=mask_n,
            other=0,
        ).to(tl.int64)
        slot = (offs_n % page_size).to(tl.int64)
        # int64: under token-major views stride_kp is page_size * entry elements,
        # which overflows int32 after a few thousand pages.
        k_rows = page * stride_kp + slot * stride_kt + k_head
        v_rows = page * stride_vp + slot * stride_vt + v_head

        k = tl.load(
            K + k_rows[:, None] + offs_dk[None, :] * stride_kd,
            mask=mask_n[:, None] & mask_dk[None, :],
            other=0.0,
        )
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)

        v = tl.load(
            V + v_rows[:, None] + offs_dv[None, :] * stride_vd,
            mask=mask_n[:, None] & mask_dv[None, :],
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # An empty split (start >= seq_len) leaves l_i == 0: it writes out 0 and
    # lse -inf, which the combine step weighs as 0.
    nonempty = l_i > 0
    out = acc / tl.where(nonempty, l_i, 1.0)[:, None]
    lse = tl.where(nonempty, m_i + tl.log(tl.where(nonempty, l_i, 1.0)), float("-inf"))

    tl.store(
        PartialOut
        + b * stride_ob
        + q_heads[:, None] * stride_oh
        + split * stride_os
        + offs_dv[None, :] * stride_od,
        out,
        mask=mask_g[:, None] & mask_dv[None, :],
    )
    tl.store(
        PartialLse + b * stride_lb + q_heads * stride_lh + split * stride_ls,
        lse,
        mask=mask_g,
    )
