"""Before/after for the write-loc rewrites, in both spellings of the contract."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvlint.rules.write_loc.bare_write_loc import BareWriteLoc
from kvlint.rules.write_loc.unmarked_write_loc import UnmarkedWriteLoc
from kvlint.testing import fixed_source

PHYSICAL = {"mark": "physical", "batch-mark": "out_cache_loc_is_physical", "write-loc-module": "engine.pool"}
ID_SPACE = {"mark": "id_space", "batch-mark": "out_cache_loc_id_space", "write-loc-module": "engine.pool"}

ALIASED_SLICE = """\
def forward(pool, layer, fb, k, v, n):
    loc = fb.out_cache_loc[:n]
    pool.set_kv_buffer(layer, loc, k, v)
"""


@pytest.mark.parametrize(
    ("contract", "marked"),
    [
        (PHYSICAL, "KVWriteLoc(loc, physical=fb.out_cache_loc_is_physical)"),
        (ID_SPACE, "KVWriteLoc(loc, id_space=fb.out_cache_loc_id_space)"),
    ],
)
def test_slice_alias_is_wrapped_with_the_contracts_mark_and_import_added(contract: dict, marked: str) -> None:
    fixed = fixed_source(ALIASED_SLICE, [BareWriteLoc], overrides=contract)
    assert fixed == (
        "from engine.pool import KVWriteLoc\n\n"
        "def forward(pool, layer, fb, k, v, n):\n"
        "    loc = fb.out_cache_loc[:n]\n"
        f"    pool.set_kv_buffer(layer, {marked}, k, v)\n"
    )


def test_existing_import_is_reused_not_duplicated() -> None:
    source = "from engine.pool import KVWriteLoc\n\n" + ALIASED_SLICE
    fixed = fixed_source(source, [BareWriteLoc], overrides=PHYSICAL)
    assert fixed.count("import KVWriteLoc") == 1


def test_import_alias_is_used_for_the_factory() -> None:
    source = textwrap.dedent(
        """\
        import torch
        from engine.pool import KVWriteLoc as WriteLoc


        def forward(pool, layer, fb, k, v):
            cache_loc = fb.out_cache_loc
            pool.set_kv_buffer(layer, cache_loc, k, v)
            return cache_loc.shape[0]
        """
    )
    fixed = fixed_source(source, [BareWriteLoc], overrides=PHYSICAL)
    assert "pool.set_kv_buffer(layer, WriteLoc.for_batch(fb), k, v)" in fixed
    assert "    cache_loc = fb.out_cache_loc\n" in fixed, "the alias is still used, and stays"
    assert fixed.count("import") == 2


def test_module_import_is_used_for_the_factory() -> None:
    source = "from engine import pool as memory_pool\n\n\ndef f(p, layer, fb):\n    p.set_kv_buffer(layer, fb.out_cache_loc)\n"
    fixed = fixed_source(source, [BareWriteLoc], overrides={"write-loc-module": "engine.pool"})
    assert "p.set_kv_buffer(layer, memory_pool.KVWriteLoc.for_batch(fb))" in fixed
    assert fixed.count("import") == 1


@pytest.mark.parametrize("contract", [PHYSICAL, ID_SPACE])
def test_unmarked_write_loc_becomes_for_batch_whatever_the_mark_spelling(contract: dict) -> None:
    source = textwrap.dedent(
        """\
        from engine.pool import KVWriteLoc


        def write_loc(self, forward_batch):
            self.forward_metadata.swa_out_cache_loc = self.translator.write_ids(forward_batch, SWA)
            return KVWriteLoc(
                forward_batch.out_cache_loc,
                self.forward_metadata.swa_out_cache_loc,
            )
        """
    )
    fixed = fixed_source(source, [UnmarkedWriteLoc], overrides=contract)
    assert (
        "    return KVWriteLoc.for_batch(forward_batch, swa_loc=self.forward_metadata.swa_out_cache_loc)\n" in fixed
    )


def test_both_rules_together_settle_in_one_fix_run() -> None:
    source = textwrap.dedent(
        """\
        def forward(pool, layer, fb, k, v, translator):
            swa = translator.write_ids(fb, SWA)
            cache_loc = fb.out_cache_loc if not layer.is_cross_attention else fb.encoder_out_cache_loc
            pool.set_kv_buffer(layer, cache_loc, k, v)
            pool.set_kv_buffer(layer, KVWriteLoc(cache_loc, swa), k, v)
        """
    )
    fixed = fixed_source(source, [BareWriteLoc, UnmarkedWriteLoc], overrides=ID_SPACE)
    assert fixed.count("KVWriteLoc.for_layer(fb, layer") == 2
    assert "KVWriteLoc.for_layer(fb, layer, swa_loc=swa)" in fixed
    assert fixed.startswith("from engine.pool import KVWriteLoc\n")


def test_codemods_run_under_libcst_tool(tmp_path: Path) -> None:
    # The class lives outside this one-file tree: pinning its module is what makes the fixes safe (issue 15).
    (tmp_path / "kvlint.toml").write_text(
        '[contract]\nmark = "physical"\nbatch-mark = "out_cache_loc_is_physical"\nwrite-loc-module = "engine.pool"\n'
    )
    (tmp_path / ".libcst.codemod.yaml").write_text(
        "generated_code_marker: '@generated'\nformatter: []\nblacklist_patterns: []\nmodules:\n  - 'codemods'\nrepo_root: '.'\n"
    )
    target = tmp_path / "backend.py"
    target.write_text(
        "from engine.pool import KVWriteLoc\n\n\ndef f(pool, layer, fb, k, v, translator):\n"
        "    swa = translator.write_ids(fb, SWA)\n"
        "    pool.set_kv_buffer(layer, fb.out_cache_loc[:2], k, v)\n"
        "    return KVWriteLoc(fb.out_cache_loc, swa)\n"
    )
    for command in ("wrap_write_loc.WrapWriteLocCommand", "mark_write_loc.MarkWriteLocCommand"):
        result = subprocess.run(
            [sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "--jobs=1", command, "backend.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
    assert target.read_text() == (
        "from engine.pool import KVWriteLoc\n\n\ndef f(pool, layer, fb, k, v, translator):\n"
        "    swa = translator.write_ids(fb, SWA)\n"
        "    pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc[:2], physical=fb.out_cache_loc_is_physical), k, v)\n"
        "    return KVWriteLoc.for_batch(fb, swa_loc=swa)\n"
    )
