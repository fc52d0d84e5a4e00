"""The language server's workspace re-checks only the function an edit changed, and still reports
exactly what `kvlint check` reports for the edited text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.live.workspace import FileCheck, Workspace

CONFIG = '[contract]\nwrite-loc-module = "runtime_shim"\npaged-helpers-module = "runtime_shim.paged"\n'
BACKEND = (
    "import torch\n"
    "\n\n"
    "class Backend:\n"
    "    def write(self, pool, layer, fb, k, v):\n"
    "        pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
    "\n"
    "    def decode(self, pool, layer):\n"
    "        k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
    "        k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"
    "        return k_cache\n"
    "\n\n"
    "def store(pool, layer, fb, k, v):\n"
    "    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
)


def as_reported(findings: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (f["code"], f["line"], f["column"], f["end_line"], f["end_column"], f["message"], f["fingerprint"]) for f in findings
    )


def as_checked(checked: FileCheck) -> list[tuple[Any, ...]]:
    return sorted((f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.fingerprint) for f in checked.findings)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "kvlint.toml").write_text(CONFIG)
    (tmp_path / "backend.py").write_text(BACKEND)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def kvlint_check(root: Path, text: str) -> list[tuple[Any, ...]]:
    """What `kvlint check` reports for backend.py holding `text`."""
    (root / "backend.py").write_text(text)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json"])
    return as_reported([f for f in json.loads(result.stdout)["findings"] if f["path"] == "backend.py"])


def test_an_edit_in_one_function_rechecks_it_alone_and_moves_the_findings_below(tree: Path) -> None:
    workspace = Workspace(tree)
    first = workspace.check("backend.py", BACKEND.encode())
    assert first.how == "whole"
    assert {f.code for f in first.findings} == {"KV101", "KV201"}

    grown = BACKEND.replace(
        "        pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n",
        "        n = len(k)\n        assert n\n        pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n",
    )
    edited = workspace.check("backend.py", grown.encode())
    assert edited.how == "function"
    # The KV201 in `decode` and the KV101 in `store` moved two lines down with their functions.
    assert as_checked(edited) == kvlint_check(tree, grown)
    assert [f.line - 2 for f in edited.findings if f.code == "KV201"] == [f.line for f in first.findings if f.code == "KV201"]

    fixed = grown.replace("        assert n\n        pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n", "        assert n\n")
    edited = workspace.check("backend.py", fixed.encode())
    assert edited.how == "function"
    assert as_checked(edited) == kvlint_check(tree, fixed)


def test_comments_between_functions_recheck_nothing_and_a_header_edit_rechecks_the_file(tree: Path) -> None:
    workspace = Workspace(tree)
    workspace.check("backend.py", BACKEND.encode())
    commented = BACKEND.replace("\n\ndef store", "\n# the module-level door\n\ndef store")
    edited = workspace.check("backend.py", commented.encode())
    assert edited.how == "kept"
    assert as_checked(edited) == kvlint_check(tree, commented)

    renamed = commented.replace("def decode(self, pool, layer):", "def decode(self, pool, layer, extra=None):")
    edited = workspace.check("backend.py", renamed.encode())
    assert edited.how == "whole"
    assert as_checked(edited) == kvlint_check(tree, renamed)


def test_a_function_sharing_its_name_with_another_is_checked_with_the_whole_file(tree: Path) -> None:
    twice = BACKEND + "\n\nclass store:\n    def more(self):\n        return 1\n"
    workspace = Workspace(tree)
    workspace.check("backend.py", twice.encode())
    grown = twice.replace("def store(pool, layer, fb, k, v):\n", "def store(pool, layer, fb, k, v):\n    k = k\n")
    edited = workspace.check("backend.py", grown.encode())
    assert edited.how == "whole"
    assert as_checked(edited) == kvlint_check(tree, grown)


def test_a_file_kvlint_check_has_seen_is_answered_from_its_result_cache_and_edited_from_there(tree: Path) -> None:
    CliRunner().invoke(main, ["check"])  # fills the result cache at the root
    workspace = Workspace(tree)
    assert workspace.views is not None and not workspace.unread_facts
    opened = workspace.check("backend.py", BACKEND.encode())
    assert opened.how == "cached"
    assert as_checked(opened) == kvlint_check(tree, BACKEND)

    grown = BACKEND.replace("        return k_cache\n", "        k_cache = k_cache\n        return k_cache\n")
    edited = workspace.check("backend.py", grown.encode())
    assert edited.how == "function"
    assert as_checked(edited) == kvlint_check(tree, grown)
