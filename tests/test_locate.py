"""`locate` gives the ranges LibCST's PositionProvider gives over the whole module, and the statement and scope."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis.locate import locate
from kvlint.analysis.walk import code_children

# Tabs, CRLF, a lone CR, an elif (generated with its own keyword), decorators spanning lines,
# a multi-line call inside nested blocks, a one-line body, and no newline at the end.
TRICKY = (
    "import os\r\n\r\nclass A:\r\n\tx = 1\r\n\r\n\t@dec(\r\n\t\tfoo)\r\n\tdef f(self, a=out_cache_loc):\r\n"
    "\t\tif a:\r\n\t\t\treturn (1,\r\n  2)\r\n\t\telif b:\r\n\t\t\tpass\r\n\t\telse:\r\n\t\t\ttry:\r\n"
    "\t\t\t\tz = [\r\n\t\t\t\t  q for q in y]\r\n\t\t\texcept E as e:\r\n\t\t\t\tpass\r\n"
    "x = 1; y = 2\rz=3\nif True: w = 4"
)
NESTED = (
    "def f():\n    return 1\n\n\n# comment\n@d\nclass B:  # c\n    '''doc'''\n"
    "    def g(self): return h(1,\n        2)\n    async def k(self):\n        async with a as b:\n"
    "            await c(d)\n        match x:\n            case [1, 2]:\n                y = lambda: (yield)\n"
    "        if p:\n            pass\n        elif q(r):\n            s.t = u\n"
)


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(code_children(node))
    return found[1:]


@pytest.mark.parametrize("source", [TRICKY, NESTED], ids=["crlf-tabs-elif", "nested-scopes"])
def test_each_node_alone_has_the_whole_module_range(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node in _nodes(module):
        assert locate(module, [node])[id(node)].range == expected[node], cst.Module([]).code_for_node(node)


@pytest.mark.parametrize("source", [TRICKY, NESTED], ids=["crlf-tabs-elif", "nested-scopes"])
def test_all_nodes_at_once_have_the_whole_module_range(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _nodes(module)
    located = locate(module, nodes)
    assert [located[id(node)].range for node in nodes] == [expected[node] for node in nodes]


def _find(module: cst.Module, code: str) -> cst.CSTNode:
    """The node whose code (generated out of its block: continuation lines lose the block's indent) is `code`."""
    return next(node for node in _nodes(module) if cst.Module([]).code_for_node(node) == code)


def test_statement_line_and_scope() -> None:
    module = cst.parse_module(NESTED)
    call = _find(module, "h(1,\n    2)")
    default = _find(module, "r")
    in_elif = _find(module, "u")
    located = locate(module, [call, default, in_elif])
    # `def g(self): return h(...)`: the body is no statement line of its own, so the def line counts.
    assert (located[id(call)].statement_line, located[id(call)].scope) == (9, "B.g")
    # The test of an `elif`: the elif line.
    assert (located[id(default)].statement_line, located[id(default)].scope) == (19, "B.k")
    assert (located[id(in_elif)].statement_line, located[id(in_elif)].range.start.line) == (20, 20)
