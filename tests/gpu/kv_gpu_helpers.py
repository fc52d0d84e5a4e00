"""Shared set-up for tests/gpu: the device, CI-sized shapes, pools filled
through their write doors, page tables, sequence lengths, and the error
measure the parity checks use.

On CUDA the kernels run compiled at the full sizes; without CUDA the conftest
has set ``TRITON_INTERPRET=1`` and `sized` picks the small CPU shapes (the
interpreter runs each program instance in Python). Under the interpreter
bfloat16 is not faithful (numpy has no bfloat16), so the CPU shapes use
float16 and float32 as their two dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import List, Tuple

import torch

from runtime_shim import KVWriteLoc

ON_CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if ON_CUDA else "cpu")
# The two dtypes every parity case covers: bfloat16 compiled, float32 interpreted.
DTYPES = (torch.float16, torch.bfloat16) if ON_CUDA else (torch.float16, torch.float32)


def sized(cuda, cpu):
    """``cuda`` when the kernels run compiled, ``cpu`` under the interpreter."""
    return cuda if ON_CUDA else cpu


def synchronize() -> None:
    if ON_CUDA:
        torch.cuda.synchronize()


@dataclass(frozen=True)
class Layer:
    layer_id: int


def marked_loc(loc: torch.Tensor) -> KVWriteLoc:
    """The loc as a rebound batch hands it to a write door."""
    batch = SimpleNamespace(out_cache_loc=loc, out_cache_loc_id_space="kernel")
    return KVWriteLoc.for_batch(batch)


def make_sequences(
    gen: torch.Generator, batch: int, num_pages: int, page_size: int, max_len: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(page_table [batch, max_pages] int32, seq_lens [batch] int32) on DEVICE.

    Lengths are drawn so that sequences end mid-page and span several pages;
    pages are a random permutation so no sequence's pages are adjacent in
    order. Unused table entries point at page 0, which is valid memory.
    """
    lens = torch.randint(1, max_len + 1, (batch,), generator=gen)
    lens[0] = max_len  # at least one full-length sequence
    pages_per_seq = [-(-int(n) // page_size) for n in lens]
    max_pages = max(pages_per_seq)
    if sum(pages_per_seq) > num_pages:
        raise ValueError("pool too small for the drawn lengths")
    order = torch.randperm(num_pages, generator=gen)
    table = torch.zeros((batch, max_pages), dtype=torch.int32)
    cursor = 0
    for b, n in enumerate(pages_per_seq):
        table[b, :n] = order[cursor : cursor + n].to(torch.int32)
        cursor += n
    return table.to(DEVICE), lens.to(torch.int32).to(DEVICE)


def fill_mha_pools(
    pools: List[object],
    gen: torch.Generator,
    *,
    layer_num: int,
    num_slots: int,
    k_heads: int,
    k_dim: int,
    v_heads: int,
    v_dim: int,
    dtype: torch.dtype,
    chunks: int = 3,
) -> None:
    """Write the same random K/V for every slot of every layer into each pool,
    through ``set_kv_buffer``, in a few chunks of shuffled locs."""
    for layer_id in range(layer_num):
        locs = torch.randperm(num_slots, generator=gen).to(DEVICE)
        for loc in torch.tensor_split(locs, chunks):
            n = loc.shape[0]
            k = torch.randn((n, k_heads, k_dim), generator=gen).to(dtype).to(DEVICE)
            v = torch.randn((n, v_heads, v_dim), generator=gen).to(dtype).to(DEVICE)
            for pool in pools:
                pool.set_kv_buffer(Layer(layer_id), marked_loc(loc), k, v)


def fill_mla_pools(
    pools: List[object],
    gen: torch.Generator,
    *,
    layer_num: int,
    num_slots: int,
    latent_dim: int,
    rope_dim: int,
    dtype: torch.dtype,
    chunks: int = 3,
) -> None:
    """Same as `fill_mha_pools` through ``set_mla_kv_buffer``."""
    for layer_id in range(layer_num):
        locs = torch.randperm(num_slots, generator=gen).to(DEVICE)
        for loc in torch.tensor_split(locs, chunks):
            n = loc.shape[0]
            latent = torch.randn((n, 1, latent_dim), generator=gen).to(dtype).to(DEVICE)
            rope = torch.randn((n, 1, rope_dim), generator=gen).to(dtype).to(DEVICE)
            for pool in pools:
                pool.set_mla_kv_buffer(Layer(layer_id), marked_loc(loc), latent, rope)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere gives inf."""
    out64, ref64 = out.double(), ref.double()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).norm() / ref64.norm())


def tolerance(dtype: torch.dtype) -> float:
    # The kernel rounds softmax weights to the cache dtype before the P@V
    # product (as FlashAttention-style kernels do); bf16 keeps 8 mantissa bits.
    return 2e-2 if dtype == torch.bfloat16 else 3e-3


# A wrong read shows up as a relative error of order 1 (different random
# tokens); anything above this is unambiguously not rounding.
CORRUPTION = 0.1
