"""`runtime_shim.parity` on runtime_shim's own Triton kernels: the harness
passes a stride-aware kernel, catches a stride-naive one, refuses a check
that could not fail, and gives the large-pool verdict from a child process.
"""

from __future__ import annotations

import pytest
import torch

from kv_gpu_helpers import DEVICE, DTYPES, sized
from runtime_shim.kernels import (
    paged_decode_attention,
    paged_decode_attention_stride_naive,
    paged_mla_decode_attention,
)
from runtime_shim.parity import (
    INT32_LIMIT,
    MHAGeometry,
    MLAGeometry,
    ParityError,
    ParityRun,
    build_pools,
    check_index_width,
    check_stride_parity,
    overflow_slot,
)

GROUP = 2


def shim_decode(run: ParityRun) -> torch.Tensor:
    """The README's example: a backend's decode step over the harness's views."""
    q = run.randn(run.batch, run.k.shape[1] * GROUP, run.k.shape[2])
    return paged_decode_attention(q, run.paged(run.k), run.paged(run.v), run.page_table, run.seq_lens)


def shim_mla_decode(run: ParityRun) -> torch.Tensor:
    q = run.randn(run.batch, 4, run.k.shape[2])
    return paged_mla_decode_attention(q, run.paged(run.k), run.page_table, run.seq_lens, latent_dim=run.v.shape[2])


def shim_decode_naive(run: ParityRun) -> torch.Tensor:
    q = run.randn(run.batch, run.k.shape[1] * GROUP, run.k.shape[2])
    return paged_decode_attention_stride_naive(q, run.paged(run.k), run.paged(run.v), run.page_table, run.seq_lens)


CASES = [
    ("equal-widths", MHAGeometry(3, 2, 64, 2, 64), shim_decode),
    ("different-widths", MHAGeometry(3, 2, 64, 2, 32), shim_decode),
    ("mla", MLAGeometry(3, 128, 32), shim_mla_decode),
]
PAGES_DTYPES = sized(
    [(ps, dt) for ps in (1, 16, 64) for dt in DTYPES],
    [(1, DTYPES[0]), (16, DTYPES[1])],
)


@pytest.mark.parametrize("page_size,dtype", PAGES_DTYPES, ids=[f"ps{p}-{str(d)[6:]}" for p, d in PAGES_DTYPES])
@pytest.mark.parametrize("name,geometry,kernel", CASES, ids=[c[0] for c in CASES])
def test_stride_aware_kernel_passes(name, geometry, kernel, page_size, dtype):
    report = check_stride_parity(kernel, geometry, page_size=page_size, dtype=dtype, device=DEVICE)
    assert report.control_max_abs_diff > 0.1
    assert report.entry_elements == geometry.entry_elements(dtype)
    assert "torch.equal" in str(report)


@pytest.mark.parametrize("page_size", [1, 16])
def test_stride_naive_kernel_fails_the_check(page_size):
    with pytest.raises(ParityError, match="output 0 differs .* does not honour the slot stride"):
        check_stride_parity(shim_decode_naive, MHAGeometry(3, 2, 64, 2, 64), page_size=page_size,
                            dtype=DTYPES[0], device=DEVICE)


def test_a_check_that_cannot_fail_is_refused():
    def reads_nothing(run):
        return run.randn(run.batch, 4)

    with pytest.raises(ParityError, match="negative control failed"):
        check_stride_parity(reads_nothing, MHAGeometry(2, 1, 16, 1, 16), page_size=1, dtype=DTYPES[0], device=DEVICE)


def test_a_write_that_misses_the_pool_is_caught():
    # Writing through a `.contiguous()` copy of the view: the outputs agree but
    # the pools do not, and the harness compares the pools after every run.
    def writes_a_copy(run):
        if run.layout == "contiguous":
            target = run.k
        else:
            target = run.k.contiguous()
        target[run.kv_indices[:3]] = run.randn(3, *run.k.shape[1:])
        return target[run.kv_indices[:3]]

    with pytest.raises(ParityError, match="pool view .* differs between the layouts"):
        check_stride_parity(writes_a_copy, MHAGeometry(2, 1, 16, 1, 16), page_size=1, dtype=DTYPES[0], device=DEVICE)


def test_pools_hold_identical_contents_in_every_layer():
    pools = build_pools(MHAGeometry(3, 2, 16, 2, 32), page_size=4, dtype=DTYPES[0], device=DEVICE)
    for layer in range(3):
        c, t = pools.run("contiguous", layer), pools.run("token_major", layer)
        assert torch.equal(c.k, t.k) and torch.equal(c.v, t.v)
        assert t.k.stride(0) == pools.token_major.entry_bytes // t.k.element_size() != c.k.stride(0)
    # Each sequence lives on whole pages; the token ids walk its page table.
    run = pools.run("token_major", 0)
    ids = run.kv_indices[: int(run.seq_lens[0])]
    pages = run.page_table[0, (torch.arange(len(ids), device=DEVICE) // 4)]
    assert torch.equal(ids // 4, pages)


def test_stride_aware_kernel_keeps_32_bit_indices_safe_on_a_large_pool():
    # runtime_shim's kernel widens the loaded page id (`.to(tl.int64)`) before
    # multiplying by the page stride, so int32 page tables are right past 2^31
    # elements too: the verdict is not "crash" by construction.
    geometry = sized(MHAGeometry(32, 8, 128, 8, 128), MHAGeometry(256, 1, 128, 1, 128))
    verdicts = check_index_width(
        "test_parity_harness:shim_decode", geometry, page_size=16, dtype=torch.float16, device=DEVICE,
        timeout=120,
    )
    assert [v.index_dtype for v in verdicts] == ["int64", "int32"]
    assert all(v.ok for v in verdicts), [str(v) for v in verdicts]
    assert verdicts[0].elements > INT32_LIMIT
    assert verdicts[0].slots >= overflow_slot(geometry.entry_elements(torch.float16))
