"""Issue 15 on small trees: what the tree states decides the findings, the fixes and their imports.

Each test builds the shape of a real sglang case (namespace packages, a page-split
NPU pool, a host cache, a write-loc class without mark or factory) and checks the
report a maintainer would read.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from engine_text import PHYSICAL_WRITE_LOC
from kvlint.api.config import Config
from kvlint.cli import main
from kvlint.learn.contract import learn_contract


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def check(*args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return list(json.loads(result.stdout)["findings"])


def learned(root: Path) -> object:
    return learn_contract(Config(), {path.resolve(): path.read_bytes() for path in root.rglob("*.py")})


WRITE_LOC = textwrap.indent(PHYSICAL_WRITE_LOC, "    ") + """

    def write_loc_is_physical(loc_info) -> bool:
        return isinstance(loc_info, KVWriteLoc) and loc_info.physical
"""


def test_module_paths_follow_the_trees_own_imports_through_namespace_packages(in_tmp: Path) -> None:
    # As a checkout of the corpus holds it: `srt/` alone (its `sglang/` parent not there, as in the
    # round trip's copy), no __init__.py on the way up (namespace packages), so climbing __init__
    # files gives `memory_pool`, which no file of the tree could import. The tree's own imports
    # say `sglang.srt.<path>`.
    write(in_tmp, {
        "srt/mem_cache/memory_pool.py": WRITE_LOC,
        "srt/mem_cache/layout/paged_view.py": "def paged_view(x, ps):\n    return x\n",
        "srt/layers/backend.py": "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n",
        "srt/layers/other.py": "from sglang.srt.layers import backend\n",
    })
    contract = learned(in_tmp)
    assert contract.write_loc_module == "sglang.srt.mem_cache.memory_pool"  # type: ignore[attr-defined]
    # Nothing imports paged_view.py: its path below the root the tree's imports resolve from.
    assert contract.paged_helpers_module == "sglang.srt.mem_cache.layout.paged_view"  # type: ignore[attr-defined]


def test_fixes_calling_what_the_tree_lacks_are_unsafe_and_say_which_key_pins_it(in_tmp: Path) -> None:
    # An older tree: KVWriteLoc without a mark or for_batch, no paged helpers.
    write(in_tmp, {
        "pool.py": "class KVWriteLoc:\n    loc: object\n",
        "backend.py": """\
            def forward(self, pool, layer, forward_batch, k, v):
                pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
                pool.set_kv_buffer(layer, KVWriteLoc(forward_batch.out_cache_loc), k, v)
                k_cache = pool.get_key_buffer(layer.layer_id)
                return k_cache.view(-1, self.page_size, 8, 128)
        """,
    })
    findings = {f["code"]: f for f in check(".")}
    # The raw loc wrapped without a mark is the migration's to mark too, as sglang 0.5.22 did.
    assert set(findings) == {"KV101", "KV102", "KV201"}
    kv102 = findings["KV102"]
    assert kv102["fix"]["applicability"] == "unsafe"
    assert "has no mark field yet" in kv102["message"] and "has no `for_batch` (pin `batch-factory`)" in kv102["message"]
    kv101 = findings["KV101"]
    assert kv101["fix"]["applicability"] == "unsafe"
    assert "has no `for_batch` (pin `batch-factory`)" in kv101["message"]
    assert "has no mark field yet" in kv101["message"] and "refuses" not in kv101["message"]
    kv201 = findings["KV201"]
    assert kv201["fix"]["applicability"] == "unsafe"
    assert "pin `paged-helpers-module`" in kv201["message"]
    result = CliRunner().invoke(main, ["contract", "."], catch_exceptions=False)
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert "[fallback, missing in the tree]" in lines["batch-factory"]
    assert "[fallback, missing in the tree]" in lines["paged-helpers-module"]
    assert "[found]" in lines["write-loc-class"]


def test_a_page_split_pool_its_own_methods_and_host_caches(in_tmp: Path) -> None:
    write(in_tmp, {
        "mem_cache/memory_pool.py": WRITE_LOC,
        "mem_cache/layout/paged_view.py": "def paged_kv_view(x, ps, h, d):\n    return x\n",
        "mem_cache/host.py": """\
            class HostKVCache:
                pass

            class MHATokenToKVPoolHost(HostKVCache):
                def get_data_page(self, index, flat=True):
                    data_page = self.kv_buffer[index]
                    return data_page.flatten() if flat else data_page
        """,
        # The NPU pool allocates (layers, pages, page_size, 1, D) and scatters into its own buffer.
        "npu/memory_pool_npu.py": """\
            import torch

            class NPUMLATokenToKVPool:
                def __init__(self, layer_num, size, page_size, dim):
                    self.page_size = page_size
                    self.v_buffer = torch.zeros((layer_num, size // page_size, self.page_size, 1, dim))

                def set_kv_buffer(self, layer_id, loc, cache_v):
                    torch_npu.npu_scatter_nd_update_(
                        self.v_buffer[layer_id].view(-1, 1, self.dim), loc.view(-1, 1), cache_v.view(-1, 1, self.dim)
                    )

                def offload(self, i):
                    return self.v_buffer[i].flatten(0, 1)
        """,
        "npu/attention/ascend_backend.py": """\
            from sglang.srt.npu.memory_pool_npu import NPUMLATokenToKVPool

            class AscendBackend:
                token_to_kv_pool: NPUMLATokenToKVPool

                def forward_mtp(self, layer):
                    v_cache = self.token_to_kv_pool.get_value_buffer(layer.layer_id).view(
                        -1, self.page_size, layer.tp_v_head_num * layer.v_head_dim
                    )
                    return v_cache
        """,
        "layers/triton_backend.py": """\
            def forward(self, layer):
                k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
                return k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)
        """,
    })
    findings = check(".")
    by_path = {(f["path"], f["code"]): f for f in findings}
    # A buffer of the page-split pool (typed by the class's annotation) is that pool's own contiguous
    # (pages, page_size, ...) allocation: its `.view` pages nothing new, so it is not reported.
    assert sorted(by_path) == [("layers/triton_backend.py", "KV201")]
    # A pool of unknown class may be that one, whatever the folder: the fix stays, unsafe, and says why.
    triton = by_path[("layers/triton_backend.py", "KV201")]
    assert triton["fix"]["applicability"] == "unsafe"
    assert "cannot tell which pool `self.token_to_kv_pool` is, and `NPUMLATokenToKVPool`" in triton["message"]
    assert triton["fix"]["replacement"].startswith("paged_kv_view(k_cache, self.page_size")


def test_kv103_suggests_the_trees_predicate(in_tmp: Path) -> None:
    write(in_tmp, {
        "mem_cache/memory_pool.py": WRITE_LOC,
        "mem_cache/swa_memory_pool.py": """\
            class SWAKVPool:
                def set_kv_buffer(self, layer, loc_info, cache_k, cache_v):
                    loc = unwrap_write_loc(loc_info)
                    self.full_kv_pool.set_kv_buffer(layer, loc, cache_k, cache_v)
        """,
    })
    (finding,) = check(".")
    assert finding["code"] == "KV103"
    assert "physical=write_loc_is_physical(loc_info)" in finding["message"]
    assert "loc_info.physical" not in finding["message"]
