"""KV301 reads CPython's tree: its positions and quoted code are LibCST's, whose were reported before.

CPython places a node by UTF-8 byte offset and LibCST by character, and
LibCST keeps on a node what CPython leaves outside it (the parentheses around
a default, the comma and comment after a keyword argument). The shapes below
are those where the two could part: non-ASCII text, CRLF, tabs,
continuations, `a; b`, decorators with comments, a file without a final
newline.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Iterator

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis.walk import code_children
from kvlint.api.rule import one_line_code
from kvlint.rules.tbo._assignments import _argument_code
from kvlint.rules.tbo._source import SourceText

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
DEFAULTS = "class Batch:\n    a: int = (\n        1)\n    b: int = ((2))  # two\n    c: tuple = (3, 4)\n    d: str = 'é'\n"
ARGUMENTS = (
    "Batch(a=1 , b=2  # d\n)\nBatch(a=1, *r, b=2)\nBatch(\n    a=1,\n    b=2,  # c\n    )\n"
    "Batch(x, a=f(1, 2), **rest)\nBatch(é='ü', b=[\n  1])\n"
)
SOURCES.update({"defaults": DEFAULTS, "arguments": ARGUMENTS})


def _cst_nodes(module: cst.Module, kind: type) -> Iterator[cst.CSTNode]:
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            yield node
        stack.extend(code_children(node))


def _range(where: object) -> tuple[int, int, int, int]:
    start, end = where.start, where.end  # type: ignore[attr-defined]
    return (start.line, start.column + 1, end.line, end.column + 1)


@pytest.mark.parametrize("text", SOURCES.values(), ids=SOURCES.keys())
def test_positions_are_the_position_providers(text: str) -> None:
    """Fields are reported by their whole span; assignments, keyword arguments and calls by where they start."""
    module = cst.parse_module(text)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    tree, source = ast.parse(text), SourceText(text)
    ast_nodes = list(ast.walk(tree))

    def spans(kind: type) -> Counter:
        found = Counter()
        for node in ast_nodes:
            if isinstance(node, kind) and not (isinstance(node, ast.keyword) and node.arg is None):
                span = source.span(node)
                found[(span.line, span.column, span.end_line, span.end_column)] += 1
        return found

    fields = Counter(_range(positions[node]) for node in _cst_nodes(module, cst.AnnAssign))
    assert spans(ast.AnnAssign) == fields
    for ast_kind, cst_kind in ((ast.Assign, cst.Assign), (ast.keyword, cst.Arg), (ast.Call, cst.Call)):
        expected = Counter(
            _range(positions[node])[:2]
            for node in _cst_nodes(module, cst_kind)
            if not (isinstance(node, cst.Arg) and node.keyword is None)
        )
        assert Counter({start[:2]: n for start, n in spans(ast_kind).items()}) == expected, ast_kind.__name__


@pytest.mark.parametrize("text", SOURCES.values(), ids=SOURCES.keys())
def test_quoted_code_is_libcsts(text: str) -> None:
    """A default's code keeps its parentheses, a keyword argument's its comma and comment.

    Generated alone, LibCST's nested node loses its block's indentation on continuation
    lines: the two agree once quoted on one line, as messages quote them.
    """
    module = cst.parse_module(text)
    tree, source = ast.parse(text), SourceText(text)
    defaults = Counter(
        one_line_code(source.code_with_parentheses(node.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and node.value is not None
    )
    assert defaults == Counter(
        one_line_code(module.code_for_node(node.value)) for node in _cst_nodes(module, cst.AnnAssign) if node.value
    )
    arguments = Counter(
        one_line_code(_argument_code(source, call, keyword))
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for keyword in call.keywords
        if keyword.arg is not None
    )
    assert arguments == Counter(
        one_line_code(module.code_for_node(arg)) for arg in _cst_nodes(module, cst.Arg) if arg.keyword is not None
    )


def test_the_parentheses_taken_are_the_nodes_own() -> None:
    text = "class Batch:\n    a: int = f((1))\n    b: int = (\n  2  )\n"
    tree, source = ast.parse(text), SourceText(text)
    values = [node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)]
    assert [source.code_with_parentheses(value) for value in values] == ["f((1))", "(\n  2  )"]
