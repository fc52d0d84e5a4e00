"""End to end: the examples backend before and after ``kvlint fix``, on CUDA, or
on CPU with the Triton kernels interpreted.

The examples tree (``examples/layers/attention/token_major_backend.py``,
driven by ``examples/run_backend.py``) carries two hazards: a bare
``forward_batch.out_cache_loc`` at the write door (KV101) and
``.view(-1, page_size, H, D)`` on the pool's per-layer views (KV201). A copy of
the tree is fixed with ``python -m kvlint fix`` and both versions run the same
decode steps on the device, against a strict token-major pool under
``kv_layout_guard()`` and against the contiguous pool:

* before the fix the strict pool refuses the unmarked loc, the guard raises
  KV201, and with both off (page size 1) the output is wrong;
* after it, the token-major run equals the contiguous run bit for bit.

The same backend with its kernel swapped for the Triton ones shows the
failure at page size 16 too: the stride-naive kernel over the unfixed
``.view`` is wrong, the stride-aware kernel over the fixed spelling is
bit-identical to the contiguous pool.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kv_gpu_helpers import DEVICE, sized
from runtime_shim import KVLayoutError
from runtime_shim.kernels import paged_decode_attention, paged_decode_attention_stride_naive

REPO = Path(__file__).resolve().parents[2]
BACKEND = Path("layers") / "attention" / "token_major_backend.py"

run_backend = pytest.importorskip("examples.run_backend", reason="examples/run_backend.py is not importable")


@pytest.fixture(scope="module")
def fixed_examples(tmp_path_factory) -> Path:
    """A copy of examples/ after ``python -m kvlint fix``, with the repository's
    kvlint configuration beside it (it names runtime_shim as the helpers' module)."""
    root = tmp_path_factory.mktemp("e2e")
    shutil.copytree(REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", "examples"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), f"kvlint fix failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return root / "examples"


def _load(path: Path):
    return run_backend.load_backend_class(path)


# Interpreted, one decode step over two layers keeps each run under a second.
SMALL = sized({}, dict(steps=1, layer_num=2))
PAGE_SIZES = sized([1, 16, 64], [1, 16])


def _run(backend_cls, **kwargs):
    return run_backend.run_decode(backend_cls, device=DEVICE, **SMALL, **kwargs)


def _with_kernel(backend_cls, kernel):
    """The backend's module with its attention kernel replaced by ``kernel``."""
    module = sys.modules[backend_cls.__module__]
    module.paged_decode_attention = kernel
    return backend_cls


def _page_splitting_views(source: str) -> list:
    """Lines of ``x.view(-1, <page size>, ...)`` calls: splits of the slot dim into pages."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "view"
        and len(node.args) >= 3
        and ast.unparse(node.args[0]) == "-1"
        and "page_size" in ast.unparse(node.args[1])
    ]


def test_kvlint_fix_rewrote_both_hazards(fixed_examples):
    before = (REPO / "examples" / BACKEND).read_text()
    source = (fixed_examples / BACKEND).read_text()
    assert _page_splitting_views(before), "the unfixed backend no longer has the KV201 .view"
    assert "KVWriteLoc.for_batch(forward_batch)" in source, "KV101 fix missing"
    assert not _page_splitting_views(source), (
        "kvlint fix left the KV201 .view(-1, page_size, H, D) in place at lines "
        f"{_page_splitting_views(source)}"
    )
    assert "paged_kv_view(" in source, "KV201 fix (paged_kv_view) missing"


def test_unfixed_backend_is_refused_by_a_strict_pool():
    with pytest.raises(AssertionError, match="not marked"):
        _run(_load(REPO / "examples" / BACKEND), pool="token_major", strict=True, page_size=16)


@pytest.mark.parametrize("page_size", [1, 16])
def test_unfixed_backend_view_raises_kv201_under_the_guard(page_size):
    with pytest.raises(KVLayoutError, match="KV201"):
        _run(_load(REPO / "examples" / BACKEND), pool="token_major", strict=False, guard=True, page_size=page_size)


def test_unfixed_backend_without_guard_gives_wrong_output():
    backend = _load(REPO / "examples" / BACKEND)
    contiguous = _run(backend, pool="contiguous", page_size=1)
    token_major = _run(backend, pool="token_major", strict=False, page_size=1)
    assert token_major.written_bytes() == contiguous.written_bytes()  # the rows are right ...
    assert not torch.allclose(token_major.output, contiguous.output, atol=1e-2)  # ... the reads are not


@pytest.mark.parametrize("page_size", [1, 16])
def test_fixed_backend_equals_the_contiguous_run(fixed_examples, page_size):
    backend = _load(fixed_examples / BACKEND)
    contiguous = _run(backend, pool="contiguous", page_size=page_size)
    token_major = _run(backend, pool="token_major", strict=True, guard=True, page_size=page_size)
    assert token_major.output.device.type == DEVICE.type
    assert token_major.unmarked_writes == []
    assert token_major.written_bytes() == contiguous.written_bytes()
    assert torch.equal(token_major.output, contiguous.output)


def test_unfixed_backend_with_a_stride_naive_triton_kernel_is_wrong_at_page_size_16():
    backend = _with_kernel(_load(REPO / "examples" / BACKEND), paged_decode_attention_stride_naive)
    contiguous = _run(backend, pool="contiguous", page_size=16)
    token_major = _run(backend, pool="token_major", strict=False, page_size=16)
    assert torch.isfinite(token_major.output).all()
    assert not torch.allclose(token_major.output, contiguous.output, atol=1e-2)


@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_fixed_backend_with_the_stride_aware_triton_kernel_is_bit_identical(fixed_examples, page_size):
    backend = _with_kernel(_load(fixed_examples / BACKEND), paged_decode_attention)
    contiguous = _run(backend, pool="contiguous", page_size=page_size)
    token_major = _run(backend, pool="token_major", strict=True, guard=True, page_size=page_size)
    assert torch.equal(token_major.output, contiguous.output)
