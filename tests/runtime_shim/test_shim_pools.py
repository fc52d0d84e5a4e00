"""Pools: marked write doors, physical bytes, and parity with contiguous pools."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from runtime_shim import (
    ContiguousMHAPool,
    ContiguousMLAPool,
    KVIndexTranslator,
    KVWriteLoc,
    TokenMajorMHAPool,
    TokenMajorMLAPool,
)

MHA = dict(num_slots=16, page_size=4, layer_num=3, k_heads=2, k_dim=16, v_heads=1, v_dim=8,
           dtype=torch.float16, device="cpu")
MLA = dict(num_slots=16, page_size=4, layer_num=3, latent_dim=32, rope_dim=8,
           dtype=torch.bfloat16, device="cpu")


def _layer(layer_id, cross=False):
    return SimpleNamespace(layer_id=layer_id, is_cross_attention=cross)


def _kv(tokens, seed=0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(tokens, 2, 16, generator=g).half()
    v = torch.randn(tokens, 1, 8, generator=g).half()
    return k, v


def _kernel_loc(ids):
    return KVWriteLoc(torch.tensor(ids), id_space="kernel")


@pytest.mark.parametrize("loc_info", [torch.tensor([1, 2]), KVWriteLoc(torch.tensor([1, 2]))],
                         ids=["bare-tensor", "unmarked-KVWriteLoc"])
def test_strict_mha_door_refuses_an_unmarked_loc(loc_info):
    pool = TokenMajorMHAPool(**MHA)
    with pytest.raises(AssertionError, match="not marked"):
        pool.set_kv_buffer(_layer(0), loc_info, *_kv(2))
    assert int(pool.raw.sum()) == 0


@pytest.mark.parametrize("door", ["set_kv_buffer", "set_mla_kv_buffer"])
def test_strict_mla_doors_refuse_an_unmarked_loc(door):
    pool = TokenMajorMLAPool(**MLA)
    args = {
        "set_kv_buffer": (torch.ones(1, 1, 40),),
        "set_mla_kv_buffer": (torch.ones(1, 1, 32), torch.ones(1, 1, 8)),
    }[door]
    with pytest.raises(AssertionError, match=f"TokenMajorMLAPool.{door}: write loc is not marked"):
        getattr(pool, door)(_layer(0), torch.tensor([3]), *args)


def test_marked_mha_write_lands_at_the_physical_bytes():
    pool = TokenMajorMHAPool(**MHA)
    k, v = _kv(3)
    ids, layer = [5, 0, 13], 2
    pool.set_kv_buffer(_layer(layer), _kernel_loc(ids), k, v)
    k_row, v_row = 2 * 16 * 2, 1 * 8 * 2
    rest = pool.raw.clone()
    for i, t in enumerate(ids):
        k_at = t * pool.entry_bytes + layer * (k_row + v_row)
        assert torch.equal(pool.raw[k_at : k_at + k_row].view(torch.float16).view(2, 16), k[i])
        v_at = k_at + k_row
        assert torch.equal(pool.raw[v_at : v_at + v_row].view(torch.float16).view(1, 8), v[i])
        rest[k_at : v_at + v_row] = 0
    assert int(rest.count_nonzero()) == 0  # nothing outside those rows moved


def test_marked_mla_write_lands_at_the_physical_bytes():
    pool = TokenMajorMLAPool(**MLA)
    latent = torch.randn(2, 1, 32).bfloat16()
    rope = torch.randn(2, 1, 8).bfloat16()
    pool.set_mla_kv_buffer(_layer(1), _kernel_loc([7, 2]), latent, rope)
    per_layer = (32 + 8) * 2
    for i, t in enumerate([7, 2]):
        at = t * pool.entry_bytes + 1 * per_layer
        row = pool.raw[at : at + per_layer].view(torch.bfloat16)
        assert torch.equal(row[:32], latent[i, 0]) and torch.equal(row[32:], rope[i, 0])
    key, value = pool.get_kv_buffer(1)
    assert torch.equal(key[7, 0], torch.cat([latent[0, 0], rope[0, 0]]))
    assert torch.equal(value[2], latent[1])


def test_full_loc_wins_over_loc():
    pool = TokenMajorMHAPool(**MHA)
    k, v = _kv(1)
    pool.set_kv_buffer(_layer(0), KVWriteLoc(torch.tensor([1]), full_loc=torch.tensor([9]),
                                            id_space="kernel"), k, v)
    assert torch.equal(pool.get_key_buffer(0)[9], k[0])
    assert int(pool.get_key_buffer(0)[1].abs().sum()) == 0


def test_rebind_then_for_batch_is_accepted_and_writes_translated_slots():
    pool = TokenMajorMHAPool(**MHA)
    translator = KVIndexTranslator(torch.tensor([3, 2, 1, 0]), page_size=4)
    batch = SimpleNamespace(out_cache_loc=torch.tensor([0, 5]), out_cache_loc_id_space="virtual")
    translator.rebind_write_loc(batch)
    k, v = _kv(2)
    pool.set_kv_buffer(_layer(0), KVWriteLoc.for_batch(batch), k, v)
    assert torch.equal(pool.get_key_buffer(0)[12], k[0])
    assert torch.equal(pool.get_key_buffer(0)[9], k[1])


def test_cross_attention_for_layer_is_refused_by_a_strict_pool():
    pool = TokenMajorMHAPool(**MHA)
    batch = SimpleNamespace(out_cache_loc=torch.tensor([0]), out_cache_loc_id_space="kernel",
                            encoder_out_cache_loc=torch.tensor([4]))
    with pytest.raises(AssertionError, match=r"not marked.*id_space='virtual'"):
        pool.set_kv_buffer(_layer(0, cross=True), KVWriteLoc.for_layer(batch, _layer(0, cross=True)), *_kv(1))


@pytest.mark.parametrize("loc_info", [torch.tensor([4, 1]), KVWriteLoc(torch.tensor([4, 1])),
                                      _kernel_loc([4, 1])], ids=["bare", "unmarked", "marked"])
def test_contiguous_pool_ignores_the_mark(loc_info):
    pool = ContiguousMHAPool(**MHA)
    k, v = _kv(2)
    pool.set_kv_buffer(_layer(1), loc_info, k, v)
    assert torch.equal(pool.get_key_buffer(1)[4], k[0])
    assert torch.equal(pool.get_value_buffer(1)[1], v[1])


def test_non_strict_token_major_pool_accepts_an_unmarked_loc():
    pool = TokenMajorMHAPool(**MHA, strict=False)
    k, v = _kv(1)
    pool.set_kv_buffer(_layer(0), torch.tensor([2]), k, v)
    assert torch.equal(pool.get_key_buffer(0)[2], k[0])


def test_mha_pools_agree_on_every_read():
    token_major, contiguous = TokenMajorMHAPool(**MHA), ContiguousMHAPool(**MHA)
    for layer in range(3):
        k, v = _kv(4, seed=layer)
        loc = _kernel_loc([layer, 15 - layer, 7, 8])
        for pool in (token_major, contiguous):
            pool.set_kv_buffer(_layer(layer), loc, k, v)
    for layer in range(3):
        for a, b in zip(token_major.get_kv_buffer(layer), contiguous.get_kv_buffer(layer)):
            assert a.shape == b.shape and torch.equal(a, b)
    assert token_major.get_key_buffer(0).stride(0) == token_major.entry_bytes // 2
    assert contiguous.get_key_buffer(0).is_contiguous()


def test_mla_pools_agree_on_every_read():
    token_major, contiguous = TokenMajorMLAPool(**MLA), ContiguousMLAPool(**MLA)
    g = torch.Generator().manual_seed(1)
    for layer in range(3):
        latent, rope = torch.randn(3, 1, 32, generator=g), torch.randn(3, 1, 8, generator=g)
        full_row = torch.randn(1, 1, 40, generator=g)
        for pool in (token_major, contiguous):
            pool.set_mla_kv_buffer(_layer(layer), _kernel_loc([0, 5, 11]), latent, rope)
            pool.set_kv_buffer(_layer(layer), _kernel_loc([14]), full_row)
    for layer in range(3):
        for a, b in zip(token_major.get_kv_buffer(layer), contiguous.get_kv_buffer(layer)):
            assert a.shape == b.shape and torch.equal(a, b)
        assert torch.equal(token_major.get_value_buffer(layer), contiguous.get_value_buffer(layer))


def test_accessors_take_an_int_or_a_layer():
    pool = TokenMajorMHAPool(**MHA)
    assert pool.get_key_buffer(2).data_ptr() == pool.get_key_buffer(_layer(2)).data_ptr()
    with pytest.raises(IndexError, match="layer 3 is outside this pool's 3 layers"):
        pool.get_key_buffer(3)


def test_write_rows_of_the_wrong_shape_are_refused():
    pool = TokenMajorMHAPool(**MHA)
    k, v = _kv(2)
    with pytest.raises(ValueError, match=r"k: expected 2 rows of shape \(2, 16\), got \(2, 1, 8\)"):
        pool.set_kv_buffer(_layer(0), _kernel_loc([0, 1]), v, v)


@pytest.mark.parametrize("cls", [TokenMajorMHAPool, ContiguousMHAPool])
def test_slot_count_must_be_a_whole_number_of_pages(cls):
    with pytest.raises(ValueError, match="num_slots=18 must be a positive multiple of page_size=4"):
        cls(**{**MHA, "num_slots": 18})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_token_major_pools_work_on_cuda():
    pool = TokenMajorMHAPool(**{**MHA, "device": "cuda"})
    k, v = _kv(2)
    pool.set_kv_buffer(_layer(0), KVWriteLoc(torch.tensor([3, 4], device="cuda"), id_space="kernel"),
                       k.cuda(), v.cuda())
    assert pool.get_key_buffer(0).is_cuda
    assert torch.equal(pool.get_key_buffer(0)[3].cpu(), k[0])
