"""A quick walk over a LibCST tree for KV301's scan of many files.

KV301 reads every file that names the batch class (hundreds in SGLang), so
its walk must cost little next to the parse (see `kvlint.analysis.walk`).
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from kvlint.analysis.walk import code_children

SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def own_nodes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and its code nodes in source order, yielding nested defs, classes and
    lambdas but not descending into them."""
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, SCOPES):
            continue
        stack.extend(reversed(code_children(node)))
