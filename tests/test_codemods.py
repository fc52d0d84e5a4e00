"""The `codemods/` commands apply what `kvlint fix` would, under the same configuration."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from codemods.wrap_write_loc import WrapWriteLocCommand

BARE = (
    "from runtime_shim import KVWriteLoc\n\n"
    "def forward(pool, layer, fb, k, v):\n"
    "    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
)
WRAPPED = BARE.replace("fb.out_cache_loc, k", "KVWriteLoc.for_batch(fb), k")


def run_command(directory: Path, name: str = "backend.py") -> str:
    context = CodemodContext(filename=str(directory / name))
    return WrapWriteLocCommand(context).transform_module(cst.parse_module(BARE)).code


def configure(directory: Path, text: str) -> None:
    (directory / "kvlint.toml").write_text(text + '[contract]\nwrite-loc-module = "runtime_shim"\n')


def test_the_command_applies_its_rewrite(in_tmp: Path) -> None:
    configure(in_tmp, "")
    assert run_command(in_tmp) == WRAPPED


@pytest.mark.parametrize(
    "config",
    ['ignore = ["KV101"]\n', 'ignore = ["KV1"]\n', 'select = ["KV2"]\n'],
    ids=["ignored-code", "ignored-family", "not-selected"],
)
def test_the_command_honours_select_and_ignore(in_tmp: Path, config: str) -> None:
    configure(in_tmp, config)
    assert run_command(in_tmp) == BARE


def test_the_command_honours_per_file_ignores(in_tmp: Path) -> None:
    configure(in_tmp, '[per-file-ignores]\n"legacy/*" = ["KV101"]\n\n')
    (in_tmp / "legacy").mkdir()
    assert run_command(in_tmp, "legacy/backend.py") == BARE
    assert run_command(in_tmp, "backend.py") == WRAPPED


def test_nothing_in_kvlint_imports_codemods() -> None:
    package = Path(__file__).resolve().parent.parent / "kvlint"
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("codemods"), path
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("codemods") for alias in node.names), path
