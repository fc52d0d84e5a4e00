"""Executable (code, bad, fixed) snippets, one or more per kvlint rule.

Each ``bad`` snippet is what the static rule of the same code flags; each
``fixed`` one is what it (or its author) should become. `test_shim_guard.py`
runs them on real pools: a bad KV1xx snippet is refused by a strict
token-major pool (and recorded by the guard on a non-strict one), a bad KV2xx
snippet raises `KVLayoutError` with its code under `kv_layout_guard`, every
fixed snippet runs clean, and none of them is flagged on a contiguous pool.
The rule tests can pair the same strings with the rules' INVALID / VALID
examples, so each rule is shown to matter at run time.

Names the snippets use (bound by the runner): ``pool``, ``layer`` (has
``layer_id`` and ``is_cross_attention``), ``forward_batch`` (rebound, so its
``out_cache_loc`` is kernel-facing and marked), ``k``, ``v`` (rows for
``forward_batch.out_cache_loc``), ``page_size``, ``H``, ``D``, ``torch``,
``KVWriteLoc``, ``unwrap_write_loc``, ``paged_view``, ``paged_kv_view``,
``paged_row_view``, ``ForwardBatch``, ``translator`` (the pool's
`KVIndexTranslator`) and ``runner_slots`` (a runner's own slot buffer: the
physical slots of ``forward_batch``'s tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class HazardCase:
    code: str
    name: str
    bad: str
    fixed: str

    @property
    def id(self) -> str:
        return f"{self.code}-{self.name}"


HAZARD_CASES: Tuple[HazardCase, ...] = (
    HazardCase(
        "KV101",
        "bare-batch-loc",
        bad="pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n",
        fixed="pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n",
    ),
    HazardCase(
        "KV101",
        "cross-attention-idiom",
        bad=(
            "cache_loc = (\n"
            "    forward_batch.out_cache_loc\n"
            "    if not layer.is_cross_attention\n"
            "    else forward_batch.encoder_out_cache_loc\n"
            ")\n"
            "pool.set_kv_buffer(layer, cache_loc, k, v)\n"
        ),
        fixed="pool.set_kv_buffer(layer, KVWriteLoc.for_layer(forward_batch, layer), k, v)\n",
    ),
    HazardCase(
        "KV102",
        "write-loc-without-mark",
        bad="pool.set_kv_buffer(layer, KVWriteLoc(forward_batch.out_cache_loc), k, v)\n",
        fixed="pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n",
    ),
    HazardCase(
        "KV103",
        "mark-dropped-by-wrapper",
        bad=(
            "def set_kv_buffer(layer, loc_info, cache_k, cache_v):\n"
            "    loc, _swa_loc, _full_loc = unwrap_write_loc(loc_info)\n"
            "    pool.set_kv_buffer(layer, loc, cache_k, cache_v)\n"
            "\n"
            "set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n"
        ),
        fixed=(
            "def set_kv_buffer(layer, loc_info, cache_k, cache_v):\n"
            "    pool.set_kv_buffer(layer, loc_info, cache_k, cache_v)\n"
            "\n"
            "set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n"
        ),
    ),
    HazardCase(
        "KV105",
        "capture-batch-never-bound",
        bad=(
            "def forward(batch):\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(batch), k, v)\n"
            "\n"
            "capture_batch = ForwardBatch(out_cache_loc=runner_slots)\n"
            "forward(capture_batch)\n"
        ),
        fixed=(
            "def forward(batch):\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(batch), k, v)\n"
            "\n"
            "capture_batch = ForwardBatch(out_cache_loc=runner_slots)\n"
            "translator.bind_runner_slots(capture_batch)\n"
            "forward(capture_batch)\n"
        ),
    ),
    HazardCase(
        "KV201",
        "split-slots-into-pages",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "k_cache = k_cache.view(-1, page_size, H, D)\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "k_cache = paged_kv_view(k_cache, page_size, H, D)\n"
        ),
    ),
    HazardCase(
        "KV201",
        "page-size-one",
        bad=(
            "k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
            "v_cache = v_cache.view(-1, 1, H, D)\n"
        ),
        fixed=(
            "k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
            "v_cache = paged_view(v_cache, 1)\n"
        ),
    ),
    HazardCase(
        "KV201",
        "split-slots-into-row-pages",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "rows = k_cache.view(-1, page_size, H * D)\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "rows = paged_row_view(k_cache, page_size)\n"
        ),
    ),
    HazardCase(
        "KV202",
        "reshape-copies",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "flat = k_cache.reshape(-1, D)\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "rows = k_cache.view(k_cache.shape[0], H * D)\n"
        ),
    ),
    HazardCase(
        "KV202",
        "torch-reshape-copies",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "flat = torch.reshape(k_cache, (-1,))\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "pages = paged_row_view(k_cache, page_size)\n"
        ),
    ),
    HazardCase(
        "KV202",
        "contiguous-copies-the-sub-pool",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "k_cache = k_cache.contiguous()\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "rows = k_cache[forward_batch.out_cache_loc]\n"
        ),
    ),
    HazardCase(
        "KV202",
        "flatten-copies",
        bad=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "flat = k_cache.flatten()\n"
        ),
        fixed=(
            "k_cache = pool.get_key_buffer(layer.layer_id)\n"
            "rows = k_cache.flatten(1)\n"
        ),
    ),
    HazardCase(
        "KV203",
        "head-regroup-view",
        bad=(
            "k_cache = paged_kv_view(pool.get_key_buffer(layer.layer_id), page_size, H, D)\n"
            "head_group_num = 2\n"
            "k_cache = k_cache.view(-1, page_size, H // head_group_num, D)\n"
        ),
        fixed=(
            "k_cache = paged_kv_view(pool.get_key_buffer(layer.layer_id), page_size, H, D)\n"
            "head_group_num = 1 if not k_cache.is_contiguous() else 2\n"
            "assert head_group_num == 1 or k_cache.is_contiguous()\n"
            "if head_group_num != 1:\n"
            "    k_cache = k_cache.view(-1, page_size, H // head_group_num, D)\n"
        ),
    ),
)
