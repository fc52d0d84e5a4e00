"""KV102 by a loc's origin (issue 36, item 4), over small trees shaped like upstream SGLang.

The tree defines `KVWriteLoc` as upstream does: `for_layer` wraps a cross-attention layer's
`encoder_out_cache_loc` without the mark (nothing translates it), so kvlint learns that loc
is unmarked by design; `for_batch` says a second loc travels under the batch's mark only
when it comes from the same plan (`write_ids`).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvlint.api.config import Config
from kvlint.face.cli import main
from kvlint.learn.contract import learn_contract

POOL = """\
from dataclasses import dataclass
from typing import Optional


@dataclass
class KVWriteLoc:
    loc: object
    swa_loc: Optional[object] = None
    full_loc: Optional[object] = None
    physical: bool = False

    @classmethod
    def for_batch(cls, forward_batch, *, swa_loc=None, full_loc=None):
        return cls(forward_batch.out_cache_loc, swa_loc, full_loc, physical=forward_batch.out_cache_loc_is_physical)

    @classmethod
    def for_layer(cls, forward_batch, layer, *, swa_loc=None, full_loc=None):
        if layer.is_cross_attention:
            return cls(forward_batch.encoder_out_cache_loc, swa_loc, full_loc)
        return cls.for_batch(forward_batch, swa_loc=swa_loc, full_loc=full_loc)
"""
IMPORT = "from eng.mem_cache.memory_pool import KVWriteLoc\n\n\n"


def run(root: Path, backend: str, *args: str) -> dict:
    (root / "eng" / "mem_cache").mkdir(parents=True)
    (root / "eng" / "attn").mkdir(parents=True)
    (root / "eng" / "mem_cache" / "memory_pool.py").write_text(POOL)
    (root / "eng" / "attn" / "backend.py").write_text(IMPORT + backend)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *args, str(root)], catch_exceptions=False)
    return json.loads(result.output)


def kv102(report: dict) -> list[dict]:
    return [finding for finding in report["findings"] if finding["code"] == "KV102"]


def test_the_encoder_loc_upstreams_for_layer_wraps_unmarked_is_learned_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "memory_pool.py").write_text(POOL)
    contract = learn_contract(Config(), {tmp_path / "memory_pool.py": POOL.encode()})
    assert contract.unmarked_loc_attributes == ("encoder_out_cache_loc",)
    assert contract.source_of("unmarked-loc-attributes").endswith("memory_pool.py:19")


def test_kvlint_contract_shows_the_unmarked_loc_and_where_it_was_learned(tmp_path: Path) -> None:
    (tmp_path / "memory_pool.py").write_text(POOL)
    result = CliRunner().invoke(main, ["contract", str(tmp_path)], catch_exceptions=False)
    [line] = [line for line in result.output.splitlines() if line.startswith("unmarked-loc-attributes")]
    assert '["encoder_out_cache_loc"]' in line and "memory_pool.py:19" in line


def test_an_encoder_loc_wrapped_unmarked_is_not_flagged(tmp_path: Path) -> None:
    backend = (
        "def write(pool, layer, fb, k, v):\n"
        "    pool.set_kv_buffer(layer, KVWriteLoc(fb.encoder_out_cache_loc), k, v)\n"
    )
    assert kv102(run(tmp_path, backend)) == []


def test_an_encoder_loc_through_a_parameter_every_caller_passes_one_is_not_flagged(tmp_path: Path) -> None:
    backend = (
        "class Backend:\n"
        "    def _store(self, layer, loc, k, v):\n"
        "        self.pool.set_kv_buffer(layer, KVWriteLoc(loc), k, v)\n\n"
        "    def forward_extend(self, layer, fb, k, v):\n"
        "        self._store(layer, fb.encoder_out_cache_loc, k, v)\n\n"
        "    def forward_decode(self, layer, fb, k, v):\n"
        "        self._store(layer, loc=fb.encoder_out_cache_loc[: k.shape[0]], k=k, v=v)\n"
    )
    assert kv102(run(tmp_path, backend)) == []


def test_a_parameter_one_caller_passes_the_batch_loc_is_still_flagged(tmp_path: Path) -> None:
    backend = (
        "class Backend:\n"
        "    def _store(self, layer, loc, k, v):\n"
        "        self.pool.set_kv_buffer(layer, KVWriteLoc(loc), k, v)\n\n"
        "    def forward_extend(self, layer, fb, k, v):\n"
        "        self._store(layer, fb.encoder_out_cache_loc, k, v)\n\n"
        "    def forward_decode(self, layer, fb, k, v):\n"
        "        self._store(layer, fb.out_cache_loc, k, v)\n"
    )
    assert [finding["line"] for finding in kv102(run(tmp_path, backend))] == [6]


def test_an_encoder_loc_through_a_runners_static_buffer_is_not_flagged(tmp_path: Path) -> None:
    backend = (
        "import torch\n\n\n"
        "class GraphRunner:\n"
        "    def __init__(self, n):\n"
        "        self.encoder_cache_loc = torch.zeros(n, dtype=torch.int64)\n\n"
        "    def replay_prepare(self, fb):\n"
        "        n = fb.encoder_out_cache_loc.shape[0]\n"
        "        self.encoder_cache_loc[:n].copy_(fb.encoder_out_cache_loc)\n\n"
        "    def replay(self, pool, layer, n, k, v):\n"
        "        loc = self.encoder_cache_loc[:n]\n"
        "        pool.set_kv_buffer(layer, KVWriteLoc(loc), k, v)\n"
    )
    assert kv102(run(tmp_path, backend)) == []


def test_a_static_buffer_filled_from_the_batch_loc_is_still_flagged(tmp_path: Path) -> None:
    backend = (
        "class GraphRunner:\n"
        "    def replay_prepare(self, fb, n):\n"
        "        self.cache_loc[:n].copy_(fb.out_cache_loc)\n\n"
        "    def replay(self, pool, layer, n, k, v):\n"
        "        pool.set_kv_buffer(layer, KVWriteLoc(self.cache_loc[:n]), k, v)\n"
    )
    assert len(kv102(run(tmp_path, backend))) == 1


def test_a_swa_loc_from_the_plan_keeps_the_safe_fix(tmp_path: Path) -> None:
    backend = (
        "class Backend:\n"
        "    def init_forward_metadata(self, fb):\n"
        "        self.forward_metadata.swa_out_cache_loc = self.kv_index_translator.write_ids(fb, SWA)\n\n"
        "    def forward(self, layer, fb, k, v):\n"
        "        self.pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc, self.forward_metadata.swa_out_cache_loc), k, v)\n"
    )
    [finding] = kv102(run(tmp_path, backend))
    assert finding["fix"]["applicability"] == "safe"
    assert finding["fix"]["replacement"] == "KVWriteLoc.for_batch(fb, swa_loc=self.forward_metadata.swa_out_cache_loc)"


def test_a_swa_loc_translated_separately_has_no_safe_fix_and_says_why(tmp_path: Path) -> None:
    backend = (
        "class Backend:\n"
        "    def init_forward_metadata(self, fb):\n"
        "        if self.use_sliding_window_kv_pool:\n"
        "            self.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(fb.out_cache_loc)\n"
        "        else:\n"
        "            self.swa_out_cache_loc = None\n\n"
        "    def forward(self, layer, fb, k, v):\n"
        "        if layer.is_cross_attention:\n"
        "            cache_loc = fb.encoder_out_cache_loc\n"
        "        else:\n"
        "            cache_loc = fb.out_cache_loc\n"
        "        self.pool.set_kv_buffer(layer, KVWriteLoc(cache_loc, self.swa_out_cache_loc), k, v)\n"
    )
    [finding] = kv102(run(tmp_path, backend))
    assert finding["fix"] is None
    assert (
        "`swa_loc` is translated separately (`translate_loc_from_full_to_swa(...)` at line 7), so it states its own mark"
        in finding["message"]
    )
    assert "\n" not in finding["message"]


def test_a_swa_loc_kvlint_cannot_trace_makes_the_fix_unsafe(tmp_path: Path) -> None:
    backend = (
        "def write(pool, layer, fb, k, v, swa):\n"
        "    pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc, swa), k, v)\n"
    )
    [finding] = kv102(run(tmp_path, backend))
    assert finding["fix"]["applicability"] == "unsafe"
    assert "`swa_loc` is not shown to come from the batch's plan" in finding["message"]
