"""KV301's `LineFinder` gives a node's span as LibCST's PositionProvider would, without generating the module.

Where each top-level statement starts comes from CPython's tree; the shapes
below are those where LibCST's idea of a statement's first line differs from
CPython's (leading comments, decorators) or lines are counted differently
(CRLF, tabs, continuations, `a; b`), and a skeleton read with its whole
file's tree. Every node spanned has text of its own, so its first occurrence
is the node itself.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis.walk import code_children
from kvlint.rules.tbo._facts import Span
from kvlint.rules.tbo._lines import LineFinder
from kvlint.running.fragment import skeleton

DATACLASS = (
    "#!/usr/bin/env python\n# header\n\nimport dataclasses\nx = 1; y = (2,\n  3)\nz = \\\n    4\n\n"
    "# the batch\n\n@dataclasses.dataclass(\n    frozen=False)\n# between\nclass Batch:\n    '''doc'''\n"
    "    # a comment\n    seq_lens: Optional[torch.Tensor] = None\n    positions: torch.Tensor = field(\n"
    "        default=None)\n    é_count: int = 0  # ü\n\n\ndef build(batch: Batch):\n    if batch:\n        pass\n"
    "    # before elif\n    elif other:\n        batch.out_cache_loc = make(\n            1)\n"
    "    setattr(batch, 'extend_lens', lengths)\n    return Batch(spec_info=info, top_k=\n        k)\n"
)
CRLF_TABS = DATACLASS.replace("\n", "\r\n").replace("    ", "\t")
# No newline at the end, and comment lines after the last statement (the module's footer).
FOOTER = "class Batch:\n    a: int\n\ndef f(batch: Batch):\n    batch.a = 1\n# trailing\n# comment"
# A field's code inside a longer field's line: `len: int = 1` in `max_len: int = 10`.
NAME_INSIDE_NAME = "class Batch:\n    max_len: int = 10\n    len: int = 1\n\ndef f(batch: Batch):\n    batch.max_len = 1\n    batch.len = 1\n"
SOURCES = {"dataclass": DATACLASS, "crlf-tabs": CRLF_TABS, "footer": FOOTER, "name-inside-name": NAME_INSIDE_NAME}
# A file KV301 reads as a skeleton: only the functions naming the batch class stay whole.
CUT_FILE = (
    "import torch\n\n\nclass Runner:\n    size = 4\n\n    def idle(self):\n        return 1\n\n"
    "    # the split\n    @torch.no_grad()\n    def split(self, batch: Batch):\n        batch.top_k = pick(\n"
    "            2)\n\n    def after(self):\n        x = 2\n        return x\n\n\n"
    + "".join(f"def filler_{i}(a):\n    return a * {i}\n\n\n" for i in range(8))
    + "# last\ndef build(batch: Batch):\n    return Batch(spec_info=info)\n"
)
# What KV301 spans: a field, an assignment statement, a keyword argument, a `setattr` call.
_SPANNED = (cst.AnnAssign, cst.Assign, cst.Arg, cst.Call)


def _spanned(top: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack = [top]
    while stack:
        node = stack.pop()
        if isinstance(node, _SPANNED):
            found.append(node)
        stack.extend(code_children(node))
    return found


@pytest.mark.parametrize("given_tree", [True, False], ids=["tree-given", "tree-parsed"])
@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_spans_are_the_position_providers(source: str, given_tree: bool) -> None:
    module = cst.parse_module(source)
    tree: Optional[ast.Module] = ast.parse(source) if given_tree else None
    finder = LineFinder(module, source, tree)
    _assert_spans_are_the_position_providers(module, finder)


def test_a_skeletons_spans_come_from_the_whole_files_tree() -> None:
    data = CUT_FILE.encode()
    file_tree = ast.parse(data)
    cut = skeleton(data, file_tree, [((b"Batch",),)])
    assert cut is not None and b"return a * 3" not in cut and b"batch.top_k" in cut
    source = cut.decode()
    module = cst.parse_module(source)
    _assert_spans_are_the_position_providers(module, LineFinder(module, source, file_tree))


def _assert_spans_are_the_position_providers(module: cst.Module, finder: LineFinder) -> None:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    spanned = [(top, node) for top in module.body for node in _spanned(top)]
    assert spanned
    for top, node in spanned:
        span = finder.span(node, top)
        where = expected[node]
        if isinstance(node, cst.AnnAssign):
            # A field: KV301 reports its whole span.
            assert span == Span(
                where.start.line, where.start.column + 1, where.end.line, where.end.column + 1
            ), module.code_for_node(node)
        else:
            # An assignment: KV301 reports where it starts (its code may run on over a `;` or a comma).
            assert (span.line, span.column) == (where.start.line, where.start.column + 1), module.code_for_node(node)
