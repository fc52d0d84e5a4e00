"""GPU kernels over paged KV views, with torch references.

``paged_decode_attention`` reads the cache's own strides and is correct on any
layout; ``paged_decode_attention_stride_naive`` derives them from the shape,
the silent bug of the token-major review thread, and exists for tests and
benchmarks only. Triton is imported on first kernel call, so this package
imports on machines without Triton or CUDA; ``triton_available()`` says
whether the kernels can run at all.
"""

from runtime_shim.kernels.paged_decode import (
    contiguous_strides,
    paged_decode_attention,
    paged_decode_attention_stride_naive,
    paged_mla_decode_attention,
    paged_mla_decode_attention_stride_naive,
    triton_available,
)
from runtime_shim.kernels.reference import (
    as_stride_naive,
    paged_decode_attention_reference,
    paged_decode_attention_reference_stride_naive,
    paged_mla_decode_attention_reference,
    paged_mla_decode_attention_reference_stride_naive,
)

__all__ = [
    "as_stride_naive",
    "contiguous_strides",
    "paged_decode_attention",
    "paged_decode_attention_reference",
    "paged_decode_attention_reference_stride_naive",
    "paged_decode_attention_stride_naive",
    "paged_mla_decode_attention",
    "paged_mla_decode_attention_reference",
    "paged_mla_decode_attention_reference_stride_naive",
    "paged_mla_decode_attention_stride_naive",
    "triton_available",
]
