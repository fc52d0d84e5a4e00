"""Real token-major KV pools, so every kvlint rule has a run-time demonstration.

`layout` describes the entry, `paged` builds paged views that keep its
strides, `batch` holds the id-space mark, `write_loc` and `translate` carry it
from the batch to the pool, `pool` holds the pools with marked write doors, and
`guard` raises on layout-sensitive ops at run time with the static rule's code, and
`parity` checks that a kernel gives the same answer on a token-major pool as
on a contiguous cache (`runtime_shim.parity`, imported on its own).
"""

from runtime_shim.batch import ForwardBatch
from runtime_shim.contiguous import ContiguousMHAPool, ContiguousMLAPool
from runtime_shim.guard import IndexWidthHazard, KVLayoutError, UnmarkedWrite, kv_layout_guard
from runtime_shim.layout import (
    ENTRY_ALIGN_BYTES,
    ROW_ALIGN_BYTES,
    DenseEntryLayout,
    DensePart,
    build_dense_views,
    dense_part_views,
    mha_entry_layout,
    mla_entry_layout,
)
from runtime_shim.paged import paged_kv_view, paged_row_view, paged_view
from runtime_shim.pool import TokenMajorMHAPool, TokenMajorMLAPool
from runtime_shim.translate import KVIndexTranslator, translate_loc
from runtime_shim.write_loc import (
    KVWriteLoc,
    unwrap_write_loc,
    write_loc_is_kernel_facing,
)

__all__ = [
    "ENTRY_ALIGN_BYTES",
    "ROW_ALIGN_BYTES",
    "ContiguousMHAPool",
    "ContiguousMLAPool",
    "DenseEntryLayout",
    "DensePart",
    "ForwardBatch",
    "IndexWidthHazard",
    "KVIndexTranslator",
    "KVLayoutError",
    "KVWriteLoc",
    "TokenMajorMHAPool",
    "TokenMajorMLAPool",
    "UnmarkedWrite",
    "build_dense_views",
    "dense_part_views",
    "kv_layout_guard",
    "mha_entry_layout",
    "mla_entry_layout",
    "paged_kv_view",
    "paged_row_view",
    "paged_view",
    "translate_loc",
    "unwrap_write_loc",
    "write_loc_is_kernel_facing",
]
