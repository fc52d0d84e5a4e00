"""KV101 only where some door the call can reach may refuse a bare loc: a pool class that keeps the
tree's gate off with every subclass never does, whatever its doors take (minimax's sparse pool)."""

from __future__ import annotations

from pathlib import Path

from test_door_classes import WRITE_LOC, _check, _write

POOLS = '''
from engine.kernels import store_kernel
from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class KVCache:
    requires_physical_write_loc = False

    def _check_physical_write_loc(self, loc_info):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")


class UnifiedPool(KVCache):
    requires_physical_write_loc = True

    def set_kv_buffer(self, layer, loc, k):
        self._check_physical_write_loc(loc)
        rows, _ = unwrap_write_loc(loc)
        self.k_buffer[layer][rows] = k


class SparsePool(KVCache):
    def set_index_buffer(self, layer, loc, k):
        store_kernel(self.k_buffer[layer], loc, k)


class Nvfp4SparsePool(SparsePool):
    def set_index_buffer(self, layer, loc, k):
        self._check_physical_write_loc(loc)
        rows, _ = unwrap_write_loc(loc)
        self.k_buffer[layer][rows] = k
'''

BACKEND = '''
from engine.pools import SparsePool


class SparseBackend:
    def __init__(self, runner):
        assert isinstance(runner.pool, SparsePool)
        self.pool = runner.pool

    def forward(self, layer, forward_batch, k):
        self.pool.set_index_buffer(layer, forward_batch.out_cache_loc, k)
        runner_pool().set_kv_buffer(layer, forward_batch.out_cache_loc, k)
'''


def _raw_locs(root: Path, pools: str) -> dict[int, str]:
    _write(root, {
        "engine/write_loc.py": WRITE_LOC,
        "engine/kernels.py": "def store_kernel(buffer, loc, k):\n    pass\n",
        "engine/pools.py": pools,
        "engine/backend.py": BACKEND,
    })
    return {f["line"]: f["message"] for f in _check("--select", "KV101")["findings"] if f["path"] == "engine/backend.py"}


def test_a_door_of_pools_that_keep_the_gate_off_takes_a_bare_loc(in_tmp: Path) -> None:
    # The sparse pool and its subclass never refuse a bare loc; the unified pool's door does.
    assert sorted(_raw_locs(in_tmp, POOLS)) == [12]


def test_one_subclass_turning_the_gate_on_makes_the_door_refuse(in_tmp: Path) -> None:
    gated = POOLS.replace("class Nvfp4SparsePool(SparsePool):\n", "class Nvfp4SparsePool(SparsePool):\n    requires_physical_write_loc = True\n\n")
    found = _raw_locs(in_tmp, gated)
    assert sorted(found) == [11, 12]
    assert "`SparsePool.set_index_buffer`" in found[11] and "does not take a write loc" in found[11]
