"""The examples tree's runnable parts behave as its README says.

The mini backend (`examples/layers/attention/token_major_backend.py`) shows
its two hazards on real token-major pools, and a copy with the fix applied
matches a contiguous pool bit for bit. The TBO builder's completeness loop
refuses the uncopied `out_cache_loc_id_space` until it is copied.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

torch = pytest.importorskip("torch")
pytest.importorskip("runtime_shim.pool")

from examples.batch_overlap.two_batch_overlap import split_batch  # noqa: E402
from examples.model_executor.forward_batch_info import ForwardBatch, ForwardMode  # noqa: E402
from examples.run_backend import BACKEND_PATH, load_backend_class, run_decode  # noqa: E402
from runtime_shim import KVLayoutError  # noqa: E402

TBO_PATH = ROOT / "examples" / "batch_overlap" / "two_batch_overlap.py"

# What `kvlint fix` is specified to produce for the backend (the KV101 and KV201
# fixes of `kvlint explain`, with the repo's contract modules).
BACKEND_FIX = [
    ("import torch\n", "import torch\n\nfrom runtime_shim import KVWriteLoc\nfrom runtime_shim.paged import paged_kv_view\n"),
    (
        "set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)",
        "set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)",
    ),
    (
        "k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)",
        "paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)",
    ),
    (
        "v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.v_head_dim)",
        "paged_kv_view(v_cache, self.page_size, layer.tp_v_head_num, layer.v_head_dim)",
    ),
]
TBO_FIX = [
    (
        '    output_dict["token_to_kv_pool"] = batch.token_to_kv_pool\n',
        '    output_dict["token_to_kv_pool"] = batch.token_to_kv_pool\n'
        '    output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space\n',
    ),
]


def _patched_copy(src: Path, dst: Path, edits: list) -> Path:
    text = src.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"fixture drifted: {old!r} is not in {src.name} exactly once"
        text = text.replace(old, new)
    dst.write_text(text)
    return dst


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def backend_as_written() -> type:
    return load_backend_class(BACKEND_PATH)


@pytest.fixture(scope="module")
def backend_fixed(tmp_path_factory: pytest.TempPathFactory) -> type:
    path = _patched_copy(BACKEND_PATH, tmp_path_factory.mktemp("fixed") / "token_major_backend.py", BACKEND_FIX)
    return load_backend_class(path)


def test_strict_token_major_pool_refuses_the_bare_out_cache_loc(backend_as_written: type) -> None:
    with pytest.raises(AssertionError, match="not marked kernel-facing"):
        run_decode(backend_as_written, pool="token_major", strict=True)


@pytest.mark.parametrize("page_size", [1, 4])
def test_guard_raises_kv201_on_the_page_split_view(backend_as_written: type, page_size: int) -> None:
    with pytest.raises(KVLayoutError) as info:
        run_decode(backend_as_written, pool="token_major", strict=False, guard=True, page_size=page_size)
    assert info.value.code == "KV201"


def test_unguarded_page_size_1_view_reads_wrong_rows_but_writes_right_ones(backend_as_written: type) -> None:
    contiguous = run_decode(backend_as_written, pool="contiguous")
    token_major = run_decode(backend_as_written, pool="token_major", strict=False)
    assert token_major.written_bytes() == contiguous.written_bytes()
    assert not torch.equal(token_major.output, contiguous.output)


def test_page_split_view_is_silent_at_page_size_above_1(backend_as_written: type) -> None:
    # The review thread's point: for page_size > 1 .view carries the same
    # strides as paged_view, so nothing but the guard or the linter sees it.
    contiguous = run_decode(backend_as_written, pool="contiguous", page_size=4)
    token_major = run_decode(backend_as_written, pool="token_major", strict=False, page_size=4)
    assert torch.equal(token_major.output, contiguous.output)


@pytest.mark.parametrize("page_size", [1, 4])
def test_fixed_backend_matches_the_contiguous_pool_on_a_strict_guarded_pool(backend_fixed: type, page_size: int) -> None:
    contiguous = run_decode(backend_fixed, pool="contiguous", page_size=page_size)
    token_major = run_decode(backend_fixed, pool="token_major", strict=True, guard=True, page_size=page_size)
    assert torch.equal(token_major.output, contiguous.output)
    assert token_major.written_bytes() == contiguous.written_bytes()
    assert token_major.unmarked_writes == []


def test_backend_kernel_matches_reference_attention_on_a_contiguous_cache(backend_as_written: type) -> None:
    from runtime_shim.kernels.reference import paged_decode_attention_reference

    module = sys.modules[backend_as_written.__module__]
    gen = torch.Generator().manual_seed(1)
    k_cache = torch.randn(6, 4, 2, 8, generator=gen)
    v_cache = torch.randn(6, 4, 2, 8, generator=gen)
    q = torch.randn(2, 4, 8, generator=gen)
    page_table = torch.tensor([[3, 1, 5], [2, 4, 0]])
    seq_lens = torch.tensor([10, 7])
    got = module.paged_decode_attention(q, k_cache, v_cache, page_table, seq_lens, sm_scale=8**-0.5)
    want = paged_decode_attention_reference(q, k_cache, v_cache, page_table, seq_lens, sm_scale=8**-0.5)
    torch.testing.assert_close(got, want)


def _parent_batch(**overrides: object) -> ForwardBatch:
    fields = dict(
        forward_mode=ForwardMode.DECODE,
        batch_size=4,
        input_ids=[11, 12, 13, 14],
        req_pool_indices=[0, 1, 2, 3],
        seq_lens=[5, 6, 7, 8],
        out_cache_loc=[40, 41, 42, 43],
        seq_lens_sum=26,
        positions=[4, 5, 6, 7],
        seq_lens_cpu=[5, 6, 7, 8],
        out_cache_loc_virtual=[20, 21, 22, 23],
        out_cache_loc_id_space="kernel",
    )
    fields.update(overrides)
    return ForwardBatch(**fields)


def test_tbo_split_refuses_the_uncopied_id_space_field() -> None:
    with pytest.raises(ValueError, match="Field out_cache_loc_id_space has value"):
        split_batch(_parent_batch())


def test_tbo_split_with_the_field_copied_keeps_the_parents_mark(tmp_path: Path) -> None:
    fixed = _load(_patched_copy(TBO_PATH, tmp_path / "tbo_fixed.py", TBO_FIX), "_examples_tbo_fixed")
    child_a, child_b = fixed.split_batch(_parent_batch())
    assert (child_a.out_cache_loc_id_space, child_b.out_cache_loc_id_space) == ("kernel", "kernel")
    assert child_a.out_cache_loc + child_b.out_cache_loc == [40, 41, 42, 43]
    with pytest.raises(ValueError, match="Field spec_info has value"):
        fixed.split_batch(_parent_batch(spec_info=object()))


def test_run_backend_cli_prints_every_setting() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.run_backend"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "not marked kernel-facing" in result.stdout
    assert "KV201" in result.stdout
    assert "DIFFERS from the contiguous pool" in result.stdout


def test_kvlint_fix_makes_the_backend_match_the_contiguous_pool(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    fix = subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", "examples"], cwd=tmp_path, capture_output=True, text=True
    )
    # Findings without a fix remain elsewhere in the tree: exit 1, not 2.
    assert fix.returncode == 1, fix.stderr
    fixed_path = tmp_path / "examples" / "layers" / "attention" / "token_major_backend.py"
    fixed_source = fixed_path.read_text()
    assert "KVWriteLoc.for_batch(forward_batch)" in fixed_source
    assert "paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)" in fixed_source
    assert "from runtime_shim.paged import paged_kv_view" in fixed_source
    backend = load_backend_class(fixed_path)
    for page_size in (1, 4):
        contiguous = run_decode(backend, pool="contiguous", page_size=page_size)
        token_major = run_decode(backend, pool="token_major", strict=True, guard=True, page_size=page_size)
        assert torch.equal(token_major.output, contiguous.output)
        assert token_major.written_bytes() == contiguous.written_bytes()
