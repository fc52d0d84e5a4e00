"""Upstream SGLang's own Triton kernels on token-major pools, through the
stride-parity harness (`runtime_shim.parity`).

The kernels are the files of the pinned sglang wheel (`upstream_kernels`),
not copies: decode (grouped-query, plain MHA, and MLA via ``has_mla``),
extend (prefill over a cached prefix), and the fused rope-and-store kernel.
Their in-tree imports are replaced by the stand-ins listed in
``upstream_kernels.STAND_INS``; each one either answers what upstream
answers on this machine or raises if it is consulted at all, so none can
change a result silently.

Compiled on CUDA at the sizes SGLang runs; on CPU under the interpreter at
CI sizes (the conftest sets ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import zipfile

import pytest
import torch

import upstream_calls
import upstream_kernels
from kv_gpu_helpers import DEVICE, DTYPES, ON_CUDA, sized
from runtime_shim import paged_view
from runtime_shim.kernels import paged_decode_attention_reference
from runtime_shim.parity import (
    MHAGeometry,
    MLAGeometry,
    ParityError,
    build_pools,
    check_index_width,
    check_stride_parity,
    overflow_slot,
)


@pytest.fixture(scope="module", autouse=True)
def upstream():
    """Load the wheel's kernel files once; an unavailable wheel fails here,
    naming why (a moved file raises `UpstreamKernelMissing`)."""
    return upstream_kernels.load()


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


GQA = MHAGeometry(layer_num=3, k_heads=2, k_dim=64, v_heads=2, v_dim=64)
GQA_NARROW_V = MHAGeometry(layer_num=3, k_heads=2, k_dim=64, v_heads=2, v_dim=32)
MLA = MLAGeometry(layer_num=3, latent_dim=256, rope_dim=32)
BIG = dict(batch=4, max_len=300)  # compiled runs: several pages and splits per sequence
SMALL = dict(batch=2, max_len=40)
SIZE = sized(BIG, SMALL)

# (callable, geometry, page size, dtype, index dtype). Compiled: every
# combination, plus int32 indices (what upstream's other backends allocate;
# harmless below 2^31 elements). Interpreted: each kernel path at page sizes 1
# and 16 across the two dtypes, one of them with int32 indices.
I64, I32 = torch.int64, torch.int32
DECODE_CASES = sized(
    [
        (call, geo, ps, dt, I64)
        for call, geo in (("decode_mha", GQA), ("decode_mha", GQA_NARROW_V), ("decode_mha_group1", GQA_NARROW_V), ("decode_mla", MLA))
        for ps in (1, 16, 64)
        for dt in DTYPES
    ] + [("decode_mha", GQA, 16, dt, I32) for dt in DTYPES],
    [
        ("decode_mha", GQA, 1, DTYPES[0], I64),
        ("decode_mha", GQA_NARROW_V, 16, DTYPES[1], I64),
        ("decode_mha_group1", GQA_NARROW_V, 1, DTYPES[1], I32),
        ("decode_mla", MLA, 1, DTYPES[1], I64),
        ("decode_mla", MLA, 16, DTYPES[0], I64),
    ],
)


def _case_id(case) -> str:
    call, geo, ps, dt, idx = case
    widths = f"k{geo.k_dim}v{geo.v_dim}" if isinstance(geo, MHAGeometry) else f"latent{geo.latent_dim}rope{geo.rope_dim}"
    return f"{call}-{widths}-ps{ps}-{_dt(dt)}-{_dt(idx)}"


@pytest.mark.parametrize("case", DECODE_CASES, ids=[_case_id(c) for c in DECODE_CASES])
def test_upstream_decode_is_bit_equal_on_token_major(case):
    call, geo, page_size, dtype, index_dtype = case
    report = check_stride_parity(
        getattr(upstream_calls, call), geo, page_size=page_size, dtype=dtype, device=DEVICE,
        index_dtype=index_dtype, **SIZE,
    )
    assert report.control_max_abs_diff > 0.1, report


def test_upstream_decode_matches_a_float32_reference():
    # Bit-equal across layouts would also hold for a kernel computing garbage;
    # this pins that it computes attention.
    pools = build_pools(GQA, page_size=16, dtype=torch.float32, device=DEVICE, **SIZE)
    run = pools.run("token_major", 1)
    out = upstream_calls.decode_mha(run)
    q = run.randn(run.batch, GQA.k_heads * upstream_calls.GROUP, GQA.k_dim, salt=1)
    ref = paged_decode_attention_reference(
        q, run.paged(run.k), run.paged(run.v), run.page_table, run.seq_lens
    )
    # Compiled, Triton's tl.dot multiplies float32 as TF32 (10-bit mantissa) on
    # this hardware; the interpreter multiplies in full float32.
    assert (out - ref).abs().max() < sized(2e-3, 1e-5)


EXTEND_CASES = sized(
    [(geo, ps, dt) for geo in (GQA, GQA_NARROW_V) for ps in (1, 16, 64) for dt in DTYPES],
    [(GQA, 1, DTYPES[0]), (GQA_NARROW_V, 16, DTYPES[1])],
)


@pytest.mark.parametrize(
    "case", EXTEND_CASES, ids=[f"k{g.k_dim}v{g.v_dim}-ps{ps}-{_dt(dt)}" for g, ps, dt in EXTEND_CASES]
)
def test_upstream_extend_is_bit_equal_on_token_major(case):
    geo, page_size, dtype = case
    check_stride_parity(upstream_calls.extend_mha, geo, page_size=page_size, dtype=dtype, device=DEVICE, **SIZE)


STORE_CASES = sized([(ps, dt) for ps in (1, 16, 64) for dt in DTYPES], [(16, DTYPES[0])])


@pytest.mark.parametrize("case", STORE_CASES, ids=[f"ps{ps}-{_dt(dt)}" for ps, dt in STORE_CASES])
def test_upstream_rope_store_through_a_paged_view_lands_in_the_pool(case):
    page_size, dtype = case
    # The harness compares every layer of both pools byte for byte after the
    # write; its control (writes through the stride-naive view) must change them.
    report = check_stride_parity(upstream_calls.rope_store, GQA, page_size=page_size, dtype=dtype, device=DEVICE, **SIZE)
    assert report.control_pool_changed


def test_upstream_rope_store_through_a_contiguous_copy_never_reaches_the_pool():
    # What KV202 flags: `.contiguous()` on a strided pool view packs a copy;
    # the kernel writes the copy and the pool keeps its old bytes.
    pools = build_pools(GQA, page_size=16, dtype=DTYPES[0], device=DEVICE, **SMALL)
    run = pools.run("token_major", 1)
    before = pools.token_major.raw.clone()
    k_copy, v_copy = run.k.contiguous(), run.v.contiguous()
    store = upstream_kernels.fused_qk_rope_reshape_and_cache()
    slots = run.kv_indices[: upstream_calls.STORE_TOKENS]
    t, heads, dim = len(slots), GQA.k_heads, GQA.k_dim
    new_k = run.randn(t, heads, dim, salt=8)
    freqs = run.randn(64, dim // 2, salt=10, dtype=torch.float32)
    cos_sin = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(run.dtype)
    store(
        run.randn(t, heads, dim, salt=7), new_k, run.randn(t, heads, dim, salt=9),
        paged_view(k_copy, 16), paged_view(v_copy, 16), slots, torch.arange(t, device=DEVICE),
        cos_sin, None, None, is_neox=True, flash_layout=True, output_zeros=False,
    )
    assert not torch.equal(k_copy[slots], run.k[slots]), "the kernel wrote nothing: this test could not fail"
    assert torch.equal(pools.token_major.raw, before), "a write through a .contiguous() copy reached the pool"


def test_harness_rejects_a_kernel_that_ignores_the_cache():
    # The negative control at work: a callable that never reads k/v cannot pass.
    def ignores_cache(run):
        return run.randn(run.batch, 4, 8)

    with pytest.raises(ParityError, match="negative control failed"):
        check_stride_parity(ignores_cache, GQA, page_size=16, dtype=DTYPES[0], device=DEVICE, **SMALL)


def test_harness_rejects_upstream_decode_fed_a_stride_naive_view():
    # A backend that hands the kernel `.view`-derived strides (KV201) fails the
    # parity check itself, naming the slot stride.
    def naive_backend(run):
        if run.layout == "token_major":
            k = run.k.as_strided(run.k.shape, (run.k.shape[1] * run.k.shape[2], run.k.shape[2], 1), run.k.storage_offset())
            v = run.v.as_strided(run.v.shape, (run.v.shape[1] * run.v.shape[2], run.v.shape[2], 1), run.v.storage_offset())
            run.k, run.v = k, v
        return upstream_calls.decode_mha(run)

    with pytest.raises(ParityError, match="does not honour the slot stride"):
        check_stride_parity(naive_backend, GQA, page_size=16, dtype=DTYPES[0], device=DEVICE, **SMALL)


# The large-pool case: 2^31 elements and more. Compiled: the geometry
# (32 layers, 8 KV heads, head dim 128: a 65,536-element entry, 8 GiB at
# 65,600 slots in fp16). Interpreted: one KV head and 256 layers give the same
# entry with an eighth of the programs; the pool is the smallest that crosses
# 2^31 elements (about 4 GiB, allocated with torch.empty: only the touched
# rows become resident).
LARGE = sized(MHAGeometry(32, 8, 128, 8, 128), MHAGeometry(256, 1, 128, 1, 128))
LARGE_PAGE_SIZES = sized([1, 64], [1])


@pytest.mark.parametrize("page_size", LARGE_PAGE_SIZES)
def test_upstream_decode_overflows_32_bit_offsets_with_int32_indices(page_size):
    slots = sized(65536 + 64, None)
    verdicts = check_index_width(
        "upstream_calls:decode_mha", LARGE, page_size=page_size, dtype=torch.float16, device=DEVICE,
        num_slots=slots, timeout=sized(300, 120),
    )
    by_dtype = {v.index_dtype: v for v in verdicts}
    wide, narrow = by_dtype["int64"], by_dtype["int32"]
    assert wide.elements > 2**31
    assert wide.ok, str(wide)
    assert not narrow.ok, f"int32 indices past 2^31 elements read the right rows: {narrow}"
    assert narrow.status in ("crashed", "differs"), str(narrow)
    assert overflow_slot(LARGE.entry_elements(torch.float16)) == 32768
    assert "offsets overflow 32 bits at 32768 slots" in str(narrow)


def test_a_moved_kernel_file_fails_naming_the_file(tmp_path):
    wheel = upstream_kernels.sglang_wheel()
    missing = "sglang/kernels/ops/attention/no_such_kernel.py"
    with pytest.raises(upstream_kernels.UpstreamKernelMissing, match=f"{wheel.name} has no {missing}"):
        upstream_kernels.extract(wheel, tmp_path, [missing])
    with zipfile.ZipFile(wheel) as archive:
        assert set(upstream_kernels.FILES.values()) <= set(archive.namelist())


def test_a_renamed_kernel_function_fails_naming_the_file():
    with pytest.raises(upstream_kernels.UpstreamKernelMissing, match="decode_attention.py in sglang .* has no 'decode_attention_fwd_v2'"):
        upstream_kernels.kernel("decode_attention", "decode_attention_fwd_v2")


def test_stand_ins_raise_when_upstream_consults_them_off_rocm():
    decode = upstream_kernels.load()["sglang.kernels.ops.attention.decode_attention"]
    with pytest.raises(AssertionError, match="SGLANG_TRITON_DECODE_ATTN_STATIC_KV_SPLITS"):
        decode.envs.SGLANG_TRITON_DECODE_ATTN_STATIC_KV_SPLITS.get()
    assert decode._is_hip is False
    extend = upstream_kernels.load()["sglang.kernels.ops.attention.extend_attention"]
    assert extend._is_cuda is ON_CUDA
