"""kv_layout_guard on real pools, driven by the (code, bad, fixed) table."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict

import pytest
import torch
from shim_hazard_cases import HAZARD_CASES, HazardCase

from runtime_shim import (
    ContiguousMHAPool,
    ForwardBatch,
    KVIndexTranslator,
    KVLayoutError,
    KVWriteLoc,
    TokenMajorMHAPool,
    kv_layout_guard,
    paged_kv_view,
    paged_row_view,
    paged_view,
    unwrap_write_loc,
)

H, D, PAGE_SIZE = 4, 16, 4
GEOMETRY = dict(num_slots=16, page_size=PAGE_SIZE, layer_num=2, k_heads=H, k_dim=D,
                v_heads=H, v_dim=D, dtype=torch.float16, device="cpu")
WRITE_CASES = [c for c in HAZARD_CASES if c.code.startswith("KV1")]
LAYOUT_CASES = [c for c in HAZARD_CASES if c.code.startswith("KV2")]


def _ids(cases):
    return [c.id for c in cases]


def _namespace(pool: Any) -> Dict[str, Any]:
    batch = SimpleNamespace(out_cache_loc=torch.tensor([0, 5]), out_cache_loc_id_space="virtual",
                            encoder_out_cache_loc=torch.tensor([1]))
    translator = KVIndexTranslator(torch.tensor([3, 2, 1, 0]), PAGE_SIZE)
    translator.rebind_write_loc(batch)
    g = torch.Generator().manual_seed(0)
    return dict(
        ForwardBatch=ForwardBatch, translator=translator, runner_slots=batch.out_cache_loc.clone(),
        pool=pool, layer=SimpleNamespace(layer_id=1, is_cross_attention=False),
        forward_batch=batch, k=torch.randn(2, H, D, generator=g).half(),
        v=torch.randn(2, H, D, generator=g).half(), page_size=PAGE_SIZE, H=H, D=D,
        torch=torch, KVWriteLoc=KVWriteLoc, unwrap_write_loc=unwrap_write_loc,
        paged_view=paged_view, paged_kv_view=paged_kv_view, paged_row_view=paged_row_view,
    )


def _run(snippet: str, pool: Any) -> Dict[str, Any]:
    namespace = _namespace(pool)
    exec(compile(snippet, "<hazard>", "exec"), namespace)
    return namespace


def test_table_covers_every_runtime_rule_and_ids_are_unique():
    assert {c.code for c in HAZARD_CASES} == {"KV101", "KV102", "KV103", "KV105", "KV201", "KV202", "KV203"}
    assert len({c.id for c in HAZARD_CASES}) == len(HAZARD_CASES)


@pytest.mark.parametrize("case", WRITE_CASES, ids=_ids(WRITE_CASES))
def test_bad_write_is_refused_by_a_strict_pool(case: HazardCase):
    pool = TokenMajorMHAPool(**GEOMETRY)
    with pytest.raises(AssertionError, match="not marked"):
        _run(case.bad, pool)
    assert int(pool.raw.count_nonzero()) == 0


@pytest.mark.parametrize("case", WRITE_CASES, ids=_ids(WRITE_CASES))
def test_fixed_write_lands_at_the_translated_slots(case: HazardCase):
    pool = TokenMajorMHAPool(**GEOMETRY)
    namespace = _run(case.fixed, pool)
    # Virtual 0 and 5 sit on virtual pages 0 and 1, mapped to physical 3 and 2.
    assert torch.equal(pool.get_key_buffer(1)[12], namespace["k"][0])
    assert torch.equal(pool.get_value_buffer(1)[9], namespace["v"][1])


@pytest.mark.parametrize("case", WRITE_CASES, ids=_ids(WRITE_CASES))
def test_guard_records_bad_writes_on_a_non_strict_pool(case: HazardCase):
    with kv_layout_guard() as guard:
        pool = TokenMajorMHAPool(**GEOMETRY, strict=False)
        _run(case.bad, pool)
        _run(case.fixed, pool)
    assert len(guard.unmarked_writes) == 1
    record = guard.unmarked_writes[0]
    assert (record.pool, record.door, record.layer_id) == ("TokenMajorMHAPool", "set_kv_buffer", 1)
    assert record.where.startswith("<hazard>:")


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_ids(LAYOUT_CASES))
def test_bad_layout_op_raises_its_code_under_the_guard(case: HazardCase):
    with kv_layout_guard():
        pool = TokenMajorMHAPool(**GEOMETRY)
        with pytest.raises(KVLayoutError, match=rf"^{case.code} ") as info:
            _run(case.bad, pool)
    assert info.value.code == case.code


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_ids(LAYOUT_CASES))
def test_fixed_layout_op_runs_clean_under_the_guard(case: HazardCase):
    with kv_layout_guard() as guard:
        namespace = _run(case.fixed, TokenMajorMHAPool(**GEOMETRY))
    bound = [namespace[line.split(" = ")[0].split(", ")[-1]] for line in case.fixed.splitlines() if " = " in line and line[0] != " "]
    # The fixed spelling produced its tensor, and the guard saw nothing to record.
    assert any(isinstance(value, torch.Tensor) and value.numel() > 0 for value in bound)
    assert guard.unmarked_writes == []


@pytest.mark.parametrize("case", HAZARD_CASES, ids=_ids(HAZARD_CASES))
def test_nothing_is_flagged_on_a_contiguous_pool(case: HazardCase):
    with kv_layout_guard() as guard:
        pool = ContiguousMHAPool(**GEOMETRY)
        _run(case.bad, pool)
        _run(case.fixed, pool)
    assert guard.unmarked_writes == []


def test_kv201_is_silent_without_the_guard():
    # The reason the guard exists: unguarded, the bad spelling succeeds and
    # hands a kernel a shape that hides an entry-sized in-page stride.
    namespace = _run(LAYOUT_CASES[0].bad, TokenMajorMHAPool(**GEOMETRY))
    k_cache = namespace["k_cache"]
    assert k_cache.shape == (4, PAGE_SIZE, H, D)
    assert k_cache.stride(1) == 2 * GEOMETRY["layer_num"] * H * D != H * D


def test_guard_knows_pools_registered_after_creation():
    pool = TokenMajorMHAPool(**GEOMETRY)
    with kv_layout_guard() as guard:
        pool.get_key_buffer(0).view(-1, PAGE_SIZE, H, D)  # unknown pool: not flagged
        guard.register(pool)
        with pytest.raises(KVLayoutError, match="KV201"):
            pool.get_key_buffer(0).view(-1, PAGE_SIZE, H, D)


def test_pools_passed_to_the_constructor_are_known():
    pool = TokenMajorMHAPool(**GEOMETRY)
    with kv_layout_guard(pool):
        with pytest.raises(KVLayoutError, match="KV202"):
            pool.get_value_buffer(1).contiguous()


def test_paged_helpers_and_pool_internals_are_never_flagged():
    with kv_layout_guard() as guard:
        pool = TokenMajorMHAPool(**GEOMETRY, strict=False)
        k_cache = pool.get_key_buffer(0)
        for page_size in (1, 2, PAGE_SIZE, 16):
            paged_view(k_cache, page_size)
            paged_kv_view(k_cache, page_size, H, D)
            paged_row_view(k_cache, page_size)
        pool.set_kv_buffer(0, KVWriteLoc(torch.tensor([3]), id_space="kernel"),
                           torch.ones(1, H, D), torch.ones(1, H, D))
    assert guard.unmarked_writes == []


def test_views_that_keep_the_slot_dim_are_allowed():
    with kv_layout_guard():
        pool = TokenMajorMHAPool(**GEOMETRY)
        k_cache = pool.get_key_buffer(0)
        assert k_cache.view(16, H * D).shape == (16, H * D)
        assert k_cache.reshape(16, H * D).data_ptr() == k_cache.data_ptr()
        assert k_cache.flatten(1).shape == (16, H * D)
        assert k_cache[3].contiguous().shape == (H, D)  # a row gathered out of the pool
        paged = paged_kv_view(k_cache, PAGE_SIZE, H, D)
        assert paged.view(-1, PAGE_SIZE, H, D).shape == paged.shape  # head_group_num == 1
        assert k_cache.view(torch.int16).dtype == torch.int16


def test_guard_exits_cleanly_and_stops_watching():
    with kv_layout_guard():
        pool = TokenMajorMHAPool(**GEOMETRY)
    pool.get_key_buffer(0).contiguous()
    pool2 = TokenMajorMHAPool(**GEOMETRY)
    with kv_layout_guard() as guard:
        pool2.get_key_buffer(0).view(-1, PAGE_SIZE, H, D)
    assert guard.unmarked_writes == []


def test_an_error_from_an_unrelated_view_is_not_relabelled():
    with kv_layout_guard():
        pool = TokenMajorMHAPool(**GEOMETRY)
        with pytest.raises(RuntimeError) as info:
            pool.get_key_buffer(0).view(7, 3)
    assert not isinstance(info.value, KVLayoutError)


def test_kv_layout_error_is_a_runtime_error():
    # Code that already catches the RuntimeError torch raises for KV203
    # keeps working under the guard.
    with kv_layout_guard():
        pool = TokenMajorMHAPool(**GEOMETRY)
        paged = paged_kv_view(pool.get_key_buffer(0), PAGE_SIZE, H, D)
        with pytest.raises(RuntimeError, match="KV203"):
            paged.view(-1, PAGE_SIZE, H // 2, D)


def test_registering_something_without_a_raw_buffer_is_a_type_error():
    with pytest.raises(TypeError, match="cannot watch a ContiguousMHAPool"):
        kv_layout_guard(ContiguousMHAPool(**GEOMETRY))
