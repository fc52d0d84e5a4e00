"""The classes a composite pool's sub-pools can exactly be, read from the pool classes' own code
(issue 36, item 1): a sub-pool built from a handed class by `size=` is never a unified pool whose
constructor takes a unified buffer instead; a class named is that class; `isinstance` tests on the
way narrow the set; the method runs on every subclass not defining it again."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.learn.class_facts import class_facts, set_from_outside
from edited_tree import write_edited
from test_door_classes import WRITE_LOC

POOLS = '''
from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class KVCache:
    requires_physical_write_loc = False

    def __init__(self, size, dtype, layer_num):
        self.size = size


class MHAPool(KVCache):
    def set_kv_buffer(self, layer, loc_info, k, v):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")
        loc, _ = unwrap_write_loc(loc_info)
        self.k_buffer[layer][loc] = k


class MLAPool(MHAPool):
    def set_mla_kv_buffer(self, layer, loc_info, k, r):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")
        loc, _ = unwrap_write_loc(loc_info)
        self.k_buffer[layer][loc] = k


class UnifiedMHAPool(MHAPool):
    requires_physical_write_loc = True

    def __init__(self, *, unified_buffer, sub_pool_name):
        self.buffer = unified_buffer


class UnifiedMLAPool(MLAPool):
    requires_physical_write_loc = True

    def __init__(self, *, unified_buffer):
        self.buffer = unified_buffer
'''

COMPOSITE = '''
from engine.pools import KVCache, MHAPool, MLAPool, UnifiedMHAPool, UnifiedMLAPool
from engine.write_loc import KVWriteLoc, unwrap_write_loc, write_loc_is_physical


class Composite(KVCache):
    def __init__(self, size, dtype, layer_num, pool_class: type = MHAPool, **kwargs):
        self.full = pool_class(size=size, dtype=dtype, layer_num=layer_num, **kwargs)
        self.swa = pool_class(size=size, dtype=dtype, layer_num=layer_num, **kwargs)

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        pool = self.swa if layer.is_swa else self.full
        pool.set_kv_buffer(None, loc, k, v)

    def set_mla_kv_buffer(self, layer, loc_info, k, r):
        loc, _ = unwrap_write_loc(loc_info)
        pool = self.swa if layer.is_swa else self.full
        if not isinstance(pool, MLAPool):
            raise TypeError("not an MLA layer")
        pool.set_mla_kv_buffer(None, loc, k, r)


class UnifiedComposite(Composite):
    requires_physical_write_loc = True

    def __init__(self, *, unified_buffer):
        self.full = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="full")
        self.swa = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="swa")

    def set_kv_buffer(self, layer, loc_info, k, v):
        if not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")
        loc, _ = unwrap_write_loc(loc_info)
        pool = self.swa if layer.is_swa else self.full
        pool.set_kv_buffer(None, KVWriteLoc(loc, physical=True), k, v)
'''

FORWARD = "pool.set_kv_buffer(None, loc, k, v)"
FORWARD_MLA = "pool.set_mla_kv_buffer(None, loc, k, r)"


def flagged(root: Path, pools: list[tuple[str, str]] = [], composite: list[tuple[str, str]] = []) -> set[str]:
    """The forwards KV103 flags (`kv`, `mla`) after the given edits to each file."""
    texts = write_edited(root, {"engine/write_loc.py": WRITE_LOC, "engine/pools.py": POOLS, "engine/composite.py": COMPOSITE},
                         {"engine/pools.py": pools, "engine/composite.py": composite})
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "--select", "KV103", "."],
                                catch_exceptions=False)
    lines = {finding["line"] for finding in json.loads(result.stdout)["findings"]}
    text = texts["engine/composite.py"].splitlines()
    where = {name: next(number for number, line in enumerate(text, 1) if call in line)
             for name, call in (("kv", FORWARD), ("mla", FORWARD_MLA))}
    return {name for name, line in where.items() if line in lines}


def test_sub_pools_built_by_size_are_never_the_unified_pools(in_tmp: Path) -> None:
    # Composite's own sub-pools keep their gate off; UnifiedComposite's are unified but not MLA, and
    # it marks its own set_kv_buffer: no forward drops a mark a sub-pool checks.
    assert flagged(in_tmp) == set()


MLA_SUB_POOL = ('self.full = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="full")',
                "self.full = UnifiedMLAPool(unified_buffer=unified_buffer)")


@pytest.mark.parametrize("pools, composite, expected", [
    # A unified pool whose constructor takes `size` may be what the handed class builds.
    ([("def __init__(self, *, unified_buffer, sub_pool_name):",
       "def __init__(self, size=None, dtype=None, layer_num=None, *, unified_buffer=None, sub_pool_name=None):")], [],
     {"kv"}),
    # A subclass not defining set_kv_buffer again runs Composite's on its unified sub-pools.
    ([], [("    def set_kv_buffer(self, layer, loc_info, k, v):\n        if not write_loc_is_physical",
           "    def unused(self, layer, loc_info, k, v):\n        if not write_loc_is_physical")],
     {"kv"}),
    # An MLA sub-pool passes the `isinstance` test: the MLA forward reaches a unified pool.
    ([], [MLA_SUB_POOL], {"mla"}),
    # A test leaving that class out narrows it away.
    ([], [MLA_SUB_POOL, ("if not isinstance(pool, MLAPool):", "if isinstance(pool, UnifiedMLAPool):")], set()),
    # A sub-pool set by a name kvlint cannot read may be anything (UnifiedComposite runs Composite's
    # set_mla_kv_buffer, not its set_kv_buffer).
    ([], [('self.swa = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name="swa")',
           'setattr(self, "s" + "wa", unified_buffer.pool())')],
     {"mla"}),
    # A local bound another way too (a loop) may be anything.
    ([], [("        pool = self.swa if layer.is_swa else self.full\n",
           "        pool = self.swa if layer.is_swa else self.full\n        for pool in layer.pools:\n            pass\n")],
     {"kv", "mla"}),
], ids=["unified-takes-size", "not-overridden", "isinstance-keeps-mla", "isinstance-leaves-out", "set-by-name",
        "rebound-local"])
def test_what_lets_a_unified_pool_in_is_flagged(
    in_tmp: Path, pools: list[tuple[str, str]], composite: list[tuple[str, str]], expected: set[str]
) -> None:
    assert flagged(in_tmp, pools, composite) == expected


def test_class_facts_read_each_attributes_build() -> None:
    source = '''
class Pool(Base):
    def __init__(self, size, cls: type = MHAPool, other=None, *, named: Optional[MLAPool] = None):
        chosen = cls or MLAPool
        self.held = chosen(size=size, layer_num=1, **kw)
        self.named = MHAPool(size)
        self.typed = named
        self.side = self._side()
        self.other = other.make()
        self.empty = None
        self.annotated: Optional[MLAPool] = chosen(size=size)
        self.only_annotated: Optional[MLAPool] = other.make()

    def _side(self) -> "SidePool":
        return SidePool()
'''
    (facts,) = class_facts(source.encode(), ("Pool",), ())
    assert facts.init == ("size", "cls", "other", "named") and not facts.init_open
    builds = {build.attribute: build for build in facts.attributes}
    assert builds["held"].keywords == (("layer_num", "size"),) and not builds["held"].unknown
    assert builds["named"].exact == ("MHAPool",)
    assert builds["typed"].typed == ("MLAPool",)
    assert builds["side"].typed == ("SidePool",)
    assert builds["other"].unknown
    assert not builds["empty"].unknown and not builds["empty"].exact
    # What the value is built as outweighs its annotation, which answers only where the value says nothing.
    assert builds["annotated"].keywords == (("size",),) and not builds["annotated"].typed
    assert builds["only_annotated"].typed == ("MLAPool",)
    # A decorated class may be built with anything.
    (decorated,) = class_facts(("@dataclass\n" + source.lstrip()).encode(), ("Pool",), ())
    assert decorated.init_open
    assert ast.parse(source)


def test_prove_exempts_a_forward_no_class_it_can_reach_refuses(in_tmp: Path) -> None:
    def kv104(pools: list[tuple[str, str]]) -> set[int]:
        flagged(in_tmp, pools)
        result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "--prove", "--select", "KV104", "."])
        return {finding["line"] for finding in json.loads(result.stdout)["findings"]}

    forward = next(number for number, line in enumerate(COMPOSITE.splitlines(), 1) if FORWARD in line)
    assert forward not in kv104([])
    takes_size = ("def __init__(self, *, unified_buffer, sub_pool_name):",
                  "def __init__(self, size=None, dtype=None, layer_num=None, *, unified_buffer=None, sub_pool_name=None):")
    assert forward in kv104([takes_size])


def test_an_attribute_set_from_outside_the_class_may_be_anything(in_tmp: Path) -> None:
    (in_tmp / "engine").mkdir(parents=True, exist_ok=True)
    (in_tmp / "engine/configure.py").write_text(
        "def swap(pool, unified_buffer):\n    pool.swa = UnifiedMHAPool(unified_buffer=unified_buffer, sub_pool_name='swa')\n")
    assert flagged(in_tmp) == {"kv", "mla"}
    assert set_from_outside(b"self.swa = 1\nrunner.pool.swa = 2\nx.full == 3\n", ("full", "swa")) == ("swa",)
