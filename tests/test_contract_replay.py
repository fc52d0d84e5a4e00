"""After an edit, the contract cache asks the edited files the questions learning asked: an edit
that answers them as before keeps the cached contract without learning; any other is learned
again. Either way the contract is the one learned from scratch."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NoReturn

import pytest

import kvlint.learn.contract
import kvlint.store.contract_cache
import kvlint.running.engine
from kvlint.api.config import Config, load_config
from kvlint.api.contract import Contract
from kvlint.store.contract_cache import contract_for
from kvlint.store.location import cache_directory
from kvlint.running.engine import RunOptions, run
from kvlint.learn.contract import learn_contract
from kvlint.learn.scope import Asked
from engine_text import PHYSICAL_WRITE_LOC

WRITE_LOC = PHYSICAL_WRITE_LOC + '''

def write_loc_is_physical(loc_info):
    return isinstance(loc_info, KVWriteLoc) and loc_info.physical


def unwrap_write_loc(loc_info):
    return loc_info.loc if isinstance(loc_info, KVWriteLoc) else loc_info
'''

BATCH = '''from dataclasses import dataclass


class BatchBase:
    seq_lens: object = None


@dataclass
class ForwardBatch(BatchBase):
    out_cache_loc: object
    out_cache_loc_is_physical: bool = False
'''

POOL = '''import torch

from engine.write_loc import unwrap_write_loc, write_loc_is_physical


class TokenPool:
    requires_physical_write_loc = True

    def __init__(self, size, page_size):
        self.k_buffer = torch.zeros((size, page_size, 8))

    def set_kv_buffer(self, layer, loc_info, k, v):
        if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
            raise ValueError("unmarked loc")
        self.k_buffer[unwrap_write_loc(loc_info)] = k

    def size_of(self):
        return self.size


class SparsePool(TokenPool):
    requires_physical_write_loc = True
'''

PAGED = "def paged_view(flat, page_size):\n    return flat\n"

BACKEND = '''from engine.pool import TokenPool


class Backend:
    def forward(self, layer, forward_batch, k, v):
        cache_loc = forward_batch.out_cache_loc
        forward_batch.token_to_kv_pool.set_kv_buffer(layer, cache_loc, k, v)
'''

# A door by what it does (it forwards its loc to a door), whatever its name; `fill` is not one.
WRAPPER = """class WrapperPool:
    def put(self, layer, where, k, v):
        self.inner.set_kv_buffer(layer, where, k, v)

    def fill(self, layer, k, v):
        self.inner.set_kv_buffer(layer, self.all_slots, k, v)
"""

FILES = {
    "engine/wrapper.py": WRAPPER,
    "engine/write_loc.py": WRITE_LOC,
    "engine/batch.py": BATCH,
    "engine/pool.py": POOL,
    "engine/layout.py": PAGED,
    "engine/backend.py": BACKEND,
    "engine/util.py": "def clamp(x):\n    return x\n",
}


def _replaced(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text
        return text.replace(old, new)

    return edit


# Edits that leave what learning reads as it was: the contract is kept, nothing learned.
KEEPING = {
    "unrelated file": ("engine/util.py", lambda text: text + "\n\ndef other(y):\n    return y\n"),
    "lines shift in a file whose doors calls are read": ("engine/backend.py", lambda text: "# moved\n\n" + text),
    "a pool method learning does not read": ("engine/pool.py", _replaced("return self.size", "return self.size + 0")),
    "a comment below the batch class": ("engine/batch.py", lambda text: text + "# the end\n"),
    "lines shift in a pool below the lines the contract names": (
        "engine/pool.py", _replaced("    def size_of(self):", "    # sizes\n    def size_of(self):")
    ),
    "lines shift below the door the contract names": ("engine/wrapper.py", _replaced("\n    def fill", "\n    # no door\n    def fill")),
}

# Edits that change what learning reads: learned again, as from scratch.
CHANGING = {
    "a new door class": (
        "engine/util.py",
        lambda text: text + "\n\nclass Wrapper:\n    def put(self, where):\n        self.pool.set_kv_buffer(0, where, 1, 2)\n",
    ),
    "the mark check": ("engine/write_loc.py", _replaced("physical: bool = False", "id_space: bool = False")),
    "the gate": ("engine/pool.py", _replaced("class SparsePool(TokenPool):\n    requires_physical_write_loc = True",
                                             "class SparsePool(TokenPool):\n    requires_physical_write_loc = False")),
    "the batch class's fields": ("engine/batch.py", lambda text: text + "    encoder_out_cache_loc: object = None\n"),
    "a paged helper": ("engine/layout.py", lambda text: text + "\n\ndef paged_kv_view(flat, page_size, heads, dim):\n    return flat\n"),
    "the line of a learned door": ("engine/wrapper.py", lambda text: "# moved\n" + text),
    "a class header": ("engine/backend.py", _replaced("class Backend:", "class Backend(TokenPool):")),
}


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    for name, text in FILES.items():
        (in_tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (in_tmp / name).write_text(text)
    return in_tmp


def _sources(root: Path) -> dict[Path, bytes]:
    return {path.relative_to(root): path.read_bytes() for path in sorted(root.rglob("*.py"))}


def _learned(config: Config, tree: Path) -> tuple[Contract, bool]:
    """The contract of `tree`, and whether the contract cache answered."""
    return contract_for(config, _sources(tree), cache_directory(config))


def _refuse_learning(*_args: Any) -> NoReturn:
    raise AssertionError("learned again")


def _whole(contract: Contract) -> tuple[Any, ...]:
    """The contract with what `kvlint contract` shows of where each value comes from, which its
    equality leaves out (no check reads it)."""
    return contract, contract.door_reasons, contract.sources


def _edit(tree: Path, name: str, edit: Callable[[str], str]) -> None:
    (tree / name).write_text(edit((tree / name).read_text()))


@pytest.mark.parametrize("name, edit", KEEPING.values(), ids=KEEPING.keys())
def test_an_edit_learning_does_not_read_keeps_the_contract(
    tree: Path, monkeypatch: pytest.MonkeyPatch, name: str, edit: Callable[[str], str]
) -> None:
    config = load_config()
    before, cached = _learned(config, tree)
    assert not cached
    assert dict(before.write_doors) == {"put": 1, "set_kv_buffer": 1} and before.mark_gate == "requires_physical_write_loc"
    _edit(tree, name, edit)
    with monkeypatch.context() as patched:
        patched.setattr(kvlint.learn.contract, "learn_asking", _refuse_learning)
        after, cached = _learned(config, tree)
    assert cached and _whole(after) == _whole(before) == _whole(learn_contract(config, _sources(tree)))


@pytest.mark.parametrize("name, edit", CHANGING.values(), ids=CHANGING.keys())
def test_an_edit_learning_reads_is_learned_again_as_from_scratch(tree: Path, name: str, edit: Callable[[str], str]) -> None:
    config = load_config()
    before = _learned(config, tree)[0]
    _edit(tree, name, edit)
    after, cached = _learned(config, tree)
    assert not cached
    assert _whole(after) == _whole(learn_contract(config, _sources(tree))) != _whole(before)


def test_a_kept_contract_is_stored_under_the_edited_tree(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config()
    _learned(config, tree)
    _edit(tree, *KEEPING["unrelated file"])
    _learned(config, tree)
    asked: list[Any] = []
    monkeypatch.setattr(Asked, "answers_as_before", lambda *args: asked.append(args))
    assert _learned(config, tree)[1]
    assert not asked, "the edited tree's digests were stored: nothing to ask"


def test_an_edit_then_its_undo_are_both_answered_from_the_cache(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config()
    before: Contract = _learned(config, tree)[0]
    original = (tree / "engine" / "backend.py").read_text()
    monkeypatch.setattr(kvlint.learn.contract, "learn_asking", _refuse_learning)
    _edit(tree, *KEEPING["lines shift in a file whose doors calls are read"])
    assert _learned(config, tree) == (before, True)
    (tree / "engine" / "backend.py").write_text(original)
    assert _learned(config, tree) == (before, True)


def test_a_tree_switched_back_and_forth_learns_each_state_once(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config()
    wrapper = tree / "engine" / "wrapper.py"
    states = [WRAPPER, CHANGING["the line of a learned door"][1](WRAPPER)]
    contracts = []
    for text in states:
        wrapper.write_text(text)
        contracts.append(_learned(config, tree)[0])
    assert _whole(contracts[0]) != _whole(contracts[1])
    monkeypatch.setattr(kvlint.learn.contract, "learn_asking", _refuse_learning)
    for text, contract in [*zip(states, contracts), *zip(states, contracts)]:
        wrapper.write_text(text)
        found, cached = _learned(config, tree)
        assert cached and _whole(found) == _whole(contract)


def test_a_door_whose_line_moved_leaves_every_other_files_cached_result(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contract learned again names the door's new line; no check reads that, so the result
    cache keeps answering for every file but the edited one."""
    options = RunOptions(cache=True, jobs=1)
    checked: list[str] = []
    real_check_all = kvlint.running.engine.check_all

    def recording(work: list[Any], *args: Any) -> Any:
        checked.extend(request.path for request, _data in work)
        return real_check_all(work, *args)

    monkeypatch.setattr(kvlint.running.engine, "check_all", recording)
    first = run(load_config(), options)
    assert "engine/backend.py" in checked
    _edit(tree, *CHANGING["the line of a learned door"])
    checked.clear()
    second = run(load_config(), options)
    assert _whole(second.contract) != _whole(first.contract)
    assert set(checked) <= {"engine/wrapper.py"}
    assert [(f.path, f.code, f.line) for f in second.findings] == [(f.path, f.code, f.line) for f in first.findings]
