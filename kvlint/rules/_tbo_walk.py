"""A quick walk over a LibCST tree for KV301's scan of many files.

KV301 reads every file that names the batch class (hundreds in SGLang), so
its walk must cost little next to the parse. `CSTNode.children` and
`CSTVisitor` rebuild each node's child list through the visitor machinery;
reading the dataclass fields directly, and skipping the whitespace and
punctuation fields that never hold code, is several times cheaper.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator

import libcst as cst

_NOT_CODE = re.compile(
    r"whitespace|^(lpar|rpar|lbracket|rbracket|lbrace|rbrace|leading_lines|lines_after_decorators"
    r"|header|footer|comma|semicolon|colon|equal|dot|operator|asynchronous)$"
)
SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


@lru_cache(maxsize=None)
def _code_fields(node_type: type) -> tuple[str, ...]:
    return tuple(name for name in node_type.__dataclass_fields__ if not _NOT_CODE.search(name))


def own_nodes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and its code nodes in source order, yielding nested defs, classes and
    lambdas but not descending into them."""
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, SCOPES):
            continue
        children: list[cst.CSTNode] = []
        for name in _code_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                children.append(value)
            elif isinstance(value, (tuple, list)):
                children.extend(item for item in value if isinstance(item, cst.CSTNode))
        stack.extend(reversed(children))
