"""Buffers by origin (issue 36, item 3): a tensor the code allocates itself is not paged KV
whatever its name; the name fallback holds only where the origin is unknown, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.learn.contract import learn_contract
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


# sglang-omni's Fast-AR decoder: a device kernel wrapper takes the cache as a parameter from a dispatching
# op, which a model's forward fills from its own cache module's method returning slices of `register_buffer`s.
FAST_AR = (
    "import torch\nfrom torch import nn\n\n\n"
    "def npu_attention(q, k_cache, v_cache, end):\n"
    "    return fused_attention(q, k_cache[:, :end].contiguous(), v_cache[:, :end].contiguous())\n\n\n"
    "def attention_op(q, k_cache, v_cache, end):\n"
    "    if q.device.type == 'npu':\n"
    "        return npu_attention(q, k_cache=k_cache, v_cache=v_cache, end=end)\n"
    "    return dense_attention(q, k_cache, v_cache, end)\n\n\n"
    "class Attention(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.kv_cache: KVCache | None = None\n\n"
    "    def forward(self, q, bsz, end):\n"
    "        k_cache, v_cache = self.kv_cache.get(bsz)\n"
    "        return attention_op(q, k_cache, v_cache, end)\n\n\n"
    "class KVCache(nn.Module):\n"
    "    def __init__(self, batch, length):\n"
    "        super().__init__()\n"
    '        self.register_buffer("k_cache", torch.zeros(batch, length, 8, 64))\n'
    '        self.register_buffer("v_cache", torch.zeros(batch, length, 8, 64))\n\n'
    "    def get(self, bsz):\n"
    "        return self.k_cache[:bsz], self.v_cache[:bsz]\n"
)
# Long enough that the engine checks a skeleton: the op, the forward and `KVCache.get` hold no trigger word.
PADDING = "".join(f"\n\ndef unrelated_{i}(x):\n    return x + {i}\n" for i in range(60))


def test_a_cache_handed_down_two_calls_from_its_own_modules_method_is_not_paged_kv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert check(tmp_path, monkeypatch, {"omni/audio_decoder.py": FAST_AR + PADDING}) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        # The cache module hands out a pool's buffer as its keys.
        (('        return self.k_cache[:bsz], self.v_cache[:bsz]\n',
          '        return self.pool.get_key_buffer(0), self.v_cache[:bsz]\n'), ["k_cache"]),
        # Another caller passes tensors of unknown origin.
        (('    return dense_attention(q, k_cache, v_cache, end)\n',
          '    return dense_attention(q, k_cache, v_cache, end)\n\n\n'
          'def other(q, buffers, end):\n    return attention_op(q, buffers[0], buffers[1], end)\n'), ["k_cache", "v_cache"]),
        # The forward's cache is not typed by the file.
        (("        self.kv_cache: KVCache | None = None\n", "        self.kv_cache = make_cache()\n"), ["k_cache", "v_cache"]),
    ],
)
def test_a_cache_whose_origin_is_not_shown_all_the_way_keeps_the_name_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: tuple[str, str], named: list[str]
) -> None:
    old, new = change
    assert old in FAST_AR
    found = check(tmp_path, monkeypatch, {"omni/audio_decoder.py": FAST_AR.replace(old, new) + PADDING})
    assert [(finding.code, finding.line) for finding in found] == [("KV202", 6)] * len(named)
    assert all(f"`{name}[:, :end]` is taken for paged KV by its name alone" in finding.message
               for name, finding in zip(named, found))


# A pool building its per-layer buffers with `setattr` from a table of names (TokenSpeed's pools):
# it never assigns `self.k_buffer = ...`, but indexes it in its own methods.
SETATTR_POOL = (
    "import torch\n\n\n"
    "class MHAPool:\n"
    "    planes = {'k': 'k_buffer', 'v': 'v_buffer'}\n\n"
    "    def __init__(self, size, layers):\n"
    "        for name, attribute in self.planes.items():\n"
    "            setattr(self, attribute, [torch.zeros(size, 8, 128) for _ in range(layers)])\n\n"
    "    def _rows(self, buf, heads):\n"
    "        return buf.reshape(-1, heads, 128)\n\n"
    "    def get_key_buffer(self, layer_id):\n"
    "        return self._rows(self.k_buffer[layer_id], 8)\n"
)
SETATTR_BACKEND = (
    "def attend(pool, layer):\n"
    "    return pool.get_key_buffer(layer.layer_id).reshape(-1, 4, 256)\n"
)


def test_a_pool_building_its_buffers_by_setattr_owns_them_in_its_own_methods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = check(tmp_path, monkeypatch, {"eng/kv_cache/mha.py": SETATTR_POOL, "eng/backends/mha.py": SETATTR_BACKEND})
    # The pool's own regroup of its own buffer is its business; a backend's regroup of what it hands out is not.
    assert [(f.path.rsplit("/", 1)[-1], f.code, f.line) for f in found] == [("mha.py", "KV202", 2)]
    assert found[0].path.endswith("backends/mha.py")


def test_an_annotated_buffer_assignment_makes_a_pool_class(tmp_path: Path) -> None:
    source = "import torch\n\nclass ArrayPool:\n    def __init__(self, n):\n        self.k_buffer: list = [torch.zeros(n, 8)]\n"
    path = tmp_path / "pool.py"
    path.write_text(source)
    assert learn_contract(load_config(start=tmp_path), {path: source.encode()}).pool_classes == ("ArrayPool",)
