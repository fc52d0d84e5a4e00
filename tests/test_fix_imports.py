"""`kvlint.fix.imports.add_imports` gives exactly what LibCST's `AddImportsVisitor` gives over the
whole module, while walking only the module's head."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from kvlint.fix.imports import add_imports

ROOT = Path(__file__).resolve().parent.parent
NEEDS = [
    [("runtime_shim", "KVWriteLoc")],
    [("runtime_shim.paged", "paged_view"), ("runtime_shim", "KVWriteLoc")],
    [("os", "path"), ("__future__", "annotations")],
]
# Statements a module may start with, in any order: what the visitor reads or edits, and what it must not.
PIECES = [
    '"""A docstring."""\n',
    "__strict__ = True\n",
    "from __future__ import annotations\n",
    "import os\n",
    "import os.path as osp\n",
    "from runtime_shim import KVWriteLoc\n",
    "from runtime_shim.paged import paged_row_view\n",
    "from . import sibling\n",
    "import torch; x = 1\n",
    "# a comment\n",
    "\n",
    "x = 1\n",
    "if TYPE_CHECKING:\n    from os import sep\n",
    "# leading comment\nclass Backend:\n    def write(self, pool, loc):\n        from os import sep\n        pool.set_kv_buffer(loc)\n",
    "\n\ndef helper(a):\n    return a\n",
    "@decorator\nclass Pool:\n    pass\n",
    "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
]


def visited(module: cst.Module, needed: list[tuple[str, str]]) -> str:
    context = CodemodContext()
    for module_name, name in needed:
        AddImportsVisitor.add_needed_import(context, module_name, name)
    return AddImportsVisitor(context).transform_module(module).code


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=7), st.sampled_from(NEEDS), st.sampled_from(["\n", "\r\n"]))
def test_any_module_head_gets_the_imports_the_visitor_adds(pieces: list[str], needed: list[tuple[str, str]], newline: str) -> None:
    module = cst.parse_module("".join(pieces).replace("\n", newline))
    assert add_imports(module, needed).code == visited(module, needed)


@pytest.mark.parametrize("path", sorted([*(ROOT / "examples").rglob("*.py"), *(ROOT / "kvlint" / "fix").glob("*.py")]), ids=str)
def test_real_files_get_the_imports_the_visitor_adds(path: Path) -> None:
    module = cst.parse_module(path.read_bytes())
    for needed in NEEDS[:2]:
        assert add_imports(module, needed).code == visited(module, needed)


def test_nothing_needed_is_the_module_itself() -> None:
    module = cst.parse_module("class A:\n    pass\n")
    assert add_imports(module, []) is module
