"""The learned contract is cached: an unchanged tree is not learned again, an edit to it is."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, NoReturn

import pytest

import kvlint.learn.contract
import kvlint.store.contract_cache
import kvlint.learn.doors
from kvlint.api.config import load_config
from kvlint.api.contract import Contract
from kvlint.store.contract_cache import CONTRACT_FILE, READINGS_FILE
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.live.workspace import Workspace

WRITE_LOC = (
    "class KVWriteLoc:\n    loc: object\n    physical: bool = False\n\n\n"
    "def unwrap_write_loc(loc_info):\n"
    "    if isinstance(loc_info, KVWriteLoc):\n        return loc_info.loc\n    return loc_info\n"
)
POOL = (
    "from engine.write_loc import unwrap_write_loc\n\n\n"
    "class Pool:\n"
    "    def store_rows(self, layer_id, loc_info, rows):\n"
    "        self.rows[layer_id][unwrap_write_loc(loc_info)] = rows\n"
)


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    (in_tmp / "engine").mkdir()
    (in_tmp / "engine" / "write_loc.py").write_text(WRITE_LOC)
    (in_tmp / "engine" / "pool.py").write_text(POOL)
    return in_tmp


def lint(cache: bool = True) -> RunResult:
    return run(load_config(), RunOptions(paths=(Path("."),), cache=cache, jobs=1))


def no_learning(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any) -> NoReturn:
        raise AssertionError("learned again")

    monkeypatch.setattr(kvlint.learn.contract, "learn_asking", refuse)


def test_a_second_run_over_an_unchanged_tree_does_not_learn(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = lint().contract
    assert dict(first.write_doors) == {"store_rows": 1}
    with monkeypatch.context() as patched:
        no_learning(patched)
        assert lint().contract == first


def test_an_edit_that_changes_a_learned_door_is_learned_again(tree: Path) -> None:
    lint()
    # The loc no longer reaches the mark check: `store_rows` stops being a door.
    (tree / "engine" / "pool.py").write_text(POOL.replace("unwrap_write_loc(loc_info)", "loc_info"))
    assert "store_rows" not in dict(lint().contract.write_doors)


def test_after_an_edit_door_learning_parses_only_the_new_methods(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lint()
    parsed: list[bytes] = []
    real = kvlint.learn.doors._Piece.parse

    def counting(piece: Any) -> Any:
        parsed.append(piece.text)
        return real(piece)

    monkeypatch.setattr(kvlint.learn.doors._Piece, "parse", counting)
    (tree / "engine" / "extra.py").write_text(
        "from engine.write_loc import unwrap_write_loc\n\n\nclass Extra:\n"
        "    def put(self, loc_info):\n        return unwrap_write_loc(loc_info)\n"
    )
    assert dict(lint().contract.write_doors) == {"store_rows": 1, "put": 0}
    # Methods are indented; the module functions checking the mark are read on every learning.
    assert [text.split(b"(")[0] for text in parsed if text.startswith(b" ")] == [b"    def put"]


def test_readings_another_kvlint_made_are_not_used(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lint()
    cache_file = tree / ".kvlint_cache" / READINGS_FILE
    stored = pickle.loads(cache_file.read_bytes())
    assert stored.readings, "this kvlint's readings are kept"
    stored.kvlint = "another kvlint"
    cache_file.write_bytes(pickle.dumps(stored))
    recalled: list[dict[Any, Any]] = []
    monkeypatch.setattr(kvlint.store.contract_cache, "recall", recalled.append)
    # A new file: learned again.
    (tree / "engine" / "limits.py").write_text("LIMIT = 1\n")
    lint()
    assert recalled == [{}]


def test_without_the_cache_the_contract_is_neither_read_nor_written(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lint(cache=False)
    assert not (tree / ".kvlint_cache" / CONTRACT_FILE).exists()
    lint()
    learned = []
    monkeypatch.setattr(kvlint.learn.contract, "learn_contract", lambda *args: learned.append(args) or Contract())
    lint(cache=False)
    assert len(learned) == 1


def _older_layout() -> bytes:
    """What a kvlint whose cache file kept contracts by a key of every file's digest wrote."""
    stored = object.__new__(kvlint.store.contract_cache._Stored)
    stored.__dict__.update(contracts={b"key": Contract()}, readings={})
    return pickle.dumps(stored)


@pytest.mark.parametrize(
    "content",
    [b"not a pickle", pickle.dumps({b"key": "not a contract"}), pickle.dumps([1, 2]), _older_layout()],
    ids=["corrupt", "foreign values", "foreign type", "older layout"],
)
def test_a_corrupt_or_foreign_contract_file_is_ignored_and_rewritten(tree: Path, content: bytes) -> None:
    expected = lint(cache=False).contract
    cache_file = tree / ".kvlint_cache" / CONTRACT_FILE
    cache_file.parent.mkdir(exist_ok=True)
    cache_file.write_bytes(content)
    assert lint().contract == expected
    assert [learning.contract for learning in pickle.loads(cache_file.read_bytes()).learnings] == [expected]


def test_the_language_server_reads_the_contract_check_left_and_writes_none(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Workspace(tree)
    assert not (tree / ".kvlint_cache" / CONTRACT_FILE).exists()
    contract = lint().contract
    no_learning(monkeypatch)
    assert Workspace(tree).contract == contract
