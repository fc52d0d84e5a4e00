"""Every node of a LibCST tree that holds code, as kvlint's own walks see them."""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.walk import code_children


def code_nodes(module: cst.Module) -> list[cst.CSTNode]:
    """`module` and every node below it that holds code, parents before their children."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(code_children(node))
    return found
