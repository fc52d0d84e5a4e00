"""A pool whose own gate is off may still hand the caller's mark on to a pool that checks it (issue
36, item 1: a door that forwards its loc takes what its target takes). The engine's SWA composite
builds unified sub-pools and writes `KVWriteLoc(swa_loc, physical=write_loc_is_physical(loc_info))`
to them: called with a bare loc, it raises there. A composite whose sub-pools are built by size (never
unified), or one that drops the mark before it hands the loc on, takes a bare loc by design."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edited_tree import write_edited
from kvlint.cli import main
from kvlint.learn.door_kinds import door_definitions
from test_door_classes import WRITE_LOC
from test_exact_receivers import POOLS

COMPOSITES = '''
from typing import Optional

from engine.pools import KVCache, MHAPool, UnifiedMHAPool
from engine.write_loc import KVWriteLoc, unwrap_write_loc, write_loc_is_physical


class Carrying(KVCache):
    def __init__(self, *, unified_buffer):
        self.full = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="full")
        self.swa = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="swa")

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        physical = write_loc_is_physical(loc_info)
        pool = self.swa if layer.is_swa else self.full
        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=physical), k, v)


class Sized(KVCache):
    def __init__(self, size, dtype, layer_num, pool_class: type = MHAPool):
        self.main: Optional[MHAPool] = pool_class(size=size, dtype=dtype, layer_num=layer_num)

    def _pool_for(self, layer):
        return self.main

    def set_kv_buffer(self, layer, loc_info, k, v):
        self._pool_for(layer).set_kv_buffer(layer, loc_info, k, v)
'''

BACKEND = '''
from engine.composites import Carrying, Sized


class Backend:
    def __init__(self, runner):
        self.carrying = Carrying(unified_buffer=runner.buffer)
        self.sized = Sized(runner.size, None, 2)

    def forward(self, layer, fb, k, v):
        self.carrying.set_kv_buffer(layer, fb.out_cache_loc, k, v)
        self.sized.set_kv_buffer(layer, fb.out_cache_loc, k, v)
'''

CARRYING_CALL = "self.carrying.set_kv_buffer("
SIZED_CALL = "self.sized.set_kv_buffer("


def _check(root: Path, composites: list[tuple[str, str]], *options: str) -> dict:
    write_edited(root, {"engine/write_loc.py": WRITE_LOC, "engine/pools.py": POOLS,
                        "engine/composites.py": COMPOSITES, "engine/backend.py": BACKEND},
                 {"engine/composites.py": composites})
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *options, "."], catch_exceptions=False)
    return json.loads(result.stdout)


def _lines(text: str) -> dict[str, int]:
    return {name: next(number for number, line in enumerate(text.splitlines(), 1) if call in line)
            for name, call in (("carrying", CARRYING_CALL), ("sized", SIZED_CALL))}


def flagged(root: Path, composites: list[tuple[str, str]] = []) -> set[str]:
    """The backend's calls KV101 reports after the given edits to the composites."""
    findings = _check(root, composites, "--select", "KV101")["findings"]
    lines = {finding["line"] for finding in findings if finding["path"].endswith("backend.py")}
    return {name for name, line in _lines(BACKEND).items() if line in lines}


def test_a_composite_handing_the_mark_to_unified_pools_needs_it(in_tmp: Path) -> None:
    assert flagged(in_tmp) == {"carrying"}


def test_prove_counts_the_carried_mark_raw_and_the_sized_holder_exempt(in_tmp: Path) -> None:
    prove = _check(in_tmp, [], "--prove")["prove"]
    lines = _lines(BACKEND)
    assert (prove["raw"], prove["exempt"]) == (1, 1)
    assert [(call["path"], call["line"]) for call in prove["exempt_calls"]] == [("engine/backend.py", lines["sized"])]


@pytest.mark.parametrize("composites, expected", [
    # The given loc handed on as it is carries its mark too.
    ([("        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=physical), k, v)",
       "        pool.set_kv_buffer(None, loc_info, k, v)")], {"carrying"}),
    # A new write loc bound to a local first, its mark read straight off the given one.
    ([("        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=physical), k, v)",
       "        write_loc = KVWriteLoc(loc, physical=loc_info.physical)\n"
       "        pool.set_kv_buffer(None, write_loc, k, v)")], {"carrying"}),
    # Dropping the mark (the unwrapped loc handed on bare): the caller's mark changes nothing there.
    ([("        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=physical), k, v)",
       "        pool.set_kv_buffer(None, loc, k, v)")], set()),
    # Sub-pools built by size are never unified: the composite takes a bare loc by design.
    ([('self.full = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="full")',
       "self.full = MHAPool(size=1, dtype=None, layer_num=1)"),
      ('self.swa = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="swa")',
       "self.swa = MHAPool(size=1, dtype=None, layer_num=1)")], set()),
    # A receiver kvlint cannot read may be a unified pool.
    ([("        pool = self.swa if layer.is_swa else self.full\n", "        pool = layer.pool\n")], {"carrying"}),
    # The annotation alone: the attribute may be any subclass, a unified one too.
    ([("self.main: Optional[MHAPool] = pool_class(size=size, dtype=dtype, layer_num=layer_num)",
       "self.main: Optional[MHAPool] = make_pool()")], {"carrying", "sized"}),
    # A subclass reading its pool another way runs the same set_kv_buffer through its own helper.
    ([("    def _pool_for(self, layer):\n        return self.main\n",
       "    def _pool_for(self, layer):\n        return self.main\n\n\n"
       "class Routed(Sized):\n    def _pool_for(self, layer):\n        return layer.pool\n")], {"carrying", "sized"}),
], ids=["as-given", "local-write-loc", "dropped", "sized-sub-pools", "unread-receiver", "annotation-only",
        "helper-redefined"])
def test_what_the_composite_hands_on_decides(
    in_tmp: Path, composites: list[tuple[str, str]], expected: set[str]
) -> None:
    assert flagged(in_tmp, composites) == expected


def test_the_dropped_mark_is_reported_inside_the_composite(in_tmp: Path) -> None:
    edit = [("        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=physical), k, v)",
             "        pool.set_kv_buffer(None, loc, k, v)")]
    findings = _check(in_tmp, edit, "--select", "KV103")["findings"]
    assert [f["path"] for f in findings] == ["engine/composites.py"]


def test_door_kinds_read_what_a_definition_hands_on() -> None:
    reading = door_definitions(COMPOSITES.encode(), ("set_kv_buffer",), "KVWriteLoc", "physical",
                               "write_loc_is_physical", ("unwrap_write_loc",), ("loc",))
    assert reading is not None
    hands = {definition.klass: definition.hands_mark_to for definition in reading.definitions}
    (carrying,) = hands["Carrying"]
    assert (carrying.door, carrying.attributes, carrying.through) == ("set_kv_buffer", ("full", "swa"), ())
    (sized,) = hands["Sized"]
    assert (sized.door, sized.attributes, sized.through) == ("set_kv_buffer", ("main",), ("_pool_for",))
