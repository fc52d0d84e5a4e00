"""`--prove` and pools that take a bare loc by design (tests/fixtures/prove_gate/).

The fixture's mark check refuses an unmarked loc only where a pool turns
`requires_physical_write_loc` on. Three pools translate the loc they are
handed and pass the bare result to their base class's door: `SparsePool`,
whose family keeps the gate off and whose base door writes to itself
(exempt); `MappedPool`, which has a subclass turning the gate on (unproven);
`MappedWrapperPool`, whose base door hands the loc to another pool
(unproven). The fifth door call is `TokenPool`'s own call of the mark check
`_check_physical_write_loc` (a door: its loc reaches the check) with its door
parameter (proven).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.learn.tree import class_headers

FIXTURE = Path(__file__).parent / "fixtures" / "prove_gate"
POOL = "engine/mem_cache/memory_pool.py"


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    shutil.copytree(FIXTURE, in_tmp, dirs_exist_ok=True)
    return in_tmp


def kvlint(*args: str) -> str:
    return CliRunner().invoke(main, [*args, "--no-cache"], catch_exceptions=False).stdout


def super_call_line(tree: Path, klass: str) -> int:
    lines = (tree / POOL).read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"class {klass}(")))
    return next(number for number, line in enumerate(lines[start:], start + 1) if "super().set_kv_buffer" in line)


def prove(tree: Path) -> dict:
    return json.loads(kvlint("check", "--prove", "--format", "json", "."))


def test_a_bare_loc_handed_to_the_base_door_of_an_ungated_pool_is_exempt(tree: Path) -> None:
    result = prove(tree)
    kv104 = {f["line"] for f in result["findings"] if f["code"] == "KV104"}
    assert kv104 == {super_call_line(tree, "MappedPool"), super_call_line(tree, "MappedWrapperPool")}
    certificate = result["prove"]
    assert {key: certificate[key] for key in ("doors", "proven", "raw", "unproven", "exempt")} == {
        "doors": 5, "proven": 2, "raw": 0, "unproven": 2, "exempt": 1,
    }
    [exempt] = certificate["exempt_calls"]
    assert (exempt["path"], exempt["line"]) == (POOL, super_call_line(tree, "SparsePool"))
    assert "`SparsePool` and its subclasses keep `requires_physical_write_loc` off" in exempt["why"]
    assert "`TokenPool.set_kv_buffer`" in exempt["why"]


def test_the_text_certificate_lists_each_exempt_call(tree: Path) -> None:
    lines = kvlint("check", "--prove", ".").splitlines()
    # The certificate ends with the two unproven calls.
    assert lines[-6:-3] == [
        "prove: 5 write-door calls: 2 proven marked, 0 raw, 2 unproven, 1 exempt (a bare loc the pool takes by design)",
        "  reach unknown: 5 doors, 2 proven, 0 raw, 2 unproven, 1 exempt",
        "  engine: 5 doors, 2 proven, 0 raw, 2 unproven, 1 exempt",
    ]
    assert lines[-3].startswith(f"  exempt {POOL}:{super_call_line(tree, 'SparsePool')}: `SparsePool`")


def test_contract_lists_the_gate_and_the_pools_keeping_it_off(tree: Path) -> None:
    listed = CliRunner().invoke(main, ["contract", "."]).stdout.splitlines()
    gate = next(line for line in listed if line.startswith("mark-gate"))
    assert '"requires_physical_write_loc"' in gate and f"learned from {POOL}:" in gate
    ungated = next(line for line in listed if line.startswith("ungated-classes"))
    # KVCache and TokenPool have a gated subclass (UnifiedPool), MappedPool has UnifiedMappedPool.
    assert '["MappedWrapperPool", "SparsePool", "WrapperPool"]' in ungated


def test_a_gate_set_outside_a_class_body_exempts_nothing(tree: Path) -> None:
    (tree / "engine" / "setup.py").write_text("def build(pool):\n    pool.requires_physical_write_loc = True\n")
    result = prove(tree)
    assert result["prove"]["exempt"] == 0 and result["prove"]["unproven"] == 3
    assert super_call_line(tree, "SparsePool") in {f["line"] for f in result["findings"] if f["code"] == "KV104"}


def test_the_gate_name_assigned_inside_a_method_exempts_nothing(tree: Path) -> None:
    (tree / "engine" / "other.py").write_text(
        "class Other:\n    def configure(self):\n        requires_physical_write_loc = True\n        return requires_physical_write_loc\n"
    )
    assert prove(tree)["prove"]["exempt"] == 0


def test_a_mixin_setting_no_gate_leaves_its_pools_ungated(tree: Path) -> None:
    # A page-interleaving mixin with no bases of its own (`class Mixin:`), mixed into a subclass of SparsePool:
    # it sets the gate nowhere, so the family still keeps it off and the base-door call stays exempt.
    with (tree / POOL).open("a") as pool:
        pool.write("\n\nclass InterleaveMixin:\n    shards = 2\n\n\nclass InterleavedSparsePool(InterleaveMixin, SparsePool):\n    pass\n")
    assert prove(tree)["prove"]["exempt"] == 1
    # Its subclasses are the mixin's too: one turning the gate on takes the exemption away.
    with (tree / POOL).open("a") as pool:
        pool.write("\n\nclass UnifiedInterleaved(InterleavedSparsePool):\n    requires_physical_write_loc = True\n")
    assert prove(tree)["prove"]["exempt"] == 0


def test_a_class_without_bases_is_a_header_of_the_tree() -> None:
    assert class_headers(b"class Mixin:\n    pass\n\n\nclass Pool(Mixin, base.Base):\n    pass\n") == (
        ("Mixin", ()), ("Pool", ("Base", "Mixin")))
