"""A CPython `ast` node's children, stacked for a depth-first walk without the generic generators.

`ast.iter_child_nodes` runs two generators per node (`iter_fields`, then its own) and
yields every expression context and operator as a child: over the project index's
summaries of sglang/srt that was most of their cost. Here each node type's child
fields are looked up once, and the leaves no walk of the index reads (contexts,
operators, constants) are never stacked.
"""

from __future__ import annotations

import ast

# Leaves the index's walks read nothing of: constants, `Load`/`Store`, `Add`, `And`, `Not`, `Eq`, ...
_UNREAD = (ast.Constant, ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)

_child_fields: dict[type, tuple[str, ...]] = {}


def push_children(node: ast.AST, stack: list[ast.AST]) -> None:
    """Push `node`'s children onto `stack` in `ast.iter_child_nodes` order, leaves left out, so
    that popping visits them as a walk over `iter_child_nodes` would."""
    kind = type(node)
    fields = _child_fields.get(kind)
    if fields is None:
        fields = _child_fields[kind] = tuple(name for name in kind._fields if name not in ("ctx", "op"))
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            stack.extend(item for item in value if isinstance(item, ast.AST) and not isinstance(item, _UNREAD))
        elif isinstance(value, ast.AST) and not isinstance(value, _UNREAD):
            stack.append(value)
