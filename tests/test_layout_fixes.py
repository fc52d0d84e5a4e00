"""KV201's rewrite as source: before/after, import insertion, the helper spellings, idempotence."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from codemods.use_paged_view import UsePagedViewCommand
from kvlint.api.contract import Contract
from kvlint.rules.layout.stride_silent_view import StrideSilentView
from kvlint.testing import fixed_source, run_source
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

SHIM = Contract(paged_helpers_module="runtime_shim.paged")
ONLY_PAGED_VIEW = Contract(paged_helpers_module="runtime_shim.paged", paged_helpers=("paged_view",))


def fix(source: str, contract: Contract = SHIM) -> str:
    fixed = fixed_source(source, [StrideSilentView], contract=contract)
    compile(fixed, "fixed.py", "exec")
    assert fixed_source(fixed, [StrideSilentView], contract=contract) == fixed, "fix is not idempotent"
    return fixed


def test_import_is_added_after_the_existing_imports_once_for_two_fixes() -> None:
    before = (
        '"""Backend."""\n'
        "import torch\n"
        "\n"
        "\n"
        "def decode(self, layer):\n"
        "    k_cache, v_cache = self.pool.get_kv_buffer(layer.layer_id)\n"
        "    k = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)  # NHD pages\n"
        "    v = v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.head_dim)\n"
        "    return k, v\n"
    )
    after = (
        '"""Backend."""\n'
        "import torch\n"
        "from runtime_shim.paged import paged_kv_view\n"
        "\n"
        "\n"
        "def decode(self, layer):\n"
        "    k_cache, v_cache = self.pool.get_kv_buffer(layer.layer_id)\n"
        "    k = paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)  # NHD pages\n"
        "    v = paged_kv_view(v_cache, self.page_size, layer.tp_v_head_num, layer.head_dim)\n"
        "    return k, v\n"
    )
    assert fix(before) == after


def test_an_existing_import_from_the_helpers_module_is_extended() -> None:
    before = (
        "from runtime_shim.paged import paged_kv_view\n\n"
        "def f(pool, page_size):\n    kv_cache = pool.get_key_buffer(0)\n    return kv_cache.view(-1, page_size, 576)\n"
    )
    after = (
        "from runtime_shim.paged import paged_row_view, paged_kv_view\n\n"
        "def f(pool, page_size):\n    kv_cache = pool.get_key_buffer(0)\n    return paged_row_view(kv_cache, page_size)\n"
    )
    assert fix(before) == after


def test_a_helper_imported_from_elsewhere_is_used_under_its_local_name() -> None:
    before = "from mylib.views import paged_kv_view as pkv\n\ndef f(pool, ps):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, PAGE_SIZE, 4, 128)\n"
    assert fix(before) == "from mylib.views import paged_kv_view as pkv\n\ndef f(pool, ps):\n    k_cache = pool.get_key_buffer(0)\n    return pkv(k_cache, PAGE_SIZE, 4, 128)\n"


def test_a_helper_defined_in_the_same_module_is_not_imported() -> None:
    before = (
        "def paged_kv_view(buf, page_size, h, d):\n    ...\n\n"
        "def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, page_size, 4, 128)\n"
    )
    assert fix(before) == before.replace("k_cache.view(-1, page_size, 4, 128)", "paged_kv_view(k_cache, page_size, 4, 128)")


def test_default_module_is_the_seeds_paged_view_module() -> None:
    fixed = fix("def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, page_size, 4, 128)\n", Contract())
    assert fixed.startswith("from sglang.srt.mem_cache.layout.paged_view import paged_kv_view\n")


@pytest.mark.parametrize(
    ("view", "rewritten"),
    [
        ("k_cache.view(-1, page_size, 4, 128)", "paged_view(k_cache.view(k_cache.shape[0], 4, 128), page_size)"),
        ("k_cache.view(-1, page_size, 512)", "paged_view(k_cache.view(k_cache.shape[0], 512), page_size)"),
        ("k_cache.view(-1, 1, h, d)", "paged_view(k_cache.view(k_cache.shape[0], h, d), 1)"),
        ("k_cache.view(-1, page_size, *k_cache.shape[1:])", "paged_view(k_cache, page_size)"),
    ],
)
def test_a_tree_with_only_paged_view_gets_the_row_shaped_first(view: str, rewritten: str) -> None:
    source = f"def f(pool, page_size, h, d):\n    k_cache = pool.get_key_buffer(0)\n    return {view}\n"
    fixed = fix(source, ONLY_PAGED_VIEW)
    assert fixed == f"from runtime_shim.paged import paged_view\n\n{source.replace(view, rewritten)}"


def test_with_only_paged_view_a_call_receiver_is_reported_without_a_fix() -> None:
    # `x.view(x.shape[0], ...)` would evaluate the accessor call twice.
    source = "def f(pool, page_size):\n    return pool.get_key_buffer(0).view(-1, page_size, 4, 128)\n"
    (finding,) = run_source(source, [StrideSilentView], contract=ONLY_PAGED_VIEW).findings
    assert finding.fix is None


def test_trailing_dims_unpacked_from_elsewhere_are_reported_without_a_fix() -> None:
    source = "def f(pool, page_size, dims):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, page_size, *dims)\n"
    (finding,) = run_source(source, [StrideSilentView], contract=SHIM).findings
    assert finding.fix is None


def test_the_finding_carries_the_replacement_and_its_span() -> None:
    source = "def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    x = k_cache.view(-1, page_size, 4, 128).permute(0, 2, 1, 3)\n"
    (finding,) = run_source(source, [StrideSilentView], contract=SHIM).findings
    assert (finding.line, finding.column, finding.end_column) == (3, 9, 44)
    assert finding.fix is not None and finding.fix.replacement == "paged_kv_view(k_cache, page_size, 4, 128)"


def test_suppressed_finding_is_not_fixed() -> None:
    source = "def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, page_size, 4, 128)  # kvlint: ignore[KV201]\n"
    assert fix(source) == source


def test_codemod_command_applies_the_rewrite_with_the_configured_module(in_tmp: Path) -> None:
    (in_tmp / "kvlint.toml").write_text('[contract]\npaged-helpers-module = "runtime_shim.paged"\n')
    before = "def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    return k_cache.view(-1, page_size, 4, 128)\n"
    context = CodemodContext(filename=str(in_tmp / "backend.py"))
    after = UsePagedViewCommand(context).transform_module(cst.parse_module(before)).code
    assert after == (
        "from runtime_shim.paged import paged_kv_view\n\n"
        "def f(pool, page_size):\n    k_cache = pool.get_key_buffer(0)\n    return paged_kv_view(k_cache, page_size, 4, 128)\n"
    )


def test_literal_page_size_one_counts_only_when_spelled_as_the_prefilter_sees_it() -> None:
    from kvlint.rules.layout.stride_silent_view import StrideSilentView
    from kvlint.testing import run_source

    head = "def f(pool, layer):\n    k_cache = pool.get_key_buffer(layer.layer_id)\n"
    for call, flagged in [
        ("k_cache.view(-1, 1, 8, 128)", True),
        ("k_cache.view(-1,1, 8, 128)", True),
        ("k_cache.view(\n        -1,\n        1,\n        8,\n        128,\n    )", False),
    ]:
        findings = run_source(head + f"    return {call}\n", [StrideSilentView]).findings
        assert bool(findings) is flagged, call
