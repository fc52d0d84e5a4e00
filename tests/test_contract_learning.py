"""The contract's "auto" values come from the scanned tree (tests/fixtures/contracts/)."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.api.config import Config, parse_config
from kvlint.learn import contract as learning
from kvlint.learn.contract import learn_contract, module_path

FIXTURES = Path(__file__).parent / "fixtures" / "contracts"

BACKEND_BEFORE = (FIXTURES / "neither" / "engine" / "backend.py").read_text()


@pytest.fixture
def tree(in_tmp: Path, request: pytest.FixtureRequest) -> Path:
    shutil.copytree(FIXTURES / request.param, in_tmp, dirs_exist_ok=True)
    return in_tmp


def kvlint(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def sources(root: Path) -> dict[Path, bytes]:
    return {path.resolve(): path.read_bytes() for path in root.rglob("*.py")}


@pytest.mark.parametrize("tree", ["physical"], indirect=True)
def test_physical_tree_makes_fixes_use_physical(tree: Path) -> None:
    assert kvlint("fix", ".")[0] == 0
    assert (tree / "engine" / "backend.py").read_text() == (
        "from engine.mem_cache.memory_pool import KVWriteLoc\n"
        "\n"
        "def forward(pool, layer, forward_batch, k, v):\n"
        "    cache_loc = (\n"
        "        forward_batch.out_cache_loc\n"
        "        if not layer.is_cross_attention\n"
        "        else forward_batch.encoder_out_cache_loc\n"
        "    )\n"
        "    pool.set_kv_buffer(layer, KVWriteLoc.for_layer(forward_batch, layer), k, v)\n"
        "    pool.set_kv_buffer(layer, KVWriteLoc(forward_batch.out_cache_loc[:1], "
        "physical=forward_batch.out_cache_loc_is_physical), k, v)\n"
    )


@pytest.mark.parametrize("tree", ["id_space"], indirect=True)
def test_id_space_tree_without_layer_factory_fixes_only_the_slice(tree: Path) -> None:
    code, _ = kvlint("fix", ".")
    assert code == 1, "the cross-attention alias stays: this tree's KVWriteLoc has no for_layer"
    fixed = (tree / "engine" / "backend.py").read_text()
    assert "    pool.set_kv_buffer(layer, cache_loc, k, v)\n" in fixed
    assert (
        "KVWriteLoc(forward_batch.out_cache_loc[:1], id_space=forward_batch.out_cache_loc_id_space)" in fixed
    )
    assert fixed.startswith("from engine.mem_cache.memory_pool import KVWriteLoc\n")


@pytest.mark.parametrize("tree", ["neither"], indirect=True)
def test_tree_without_definitions_uses_the_seed_spelling(tree: Path) -> None:
    # The tree defines no KVWriteLoc: a fix calling it is unsafe (issue 15), so a safe run leaves it.
    assert kvlint("fix", ".")[0] == 1
    assert (tree / "engine" / "backend.py").read_text() == BACKEND_BEFORE
    code, out = kvlint("check", ".")
    assert (
        "the fix is unsafe here: the scanned tree defines no `KVWriteLoc`, so kvlint assumed the seed's `id_space` "
        "mark and `for_batch` factory (pin `write-loc-module`, `mark`, `batch-mark` and `batch-factory`) "
        "in [tool.kvlint.contract]"
    ) in out
    assert kvlint("fix", "--unsafe", ".")[0] == 0
    fixed = (tree / "engine" / "backend.py").read_text()
    assert fixed.startswith("from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n")
    assert "KVWriteLoc.for_layer(forward_batch, layer)" in fixed
    assert "id_space=forward_batch.out_cache_loc_id_space" in fixed


@pytest.mark.parametrize("tree", ["physical"], indirect=True)
def test_contract_command_prints_values_and_where_they_came_from(tree: Path) -> None:
    code, out = kvlint("contract", ".")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert '"physical"' in lines["mark"] and "learned from engine/mem_cache/memory_pool.py:6" in lines["mark"]
    assert '"out_cache_loc_is_physical"' in lines["batch-mark"]
    assert "learned from engine/forward_batch_info.py:7" in lines["batch-mark"]
    assert '"engine.mem_cache.memory_pool"' in lines["write-loc-module"]
    assert '"for_layer"' in lines["layer-factory"]
    assert "[found] (learned from engine/mem_cache/memory_pool.py:" in lines["batch-factory"]


@pytest.mark.parametrize("tree", ["neither"], indirect=True)
def test_contract_command_on_a_tree_with_nothing_to_learn_shows_defaults(tree: Path) -> None:
    code, out = kvlint("contract", ".")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert '"id_space"' in lines["mark"] and lines["mark"].endswith("(default)")
    assert '"out_cache_loc_id_space"' in lines["batch-mark"]


def test_configured_value_wins_over_the_learned_one(tmp_path: Path) -> None:
    config = parse_config({"contract": {"mark": "id_space"}}, tmp_path / "kvlint.toml")
    contract = learn_contract(config, sources(FIXTURES / "physical"))
    assert contract.mark == "id_space"
    assert contract.source_of("mark").startswith("config")
    assert contract.batch_mark == "out_cache_loc_is_physical"


def test_write_doors_are_learned_from_methods_taking_a_loc(tmp_path: Path) -> None:
    pool = tmp_path / "pool.py"
    pool.write_text(
        "class Pool:\n"
        "    def set_index_kv_buffer(self, layer_id, loc, index_k):\n        pass\n"
        "    def set_kv_buffer_prefix_valid(self, *args, **kwargs):\n        pass\n"
    )
    contract = learn_contract(Config(), sources(tmp_path))
    assert dict(contract.write_doors)["set_index_kv_buffer"] == 1
    assert "set_kv_buffer_prefix_valid" not in dict(contract.write_doors)
    assert "learned from" in contract.source_of("write-doors")


def test_paged_helpers_are_learned_with_the_names_defined(tmp_path: Path) -> None:
    package = tmp_path / "engine" / "layout"
    package.mkdir(parents=True)
    (tmp_path / "engine" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "paged_view.py").write_text("def paged_view(x, ps):\n    pass\n\n\ndef paged_row_view(x, ps):\n    pass\n")
    contract = learn_contract(Config(), sources(tmp_path))
    assert contract.paged_helpers_module == "engine.layout.paged_view"
    assert contract.paged_helpers == ("paged_view", "paged_row_view")


def test_module_path_climbs_past_packages_without_init(tmp_path: Path) -> None:
    # The sglang wheel ships `sglang/__init__.py` but not `sglang/srt/__init__.py`.
    leaf = tmp_path / "sglang" / "srt" / "mem_cache"
    leaf.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (leaf / "memory_pool.py").write_text("")
    assert module_path(leaf / "memory_pool.py") == "sglang.srt.mem_cache.memory_pool"


@pytest.mark.parametrize("learn", ["learn_contract", "learn_asking"])
def test_learning_runs_with_the_collector_paused_and_hands_it_back_on(learn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Learning parses many methods and makes no cycles; the check after it makes LibCST's trees, which do.
    collecting_while_learning = []
    real_learner = learning._learn_pool_classes

    def recording_learner(*args: object) -> None:
        collecting_while_learning.append(gc.isenabled())
        real_learner(*args)

    monkeypatch.setattr(learning, "_learn_pool_classes", recording_learner)
    getattr(learning, learn)(Config(), sources(FIXTURES / "physical"))
    assert collecting_while_learning == [False] and gc.isenabled()
