"""Page-split by the pool a buffer comes from (issue 36, item 2): what each pool class
allocates decides whether a view of its buffer may be rewritten, not the folder it lives in."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import ConfigError, load_config, parse_config
from kvlint.api.types import Finding
from kvlint.learn.contract import learn_contract
from kvlint.running.engine import RunOptions, run

# A slot-major pool and a page-split one, side by side in one folder (a fork's mem_cache/).
POOLS = (
    "import torch\n\n\n"
    "class StridedPool:\n"
    "    def __init__(self, size, page_size, layers, heads, dim):\n"
    "        self.k_buffer = [torch.zeros((size + page_size, heads, dim)) for _ in range(layers)]\n\n"
    "    def get_key_buffer(self, layer_id):\n"
    "        return self.k_buffer[layer_id]\n\n\n"
    "class NPUPool(StridedPool):\n"
    "    def __init__(self, size, page_size, layers, heads, dim):\n"
    "        self.k_buffer = torch.zeros((layers, size // page_size + 1, page_size, heads, dim))\n"
)
BACKEND = (
    "from eng.mem_cache.pools import NPUPool, StridedPool\n\n\n"
    "class Backend:\n"
    "    def __init__(self, size):\n"
    "        self.strided = StridedPool(size, 16, 2, 8, 128)\n\n"
    "    def decode(self, layer, npu: NPUPool, other):\n"
    "        a = self.strided.get_key_buffer(layer.layer_id).view(-1, self.page_size, 8, 128)\n"
    "        b = npu.get_key_buffer(layer.layer_id).view(-1, self.page_size, 8, 128)\n"
    "        c = other.get_key_buffer(layer.layer_id).view(-1, self.page_size, 8, 128)\n"
    "        return a, b, c\n"
)
HELPERS = "def paged_kv_view(x, page_size, heads, dim):\n    return x\n"


def check(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> dict[int, Finding]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.chdir(root)
    findings = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings
    return {finding.line: finding for finding in findings if finding.code == "KV201"}


def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[int, Finding]:
    files = {"eng/mem_cache/pools.py": POOLS, "eng/attn/backend.py": BACKEND, "eng/layout/paged_view.py": HELPERS}
    return check(tmp_path, monkeypatch, files)


def test_a_view_of_the_strided_pools_buffer_keeps_its_safe_fix_next_to_a_page_split_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    strided = tree(tmp_path, monkeypatch)[9]
    assert strided.fix is not None and strided.fix.applicability.value == "safe"


def test_a_view_of_the_page_split_pools_buffer_is_not_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `(pages, page_size, ...)` is the pool's own contiguous allocation: `.view` pages nothing new.
    found = tree(tmp_path, monkeypatch)
    assert 10 not in found and {9, 11} <= set(found)


def test_a_pool_of_unknown_class_gets_only_an_unsafe_fix_naming_the_page_split_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = tree(tmp_path, monkeypatch)[11]
    assert unknown.fix is not None and unknown.fix.applicability.value == "unsafe"
    assert "kvlint cannot tell which pool `other` is, and `NPUPool` allocate page-split" in unknown.message


def test_without_a_page_split_pool_an_unknown_pool_keeps_the_safe_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    strided_only = POOLS[: POOLS.index("class NPUPool")]
    backend = BACKEND.replace("NPUPool, ", "").replace("npu: NPUPool", "npu")
    found = check(tmp_path, monkeypatch, {"eng/mem_cache/pools.py": strided_only, "eng/attn/backend.py": backend,
                                          "eng/layout/paged_view.py": HELPERS})
    assert {line: f.fix.applicability.value for line, f in found.items() if f.fix} == {9: "safe", 10: "safe", 11: "safe"}


def test_a_closure_reads_the_pool_and_its_buffer_as_the_enclosing_method_typed_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The receiver, the buffer and the page size are the enclosing method's locals: the closure's
    # views are judged by the classes the method gave them, as the method's own views are.
    closure = BACKEND.replace(
        "        return a, b, c\n",
        "        strided = self.strided\n"
        "        buffer = npu.get_key_buffer(0)\n\n"
        "        def attend():\n"
        "            return strided.get_key_buffer(0).view(-1, self.page_size, 8, 128), buffer.view(-1, self.page_size, 8, 128)\n\n"
        "        return a, b, c, attend\n",
    )
    found = check(tmp_path, monkeypatch, {"eng/mem_cache/pools.py": POOLS, "eng/attn/backend.py": closure,
                                          "eng/layout/paged_view.py": HELPERS})
    assert {line: f.fix.applicability.value for line, f in found.items() if f.fix} == {9: "safe", 11: "unsafe", 16: "safe"}
    assert found[16].column == 20


def learned(tmp_path: Path, source: str) -> tuple[str, ...]:
    path = tmp_path / "pool.py"
    path.write_text(source)
    return learn_contract(load_config(start=tmp_path), {path: source.encode()}).page_split_pools


def test_page_split_is_learned_from_the_class_allocation_and_its_subclasses(tmp_path: Path) -> None:
    source = POOLS + "\n\nclass NPUFP8Pool(NPUPool):\n    pass\n"
    assert learned(tmp_path, source) == ("NPUFP8Pool", "NPUPool")


def test_a_placeholder_of_page_size_slots_is_not_page_split(tmp_path: Path) -> None:
    # `(page_size, H, D)` per layer: dim 0 holds page_size slots, not pages.
    source = "import torch\n\nclass NoOpPool:\n    def __init__(self, page_size):\n        self.k_buffer = [torch.zeros((page_size, 8, 128))]\n"
    assert learned(tmp_path, source) == ()


def test_a_buffer_aliasing_a_page_split_allocation_is_page_split(tmp_path: Path) -> None:
    source = (
        "import torch\n\n"
        "class StackedPool:\n"
        "    def __init__(self, size, page_size, layers):\n"
        "        self._stacked_k = torch.zeros((layers, size // page_size + 1, page_size, 1, 576))\n"
        "        self.k_buffer = self._stacked_k\n"
    )
    assert learned(tmp_path, source) == ("StackedPool",)


def test_the_folder_key_is_refused_with_what_replaced_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="page-split-paths is gone: .*page-split-pools"):
        parse_config({"contract": {"page-split-paths": ["mem_cache"]}}, tmp_path / "kvlint.toml")
