"""`locate` gives the ranges LibCST's PositionProvider gives over the whole module, and the statement and scope."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis.locate import locate
from code_nodes import code_nodes

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

# Decorators LibCST keeps on the statement: comment and blank lines before, between and after them,
# a decorator spanning lines and a parenthesized one (CPython's line for it is the inner name's).
DECORATED = (
    "#!/usr/bin/env python\n# header\n\nimport os\n\n\n# lead\n\n@first(\n    1)\n# between\n\n@ second\n"
    "@(\n  third)\n# after\n\ndef f(a,\n      b=out):\n    return a\n\n"
    "class C:\n    # lead\n    @property\n\n    async def g(self): return 1\n"
)
# `a; b` lines (one LibCST statement, two of CPython's), continuations, a statement opening with a bracket,
# one-line suites, comments before `elif`/`else`, and comment lines a block keeps below its last statement.
SIMPLE_LINES = (
    "a = 1; b = 2\nc = (3 +\n     4); d = 5\nx = \\\n    6\n(y\n ).z = 7\nif a: b; c\nelse: d\n"
    "if a:\n    pass\n# before elif\nelif b:\n    e = 1\n\n    # inside\nelif c: f = 2\nelse:\n    # c\n    g = 3\n"
    "class K:\n    def m(self):\n        pass\n        # kept by the block\n    # kept by the class\n\n# next\nh = 4\n"
    # A blank line joined to the next by a backslash: one of LibCST's empty lines, two lines.
    "def n():\n    i = 1\n    \\\n\n    j = 2\n\\\n\nk = 5\n"
)
# Every other body: except clauses, else, finally, match cases, loops' else, with, async statements.
BODIES = (
    "try:\n    a()\nexcept (E,\n        F) as e:\n    b()\nexcept G:\n    pass\nelse:\n    c()\nfinally:\n    d()\n"
    "match p:\n    case 1:\n        e()\n    case _:\n        f()\nfor i in x:\n    pass\nelse:\n    g()\n"
    "while y:\n    break\nelse:\n    h()\nwith a as b, c:\n    k()\n"
    "async def w():\n    async for q in r:\n        await s\n    async with t:\n        pass\n"
)
# CPython's columns count UTF-8 bytes, LibCST's characters; names and strings here are not ASCII.
NON_ASCII = "s = 'é😀'; t = f(\"ü\", x)\nclass Ä:\n    ü = 'ß'  # ö\n    def m(self): return 'é' + self.ü\n"
# A skeleton (`kvlint.running.fragment`): bodies blanked line for line, headers kept.
SKELETON = "class A:\n\n\n\n    def f(self):\n        pass\n\n\n\n    def g(self):\n        return out_cache_loc[0]\n\n\n"
SHAPES = {
    "crlf-tabs-elif": TRICKY,
    "nested-scopes": NESTED,
    "decorators": DECORATED,
    "simple-lines": SIMPLE_LINES,
    "bodies": BODIES,
    "non-ascii": NON_ASCII,
    "skeleton": SKELETON,
}


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    return code_nodes(module)[1:]


@pytest.mark.parametrize("source", SHAPES.values(), ids=SHAPES.keys())
def test_each_node_alone_has_the_whole_module_range(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node in _nodes(module):
        assert locate(module, [node], ast.parse(source))[id(node)].range == expected[node], cst.Module([]).code_for_node(node)


@pytest.mark.parametrize("source", SHAPES.values(), ids=SHAPES.keys())
def test_all_nodes_at_once_have_the_whole_module_range(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _nodes(module)
    located = locate(module, nodes, ast.parse(source))
    assert [located[id(node)].range for node in nodes] == [expected[node] for node in nodes]


def _find(module: cst.Module, code: str) -> cst.CSTNode:
    """The node whose code (generated out of its block: continuation lines lose the block's indent) is `code`."""
    return next(node for node in _nodes(module) if cst.Module([]).code_for_node(node) == code)


def test_statement_line_and_scope() -> None:
    module = cst.parse_module(NESTED)
    call = _find(module, "h(1,\n    2)")
    default = _find(module, "r")
    in_elif = _find(module, "u")
    located = locate(module, [call, default, in_elif], ast.parse(NESTED))
    # `def g(self): return h(...)`: the body is no statement line of its own, so the def line counts.
    assert (located[id(call)].statement_line, located[id(call)].scope) == (9, "B.g")
    # The test of an `elif`: the elif line.
    assert (located[id(default)].statement_line, located[id(default)].scope) == (19, "B.k")
    assert (located[id(in_elif)].statement_line, located[id(in_elif)].range.start.line) == (20, 20)
