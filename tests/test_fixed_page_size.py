"""KV201 where the module fixes the page size above 1: `.view` and the paged helpers return the same
strides there (only page size 1 differs), so the message says what the rewrite buys instead of the
page-size-1 hazard, which cannot happen at that site."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.running.engine import RunOptions, run

BACKEND = (
    "PAGE_SIZE = 64\n\n\n"
    "def decode(pool, layer, page_size):\n"
    "    ps = PAGE_SIZE\n"
    "    fixed = pool.get_key_buffer(layer.layer_id).view(-1, ps, 576)\n"
    "    named = pool.get_key_buffer(layer.layer_id).view(-1, page_size, 576)\n"
    "    return fixed, named\n"
)


def messages(root: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> dict[int, str]:
    (root / "backend.py").write_text(text)
    monkeypatch.chdir(root)
    findings = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings
    return {finding.line: finding.message for finding in findings if finding.code == "KV201"}


def test_a_module_constant_page_size_above_one_is_named_and_the_page_size_one_clause_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = messages(tmp_path, monkeypatch, BACKEND)
    assert "page size is fixed at 64 here, where the helpers return these very strides" in found[6]
    assert "at page size 1" not in found[6]
    # A page size the caller chooses may be 1.
    assert "at page size 1 the page dim gets the row stride" in found[7]


@pytest.mark.parametrize("constant", ["PAGE_SIZE = 1\n", "PAGE_SIZE = 64\nPAGE_SIZE = 1\n",
                                      "PAGE_SIZE = 64\n\n\ndef set_size():\n    global PAGE_SIZE\n    PAGE_SIZE = 1\n"])
def test_a_page_size_that_is_one_or_may_change_keeps_the_page_size_one_hazard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, constant: str
) -> None:
    found = messages(tmp_path, monkeypatch, BACKEND.replace("PAGE_SIZE = 64\n", constant, 1))
    assert len(found) == 2
    assert all("at page size 1 the page dim gets the row stride" in message for message in found.values())
