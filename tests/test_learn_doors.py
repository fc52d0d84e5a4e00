"""Write doors are learned from what a pool does with its loc (issue 20 item 1), small trees written here."""

from __future__ import annotations

from pathlib import Path

from engine_text import PHYSICAL_WRITE_LOC
from kvlint.api.config import Config, parse_config
from kvlint.learn.contract import learn_contract

WRITE_LOC = PHYSICAL_WRITE_LOC + '''

def unwrap_write_loc(loc_info):
    if isinstance(loc_info, KVWriteLoc):
        return loc_info.loc
    return loc_info
'''

BASE_POOL = '''
from engine.write_loc import unwrap_write_loc

class BasePool:
    def store_rows(self, layer_id, loc_info, rows):
        loc = unwrap_write_loc(loc_info)
        self.rows[layer_id][loc] = rows

    def set_index_k_scale_buffer(self, layer_id, loc, scale):
        # An index buffer: a plain tensor loc by design, never the mark.
        self.scales[layer_id][loc] = scale
'''

OTHER_FILES = {
    # Inherits store_rows from BasePool (another file): nothing of its own to learn.
    "engine/child_pool.py": "from engine.base_pool import BasePool\n\nclass ChildPool(BasePool):\n    pass\n",
    # A wrapper whose method forwards its loc to the inherited door, under a keyword, through an alias.
    "engine/wrapper.py": (
        "class WrapperPool:\n"
        "    def put(self, layer_id, where, rows):\n"
        "        target = where\n"
        "        self.inner.store_rows(layer_id, loc_info=target, rows=rows)\n"
    ),
    # A keyword-only loc that reaches the mark check.
    "engine/kw_pool.py": (
        "from engine.write_loc import unwrap_write_loc\n\n"
        "class KwPool:\n"
        "    @staticmethod\n"
        "    def scatter(rows, *, loc_info):\n"
        "        return unwrap_write_loc(loc_info), rows\n"
    ),
}


def _tree(root: Path, files: dict[str, str]) -> dict[Path, bytes]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {path.resolve(): path.read_bytes() for path in root.rglob("*.py")}


def _marked_tree(root: Path) -> dict[Path, bytes]:
    return _tree(root, {"engine/write_loc.py": WRITE_LOC, "engine/base_pool.py": BASE_POOL, **OTHER_FILES})


def test_doors_are_methods_whose_loc_reaches_the_mark_check(in_tmp: Path) -> None:
    contract = learn_contract(Config(), _marked_tree(in_tmp))
    doors = dict(contract.write_doors)
    assert doors == {"store_rows": 1, "put": 1, "scatter": 1}
    reasons = dict(contract.door_reasons)
    assert reasons["store_rows"] == "engine/base_pool.py:6: `loc_info` reaches the mark check `unwrap_write_loc`"
    assert reasons["put"] == "engine/wrapper.py:4: `where` is forwarded to the door `store_rows`"
    assert "set_index_k_scale_buffer" not in doors, "its loc never reaches the mark"
    assert "set_kv_buffer" not in doors, "a tree with the mark learns its doors; the name defaults do not apply"


def test_configuration_adds_and_removes_doors(in_tmp: Path) -> None:
    table = {"contract": {"add-write-doors": {"set_index_k_scale_buffer": 1}, "remove-write-doors": ["put"]}}
    config = parse_config(table, in_tmp / "kvlint.toml")
    contract = learn_contract(config, _marked_tree(in_tmp))
    doors = dict(contract.write_doors)
    assert doors["set_index_k_scale_buffer"] == 1 and "put" not in doors and "store_rows" in doors
    assert dict(contract.door_reasons)["set_index_k_scale_buffer"].endswith("add-write-doors")


def test_tree_without_the_mark_keeps_the_name_pattern(in_tmp: Path) -> None:
    pool = "class Pool:\n    def set_fp8_kv_buffer(self, layer, loc, k, v):\n        self.k[loc] = k\n"
    contract = learn_contract(Config(), _tree(in_tmp, {"engine/pool.py": pool}))
    doors = dict(contract.write_doors)
    assert doors["set_fp8_kv_buffer"] == 1 and doors["set_kv_buffer"] == 1
    assert dict(contract.door_reasons)["set_fp8_kv_buffer"].startswith("engine/pool.py:2: named like a door")


def test_the_last_method_of_a_class_followed_by_module_code_is_learned(in_tmp: Path) -> None:
    """Cut out up to the next `def` at its indent, the piece would run into the next class and not parse."""
    pool = (
        "from engine.write_loc import unwrap_write_loc\n\n"
        "class LastPool:\n"
        "    def write_last(self, layer_id, loc_info, rows):\n"
        "        self.rows[unwrap_write_loc(loc_info)] = rows\n\n\n"
        "class Neighbour:\n"
        "    size = 1\n\n"
        "    def grow(self, by):\n"
        "        self.size += by\n"
    )
    contract = learn_contract(Config(), _tree(in_tmp, {"engine/write_loc.py": WRITE_LOC, "engine/last_pool.py": pool}))
    assert dict(contract.write_doors) == {"write_last": 1}
    assert dict(contract.door_reasons)["write_last"] == "engine/last_pool.py:5: `loc_info` reaches the mark check `unwrap_write_loc`"
