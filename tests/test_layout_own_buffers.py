"""Buffers by origin (issue 36, item 3): a tensor the code allocates itself is not paged KV
whatever its name; the name fallback holds only where the origin is unknown, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.running.engine import RunOptions, run

MODEL = (
    "import torch\nfrom torch import nn\n\n\n"
    "class Attention(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    '        self.register_buffer("k_cache", torch.zeros(8, 4096, 4, 64))\n'
    "        self.v_cache = torch.zeros(8, 4096, 4, 64)\n\n"
    "    def forward(self, q, n):\n"
    "        return self._attend(q, self.k_cache[:, :n], self.v_cache[:, :n])\n\n"
    "    def _attend(self, q, k_cache, v_cache):\n"
    "        return fused_attention(q, k_cache.contiguous(), v_cache.contiguous())\n"
)


def check(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> list[Finding]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.chdir(root)
    return run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings


def test_a_models_own_register_buffer_cache_named_k_cache_is_not_paged_kv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough that the engine checks a skeleton of the file: `__init__` must stay in it.
    padding = "".join(f"\n\ndef unrelated_{i}(x):\n    return x + {i}\n" for i in range(40))
    assert check(tmp_path, monkeypatch, {"eng/models/llama.py": MODEL + padding}) == []


def test_the_same_name_of_unknown_origin_is_reported_as_resting_on_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = "def attend(q, k_cache):\n    return fused_attention(q, k_cache.contiguous())\n"
    [finding] = check(tmp_path, monkeypatch, {"eng/ops/attend.py": kernel})
    assert finding.code == "KV202"
    assert "`k_cache` is taken for paged KV by its name alone (its origin is unknown)" in finding.message


def test_one_caller_passing_a_pool_buffer_keeps_the_name_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = MODEL + "\n    def decode(self, q, pool):\n        return self._attend(q, pool.get_key_buffer(0), self.v_cache)\n"
    found = check(tmp_path, monkeypatch, {"eng/models/llama.py": mixed})
    # `k_cache` in the helper (by name: one caller passes a pool buffer), and that caller's argument;
    # `v_cache` is the model's own allocation at every call.
    assert [(f.code, f.line) for f in found] == [("KV202", 15), ("KV202", 18)]
