"""KVWriteLoc, its mark, and the translation step that sets it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from runtime_shim import KVIndexTranslator, KVWriteLoc, translate_loc, unwrap_write_loc, write_loc_is_kernel_facing


def _batch(loc, space="virtual", encoder_loc=None):
    return SimpleNamespace(
        out_cache_loc=torch.tensor(loc), out_cache_loc_id_space=space,
        encoder_out_cache_loc=None if encoder_loc is None else torch.tensor(encoder_loc),
    )


def test_plain_constructor_is_virtual_and_not_kernel_facing():
    loc = KVWriteLoc(torch.tensor([1, 2]))
    assert loc.id_space == "virtual"
    assert not write_loc_is_kernel_facing(loc)


def test_bare_tensor_is_never_kernel_facing():
    assert not write_loc_is_kernel_facing(torch.tensor([1, 2]))


def test_unknown_id_space_is_refused():
    with pytest.raises(ValueError, match="'physical'"):
        KVWriteLoc(torch.tensor([1]), id_space="physical")


@pytest.mark.parametrize("space", ["virtual", "kernel"])
def test_for_batch_carries_the_batch_mark(space):
    batch = _batch([3, 4], space)
    loc = KVWriteLoc.for_batch(batch)
    assert loc.loc is batch.out_cache_loc
    assert loc.id_space == space
    assert write_loc_is_kernel_facing(loc) == (space == "kernel")


def test_for_batch_without_a_mark_attribute_is_virtual():
    loc = KVWriteLoc.for_batch(SimpleNamespace(out_cache_loc=torch.tensor([0])))
    assert loc.id_space == "virtual"


def test_for_layer_on_self_attention_is_for_batch():
    batch = _batch([3, 4], "kernel", encoder_loc=[9])
    loc = KVWriteLoc.for_layer(batch, SimpleNamespace(is_cross_attention=False))
    assert loc.loc is batch.out_cache_loc and loc.id_space == "kernel"


def test_for_layer_on_cross_attention_writes_the_encoder_loc_unmarked():
    batch = _batch([3, 4], "kernel", encoder_loc=[9])
    loc = KVWriteLoc.for_layer(batch, SimpleNamespace(is_cross_attention=True))
    assert loc.loc is batch.encoder_out_cache_loc
    assert loc.id_space == "virtual"
    assert not write_loc_is_kernel_facing(loc)


def test_sub_pool_locs_are_narrowed_to_the_loc():
    loc = KVWriteLoc(
        torch.arange(3), swa_loc=torch.arange(10, 16), full_loc=torch.arange(20, 26), id_space="kernel"
    )
    assert loc.swa_loc.tolist() == [10, 11, 12]
    assert loc.full_loc.tolist() == [20, 21, 22]


def test_for_batch_passes_sub_pool_locs_through():
    loc = KVWriteLoc.for_batch(_batch([1, 2], "kernel"), swa_loc=torch.tensor([5, 6, 7]))
    assert loc.swa_loc.tolist() == [5, 6] and loc.full_loc is None


def test_unwrap_write_loc():
    loc = torch.tensor([1])
    assert unwrap_write_loc(loc) == (loc, None, None)
    full = torch.tensor([2])
    assert unwrap_write_loc(KVWriteLoc(loc, full_loc=full)) == (loc, None, full)


def test_translate_maps_virtual_pages_through_the_table():
    page_table = torch.tensor([5, 0, 2])
    virtual = torch.tensor([0, 3, 4, 7, 8, 11, -1])
    assert translate_loc(virtual, page_table, 4).tolist() == [20, 23, 0, 3, 8, 11, -1]


def test_translate_refuses_a_page_beyond_the_table():
    with pytest.raises(IndexError, match="virtual page 3 is beyond the page table of 3 pages"):
        translate_loc(torch.tensor([12]), torch.tensor([5, 0, 2]), 4)


def test_rebind_write_loc_translates_once_and_marks_the_batch():
    translator = KVIndexTranslator(torch.tensor([1, 0]), page_size=2)
    batch = _batch([0, 1, 2])
    translator.rebind_write_loc(batch)
    assert batch.out_cache_loc.tolist() == [2, 3, 0]
    assert batch.out_cache_loc_virtual.tolist() == [0, 1, 2]
    assert batch.out_cache_loc_id_space == "kernel"
    translator.rebind_write_loc(batch)  # a second call must not translate again
    assert batch.out_cache_loc.tolist() == [2, 3, 0]
    assert write_loc_is_kernel_facing(KVWriteLoc.for_batch(batch))
