"""The bundled example engine: every documented hazard is found, and `kvlint fix` repairs a copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (file under examples/, code, fixable) -> count: the hazard table of examples/README.md.
EXPECTED = {
    ("layers/attention/flashinfer_backend.py", "KV101", True): 2,
    ("layers/attention/flashinfer_backend.py", "KV201", True): 2,
    ("layers/attention/flashinfer_backend.py", "KV202", False): 3,
    ("layers/attention/flashmla_backend.py", "KV201", True): 1,
    # Through the helper it inherits from base_attn_backend.py (the project index); no fix,
    # since the helper also returns the capture buffer.
    ("layers/attention/flashmla_backend.py", "KV101", False): 1,
    ("layers/attention/minicpm_backend.py", "KV203", False): 2,
    ("layers/attention/token_major_backend.py", "KV101", True): 1,
    ("layers/attention/token_major_backend.py", "KV201", True): 2,
    ("layers/attention/triton_backend.py", "KV101", True): 3,
    ("layers/attention/triton_backend.py", "KV102", True): 1,
    ("layers/attention/trtllm_mha_backend.py", "KV201", True): 4,
    ("layers/attention/trtllm_mha_backend.py", "KV202", False): 2,
    ("layers/cp/zigzag.py", "KV101", True): 1,
    ("layers/cp/zigzag.py", "KV102", False): 1,
    ("mem_cache/memory_pool.py", "KV103", False): 2,
    ("model_executor/forward_batch_info.py", "KV301", True): 1,
    ("model_executor/forward_batch_info.py", "KV301", False): 1,
    ("models/deepseek_common/forward_mha.py", "KV101", True): 2,
}


def kvlint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvlint", *args], cwd=cwd, capture_output=True, text=True)


def findings(cwd: Path) -> Counter:
    result = kvlint(cwd, "check", "--no-cache", "--format", "json", "examples")
    report = json.loads(result.stdout)
    assert report["errors"] == []
    return Counter(
        (f["path"].removeprefix("examples/"), f["code"], f["fix"] is not None) for f in report["findings"]
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_every_documented_hazard_is_found_and_nothing_else() -> None:
    assert findings(ROOT) == Counter(EXPECTED)


def test_fix_diff_writes_nothing(copy: Path) -> None:
    before = {path: path.read_bytes() for path in copy.rglob("*.py")}
    result = kvlint(copy, "fix", "--diff", "examples")
    assert result.returncode == 1
    assert "+            forward_batch.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)" in result.stdout
    assert {path: path.read_bytes() for path in copy.rglob("*.py")} == before


def test_fix_repairs_every_safe_finding_once(copy: Path) -> None:
    first = kvlint(copy, "fix", "examples")
    assert first.returncode == 1, first.stderr  # unfixable findings remain
    after = {path: path.read_bytes() for path in copy.rglob("*.py")}
    for path in after:
        compile(after[path], str(path), "exec")
    remaining = findings(copy)
    assert all(not fixable or code == "KV301" for _, code, fixable in remaining), remaining
    assert remaining == Counter({key: n for key, n in EXPECTED.items() if not key[2] or key[1] == "KV301"})
    second = kvlint(copy, "fix", "examples")
    assert {path: path.read_bytes() for path in copy.rglob("*.py")} == after, second.stderr
    triton = (copy / "examples/layers/attention/triton_backend.py").read_text()
    assert "KVWriteLoc.for_layer(forward_batch, layer)" in triton
    assert "KVWriteLoc.for_batch(forward_batch, swa_loc=self.forward_metadata.swa_out_cache_loc)" in triton


def test_unsafe_fix_copies_the_tbo_field(copy: Path) -> None:
    kvlint(copy, "fix", "--unsafe", "examples")
    builder = (copy / "examples/batch_overlap/two_batch_overlap.py").read_text()
    assert 'output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space' in builder
    assert ("model_executor/forward_batch_info.py", "KV301", True) not in findings(copy)
