"""Doors by class, not by method name (issue 36, item 1): small multi-file trees written here.

Two pools define `set_fused_buffer`: `LocPool`'s checks the mark and unwraps its loc,
`TensorPool`'s hands the loc to a kernel and `CountingPool`'s calls `loc.numel()`. A
call is a door call by the classes its receiver can be: an annotated parameter, a
`self.pool = SomePool(...)`, or, unknown, every class defining the name.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from engine_text import PHYSICAL_WRITE_LOC
from kvlint.cli import main

WRITE_LOC = "\n" + PHYSICAL_WRITE_LOC + '''

def unwrap_write_loc(loc_info):
    if isinstance(loc_info, KVWriteLoc):
        return loc_info.loc, None
    return loc_info, None


def write_loc_is_physical(loc_info):
    return isinstance(loc_info, KVWriteLoc) and loc_info.physical
'''

POOLS = '''
from engine.kernels import store_kernel
from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class LocPool:
    def set_fused_buffer(self, layer, loc, k):
        if not write_loc_is_physical(loc):
            raise ValueError("unmarked")
        rows, _ = unwrap_write_loc(loc)
        self.k_buffer[layer][rows] = k


class TensorPool:
    def set_fused_buffer(self, layer, loc, k):
        store_kernel(self.k_buffer[layer], loc, k)


class CountingPool:
    def set_fused_buffer(self, layer, loc, k):
        if loc.numel() == 0:
            return
        self.k_buffer[layer][loc] = k
'''

BACKENDS = '''
from engine.pools import LocPool, TensorPool


def annotated_tensor(layer, forward_batch, k, pool: TensorPool):
    pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)


def annotated_loc(layer, forward_batch, k, pool: LocPool):
    pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)


class ConstructedTensor:
    def __init__(self):
        self.pool = TensorPool()

    def forward(self, layer, forward_batch, k):
        self.pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)


class ConstructedLoc:
    def __init__(self):
        self.pool = LocPool()

    def forward(self, layer, forward_batch, k):
        self.pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)


class Unknown:
    def __init__(self, runner):
        self.pool = runner.pool

    def forward(self, layer, forward_batch, k):
        self.pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)
'''


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _check(*args: str) -> dict:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *args, "."], catch_exceptions=False)
    return json.loads(result.stdout)


def _line(root: Path, path: str, text: str, occurrence: int = 0) -> int:
    lines = [number for number, line in enumerate((root / path).read_text().splitlines(), 1) if text in line]
    return lines[occurrence]


def _tree(root: Path) -> None:
    _write(root, {
        "engine/write_loc.py": WRITE_LOC,
        "engine/kernels.py": "def store_kernel(buffer, loc, k):\n    pass\n",
        "engine/pools.py": POOLS,
        "engine/backends.py": BACKENDS,
    })


def test_a_call_reaching_only_tensor_taking_definitions_is_no_door_call(in_tmp: Path) -> None:
    _tree(in_tmp)
    found = {f["line"]: f for f in _check("--select", "KV101")["findings"]}
    call = "set_fused_buffer(layer, forward_batch.out_cache_loc, k)"
    # Annotated `TensorPool`, and `self.pool = TensorPool()`: the raw loc is what that pool takes.
    assert _line(in_tmp, "engine/backends.py", call, 0) not in found
    assert _line(in_tmp, "engine/backends.py", call, 2) not in found


def test_a_receiver_known_to_take_a_write_loc_gets_the_safe_fix(in_tmp: Path) -> None:
    _tree(in_tmp)
    found = {f["line"]: f for f in _check("--select", "KV101")["findings"]}
    call = "set_fused_buffer(layer, forward_batch.out_cache_loc, k)"
    for occurrence in (1, 3):  # annotated `LocPool`, `self.pool = LocPool()`
        finding = found[_line(in_tmp, "engine/backends.py", call, occurrence)]
        assert finding["fix"]["applicability"] == "safe"
        assert finding["fix"]["replacement"] == "KVWriteLoc.for_batch(forward_batch)"


def test_an_unknown_receiver_gets_an_unsafe_fix_naming_the_tensor_taking_definition(in_tmp: Path) -> None:
    _tree(in_tmp)
    found = {f["line"]: f for f in _check("--select", "KV101")["findings"]}
    finding = found[_line(in_tmp, "engine/backends.py", "set_fused_buffer(layer, forward_batch.out_cache_loc, k)", 4)]
    assert finding["fix"]["applicability"] == "unsafe"
    message = finding["message"]
    assert "\n" not in message
    assert "the fix is unsafe here" in message
    # The first definition (by class name) that does not take a write loc, and why.
    assert "`CountingPool.set_fused_buffer` (engine/pools.py:" in message
    assert "uses `loc` as a tensor (`.numel`)" in message
    assert "the class of `self.pool` is unknown, so every class defining `set_fused_buffer` counts" in message


def test_the_reasons_a_fix_is_unsafe_make_one_clause(in_tmp: Path) -> None:
    # No `for_batch` in the tree, and a receiver that may be a tensor-taking pool.
    _tree(in_tmp)
    (in_tmp / "engine/write_loc.py").write_text(WRITE_LOC.replace("def for_batch(", "def from_batch("))
    found = {f["line"]: f for f in _check("--select", "KV101")["findings"]}
    message = found[_line(in_tmp, "engine/backends.py", "set_fused_buffer(layer, forward_batch.out_cache_loc, k)", 4)]["message"]
    assert message.count("the fix is unsafe here") == 1
    assert "has no `for_batch` (pin `batch-factory`) in [tool.kvlint.contract]; and `CountingPool.set_fused_buffer`" in message


def test_fix_leaves_an_unknown_receivers_call_alone_and_wraps_the_known_ones(in_tmp: Path) -> None:
    _tree(in_tmp)
    result = CliRunner().invoke(main, ["fix", "--no-cache", "."], catch_exceptions=False)
    assert result.exit_code in (0, 1)
    text = (in_tmp / "engine/backends.py").read_text()
    assert text.count("KVWriteLoc.for_batch(forward_batch)") == 2
    assert text.count("set_fused_buffer(layer, forward_batch.out_cache_loc, k)") == 3


def test_prove_reports_no_kv104_where_no_reachable_definition_checks_the_mark(in_tmp: Path) -> None:
    _tree(in_tmp)
    _write(in_tmp, {"engine/indexer.py": (
        "from engine.pools import TensorPool\n\n\n"
        "def index(layer, k, pool: TensorPool, loc):\n"
        "    pool.set_fused_buffer(layer, loc, k)\n\n\n"
        "def index_locs(layer, k, pool):\n"
        "    loc = pool.plan()\n"
        "    pool.set_fused_buffer(layer, loc, k)\n"
    )})
    result = _check("--prove")
    kv104 = {(f["path"], f["line"]) for f in result["findings"] if f["code"] == "KV104"}
    # `pool: TensorPool` reaches no definition checking the mark: exempt. An unknown `pool` reaches
    # `LocPool`'s, which does: its unresolved loc is KV104.
    assert ("engine/indexer.py", 5) not in kv104
    assert ("engine/indexer.py", 10) in kv104
    exempt = {(call["path"], call["line"]): call["why"] for call in result["prove"]["exempt_calls"]}
    assert "no `set_fused_buffer` it can reach checks the mark" in exempt[("engine/indexer.py", 5)]


DOOR_CHECKING_FIRST = '''
from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class GatedPool:
    requires_physical_write_loc = True

    def _check_physical_write_loc(self, loc_info):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked")

    def set_kv_buffer(self, layer, loc_info, k):
        loc, _ = unwrap_write_loc(loc_info)
        self._check_physical_write_loc(loc_info)
        self._store(layer, loc, k)

    def _store(self, layer, loc_info, k):
        loc, _ = unwrap_write_loc(loc_info)
        self._check_physical_write_loc(loc_info)
        self.k_buffer[layer][loc] = k

    def set_unchecked(self, layer, loc_info, k):
        loc, _ = unwrap_write_loc(loc_info)
        self._store(layer, loc, k)
        self._check_physical_write_loc(loc_info)
'''


def test_a_mark_checked_before_the_call_proves_what_the_door_unwrapped(in_tmp: Path) -> None:
    _write(in_tmp, {"engine/write_loc.py": WRITE_LOC, "engine/pool.py": DOOR_CHECKING_FIRST})
    result = _check("--prove")
    kv104 = {f["line"] for f in result["findings"] if f["code"] == "KV104"}
    checked = _line(in_tmp, "engine/pool.py", "self._store(layer, loc, k)", 0)
    unchecked = _line(in_tmp, "engine/pool.py", "self._store(layer, loc, k)", 1)
    assert checked not in kv104
    # The check after the call proves nothing for it.
    assert unchecked in kv104


FORK_POOL = '''
class ForkPool:
    def store_rows(self, layer_id, loc, cache_k, cache_v):
        self.k_buffer[layer_id][loc] = cache_k
        self.v_buffer[layer_id].index_put_((loc,), cache_v)

    def gather(self, layer_id, loc):
        return self.k_buffer[layer_id][loc]

    def fused_store(self, layer_id, loc, cache_k):
        main = self.main_pool
        store_kernel(main.get_key_buffer(layer_id), cache_k, loc)

    def wrapped(self, layer_id, out_loc, cache_k, cache_v):
        self.store_rows(layer_id, out_loc, cache_k, cache_v)


class HostPool(HostKVCache):
    def load(self, host_indices, data):
        self.kv_buffer[:, host_indices] = data
'''

FORK_BACKEND = '''
def forward(pool, layer, forward_batch, k, v):
    pool.store_rows(layer.layer_id, forward_batch.out_cache_loc, k, v)
    pool.fused_store(layer.layer_id, forward_batch.out_cache_loc, k)
    pool.wrapped(layer.layer_id, forward_batch.out_cache_loc, k, v)
    pool.load(forward_batch.out_cache_loc, k)
    return pool.gather(layer.layer_id, forward_batch.out_cache_loc)
'''


def test_a_fork_pool_writing_kv_at_its_loc_is_a_door_whatever_its_name(in_tmp: Path) -> None:
    _write(in_tmp, {"engine/pool.py": FORK_POOL, "engine/backend.py": FORK_BACKEND})
    findings = _check("--select", "KV101")["findings"]
    # An indexed write, a kernel handed a sub-pool's buffer and the loc, a forward to a door; not a read,
    # nor a host cache's own pages.
    assert [(f["path"], f["line"]) for f in findings] == [("engine/backend.py", line) for line in (3, 4, 5)]
    assert [f["message"].split(" receives")[0] for f in findings] == ["`store_rows`", "`fused_store`", "`wrapped`"]



# An SWA pool forwarding the unwrapped loc to an inner pool: `LaxPool` unwraps without checking the
# mark (nothing is dropped there); `CheckingPool` checks it. The inner pool is typed through the
# constructor's annotated parameter, or unknown.
FORWARDING = '''
from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class CheckingPool:
    def set_kv_buffer(self, layer, loc, k, v):
        if not write_loc_is_physical(loc):
            raise ValueError("unmarked")
        rows, _ = unwrap_write_loc(loc)
        self.k_buffer[layer][rows] = k


class LaxPool:
    def set_kv_buffer(self, layer, loc, k, v):
        rows, _ = unwrap_write_loc(loc)
        self.k_buffer[layer][rows] = k


class IntoLax:
    def __init__(self, *, inner: LaxPool):
        self.inner = inner

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        self.inner.set_kv_buffer(layer, loc, k, v)


class IntoChecking:
    def __init__(self, inner: CheckingPool):
        self.inner = inner

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        self.inner.set_kv_buffer(layer, loc, k, v)


class IntoUnknown:
    def __init__(self, runner):
        self.inner = runner.pool

    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, _ = unwrap_write_loc(loc_info)
        self.inner.set_kv_buffer(layer, loc, k, v)
'''


def test_kv103_only_where_an_inner_definition_it_can_reach_needs_the_mark(in_tmp: Path) -> None:
    _write(in_tmp, {"engine/write_loc.py": WRITE_LOC, "engine/forwarding.py": FORWARDING})
    flagged = {f["line"] for f in _check("--select", "KV103")["findings"]}
    forward = "self.inner.set_kv_buffer(layer, loc, k, v)"
    lax, checking, unknown = (_line(in_tmp, "engine/forwarding.py", forward, n) for n in range(3))
    # The inner pool is a `LaxPool` (a keyword-only annotated parameter kept as the attribute): it ignores the mark.
    assert lax not in flagged
    assert checking in flagged and unknown in flagged



ASSERTED = '''
from engine.pools import TensorPool


class AssertedTensor:
    def __init__(self, runner):
        assert isinstance(runner.pool, TensorPool)
        self.pool = runner.pool

    def forward(self, layer, forward_batch, k):
        self.pool.set_fused_buffer(layer, forward_batch.out_cache_loc, k)
'''


def test_a_receiver_asserted_to_be_a_class_is_that_class(in_tmp: Path) -> None:
    # minimax's backend asserts `isinstance(runner.token_to_kv_pool, MiniMaxSparseKVPool)` before keeping it.
    _tree(in_tmp)
    _write(in_tmp, {"engine/asserted.py": ASSERTED})
    assert [f for f in _check("--select", "KV101")["findings"] if f["path"] == "engine/asserted.py"] == []
    # Without the assert the receiver is unknown: every definition counts, one of them takes a write loc.
    _write(in_tmp, {"engine/asserted.py": ASSERTED.replace("        assert isinstance(runner.pool, TensorPool)\n", "")})
    [finding] = [f for f in _check("--select", "KV101")["findings"] if f["path"] == "engine/asserted.py"]
    assert finding["fix"]["applicability"] == "unsafe"
    assert "the class of `self.pool` is unknown" in finding["message"]
