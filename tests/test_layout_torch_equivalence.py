"""KV201's rewrites are equivalent in torch, and they fix the stride.

Each case takes the source kvlint itself produces (`kvlint fix` with the
helpers module `runtime_shim.paged`), runs the flagged expression and its
replacement on real pools from `runtime_shim`, and checks:

* on a contiguous (page-major) per-layer buffer both give the same view:
  shape, strides, storage and values;
* on a token-major per-layer view both give the same shape and values, and
  the rewrite has the slot stride in the page dims. At `page_size == 1` the
  original does not (the review thread's figures: the `(1024, 4, 128)` view
  with strides `(32768, 128, 1)` gives `(32768, 512, 128, 1)` by `.view` and
  `(32768, 32768, 128, 1)` by `paged_view`); at `page_size == 256` the two
  agree, as the thread found, on `(8388608, 32768, 128, 1)`.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

from kvlint.api.contract import Contract  # noqa: E402
from kvlint.rules.layout.stride_silent_view import StrideSilentView  # noqa: E402
from kvlint.testing import fixed_source, run_source  # noqa: E402
from kvlint.api.types import Finding  # noqa: E402
from runtime_shim import (  # noqa: E402
    ContiguousMHAPool,
    ContiguousMLAPool,
    TokenMajorMHAPool,
    TokenMajorMLAPool,
)
from runtime_shim import paged  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SHIM = Contract(paged_helpers_module="runtime_shim.paged")
ONLY_PAGED_VIEW = Contract(paged_helpers_module="runtime_shim.paged", paged_helpers=("paged_view",))
# The review thread's pool: 32 layers, 4 KV heads, head dim 128, so an entry
# holds 32 * 2 * 4 * 128 = 32768 elements and that is every view's slot stride.
MHA = dict(num_slots=1024, page_size=256, layer_num=32, k_heads=4, k_dim=128, v_heads=4, v_dim=128)
MLA = dict(num_slots=1024, page_size=256, layer_num=4, latent_dim=512, rope_dim=64)
SLOT_STRIDE = 32768


def filled(pool: Any, *buffers: str) -> Any:
    """The pool with every layer's rows random, so a wrong stride reads wrong values."""
    generator = torch.Generator().manual_seed(0)
    for name in buffers:
        for view in getattr(pool, name):
            view.copy_(torch.randn(view.shape, generator=generator).to(view.dtype))
    return pool


@pytest.fixture(scope="module")
def mha_pools() -> dict[str, Any]:
    common = dict(MHA, dtype=torch.float16, device="cpu")
    return {
        "token_major": filled(TokenMajorMHAPool(**common), "k_buffer", "v_buffer"),
        "contiguous": filled(ContiguousMHAPool(**common), "k_buffer", "v_buffer"),
    }


@pytest.fixture(scope="module")
def mla_pools() -> dict[str, Any]:
    common = dict(MLA, dtype=torch.float16, device="cpu")
    return {
        "token_major": filled(TokenMajorMLAPool(**common), "kv_buffer"),
        "contiguous": filled(ContiguousMLAPool(**common), "kv_buffer"),
    }


def compiled_page(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "page.py", "exec"), namespace)
    page: Callable[..., Any] = namespace["page"]
    return page


def rewritten(source: str, contract: Contract) -> str:
    fixed = fixed_source(source, [StrideSilentView], contract=contract)
    assert fixed != source, "kvlint did not rewrite the view"
    return fixed


def same_view(a: Any, b: Any) -> bool:
    return (
        a.shape == b.shape
        and a.stride() == b.stride()
        and a.data_ptr() == b.data_ptr()
        and torch.equal(a, b)
    )


# (source of `page(pool, page_size)`, paging layer 3's buffer (an accessor result: dim 0 holds slots, so a fix is offered), {page_size: (stride by .view, stride by the rewrite)} on the token-major view)
FORMS = {
    "heads": (
        "def page(pool, page_size):\n    k_cache = pool.get_key_buffer(3)\n    return k_cache.view(-1, page_size, 4, 128)\n",
        {256: ((8388608, 32768, 128, 1),) * 2, 1: ((32768, 512, 128, 1), (32768, 32768, 128, 1))},
    ),
    "row": (
        "def page(pool, page_size):\n    k_cache = pool.get_key_buffer(3)\n    return k_cache.view(-1, page_size, 512)\n",
        {256: ((8388608, 32768, 1),) * 2, 1: ((32768, 512, 1), (32768, 32768, 1))},
    ),
    "whole_row": (
        "def page(pool, page_size):\n    k_cache = pool.get_key_buffer(3)\n    return k_cache.view(-1, page_size, *k_cache.shape[1:])\n",
        {256: ((8388608, 32768, 128, 1),) * 2, 1: ((32768, 512, 128, 1), (32768, 32768, 128, 1))},
    ),
    # trtllm's HND permute: at page size 1 the row stride lands in stride(2).
    "heads_then_hnd": (
        "def page(pool, page_size):\n    k_cache = pool.get_key_buffer(3)\n    return k_cache.view(-1, page_size, 4, 128).permute(0, 2, 1, 3)\n",
        {256: ((8388608, 128, 32768, 1),) * 2, 1: ((32768, 128, 512, 1), (32768, 128, 32768, 1))},
    ),
}
CONTRACTS = {"all_helpers": SHIM, "only_paged_view": ONLY_PAGED_VIEW}


@pytest.mark.parametrize("contract_name", CONTRACTS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("page_size", [256, 1])
def test_rewrite_matches_view_on_contiguous_buffer(mha_pools, form: str, contract_name: str, page_size: int) -> None:
    source, _ = FORMS[form]
    before = compiled_page(source)
    after = compiled_page(rewritten(source, CONTRACTS[contract_name]))
    pool = mha_pools["contiguous"]
    assert same_view(before(pool, page_size), after(pool, page_size))


@pytest.mark.parametrize("contract_name", CONTRACTS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("page_size", [256, 1])
def test_rewrite_carries_the_slot_stride_on_a_token_major_view(
    mha_pools, form: str, contract_name: str, page_size: int
) -> None:
    source, strides = FORMS[form]
    before = compiled_page(source)
    after = compiled_page(rewritten(source, CONTRACTS[contract_name]))
    pool = mha_pools["token_major"]
    k = pool.get_key_buffer(3)
    assert (tuple(k.shape), k.stride()) == ((1024, 4, 128), (SLOT_STRIDE, 128, 1))
    by_view, by_helper = before(pool, page_size), after(pool, page_size)
    assert (by_view.stride(), by_helper.stride()) == strides[page_size]
    assert by_view.shape == by_helper.shape
    assert by_helper.data_ptr() == k.data_ptr()
    assert torch.equal(by_view, by_helper)


def _span(source: str, finding: Finding) -> str:
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: finding.line - 1]) + finding.column - 1
    end = sum(len(line) for line in lines[: finding.end_line - 1]) + finding.end_column - 1
    return source[start:end]


def _example_rewrites() -> list[pytest.param]:
    cases = []
    for path in sorted(EXAMPLES.rglob("*.py")):
        source = path.read_text()
        for finding in run_source(source, [StrideSilentView], contract=SHIM).findings:
            assert finding.fix is not None, f"{path}:{finding.line} has no fix"
            name = f"{path.relative_to(EXAMPLES)}:{finding.line}"
            cases.append(pytest.param(_span(source, finding), finding.fix.replacement, id=name))
    return cases


EXAMPLE_REWRITES = _example_rewrites()


def test_examples_hold_every_kv201_form_the_readme_lists() -> None:
    # token_major x2, flashinfer x2, trtllm x4 (page size 1 and > 1), flashmla row view x1.
    assert len(EXAMPLE_REWRITES) == 9


def _namespace(mha: Any, mla: Any, page_size: int) -> dict[str, Any]:
    k_cache, v_cache = mha.get_kv_buffer(5)
    layer = SimpleNamespace(tp_k_head_num=4, tp_v_head_num=4, head_dim=128, v_head_dim=128, layer_id=5)
    return {
        "k_cache": k_cache,
        "v_cache": v_cache,
        "kv_cache": mla.get_key_buffer(2),
        "page_size": page_size,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "self": SimpleNamespace(page_size=page_size),
        "layer": layer,
        "paged_view": paged.paged_view,
        "paged_row_view": paged.paged_row_view,
        "paged_kv_view": paged.paged_kv_view,
    }


@pytest.mark.parametrize("page_size", [256, 1])
@pytest.mark.parametrize(("original", "replacement"), EXAMPLE_REWRITES)
def test_each_examples_rewrite_is_equivalent_and_keeps_the_slot_stride(
    mha_pools, mla_pools, original: str, replacement: str, page_size: int
) -> None:
    contiguous = _namespace(mha_pools["contiguous"], mla_pools["contiguous"], page_size)
    assert same_view(eval(original, contiguous), eval(replacement, contiguous))

    token_major = _namespace(mha_pools["token_major"], mla_pools["token_major"], page_size)
    by_view, by_helper = eval(original, token_major), eval(replacement, token_major)
    assert by_view.shape == by_helper.shape and torch.equal(by_view, by_helper)
    flat = token_major[original.split(".", 1)[0]]
    assert by_helper.stride(1) == flat.stride(0), "the rewrite's in-page stride is not the slot stride"
    if page_size == 1:
        assert by_view.stride(1) != flat.stride(0), "page size 1: `.view` gives dim 1 the row stride"
