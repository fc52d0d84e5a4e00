"""KV102 in a tree whose write-loc class has no mark field yet (sglang 0.5.20 and 0.5.21): a
`KVWriteLoc(...)` wrapping the batch's raw loc is what the migration built with the factories
(0.5.22: `KVWriteLoc.for_layer(forward_batch, layer, swa_loc=...)`), so it is reported; a loc of
any other origin has no keyword to state its id space with yet, so it is not."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvlint.cli import main

WRITE_LOC = '''
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class KVWriteLoc:
    loc: torch.Tensor
    swa_loc: Optional[torch.Tensor] = None


def unwrap_write_loc(loc_info):
    if isinstance(loc_info, KVWriteLoc):
        return loc_info.loc, loc_info.swa_loc
    return loc_info, None
'''

BACKEND = '''
from engine.write_loc import KVWriteLoc


class Backend:
    def forward(self, layer, forward_batch, k, v):
        cache_loc = (
            forward_batch.out_cache_loc
            if not layer.is_cross_attention
            else forward_batch.encoder_out_cache_loc
        )
        self.pool.set_kv_buffer(layer, KVWriteLoc(cache_loc, self.swa_loc), k, v)

    def forward_own(self, layer, rows, k, v):
        self.pool.set_kv_buffer(layer, KVWriteLoc(rows.cache_slots), k, v)
'''


def test_a_raw_loc_wrapped_before_the_mark_is_reported(in_tmp: Path) -> None:
    (in_tmp / "engine").mkdir()
    (in_tmp / "engine/write_loc.py").write_text(WRITE_LOC)
    (in_tmp / "engine/backend.py").write_text(BACKEND)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "--select", "KV102", "."],
                                catch_exceptions=False)
    findings = json.loads(result.stdout)["findings"]
    lines = BACKEND.splitlines()
    assert [f["line"] for f in findings] == [next(n for n, line in enumerate(lines, 1) if "KVWriteLoc(cache_loc" in line)]
    (finding,) = findings
    assert finding["fix"] is None
    assert finding["message"] == (
        "`KVWriteLoc(...)` wraps the batch's raw loc: this tree's `KVWriteLoc` has no mark field yet, so no mark "
        "travels with the loc; the contract has no layer factory, so wrap each branch's loc with its own mark"
    )
