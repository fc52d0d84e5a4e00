"""Which fields of a CPython `ast` node hold its children, for a depth-first walk without the
generic generators.

`ast.iter_child_nodes` runs two generators per node (`iter_fields`, then its own) and tests
every field value: over the project index's summaries of sglang/srt that was most of their
cost. A walk instead looks a node type's child fields up once (`CHILD_FIELDS`), stacks every
field value as it is (a list's items, in order, as `iter_child_nodes` yields them) and drops
what it pops that has none (`()`): identifiers, `None`, constants, contexts, operators.
"""

from __future__ import annotations

import ast

# Leaves the index's walks read nothing of: constants, `Load`/`Store`, `Add`, `And`, `Not`, `Eq`, ...
_UNREAD = (ast.Constant, ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)

# Fields that never hold a child a walk reads: identifiers, numbers, type comments, contexts,
# operators, and an import's `alias` nodes.
_NOT_CHILDREN = frozenset({
    "ctx", "op", "ops", "id", "attr", "arg", "name", "names", "asname", "module", "level", "type_comment",
    "conversion", "is_async", "simple", "kind", "rest", "kwd_attrs",
})

# Node type -> the fields that may hold children; () for anything whose children no walk reads.
CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """`kind`'s child fields, remembered in `CHILD_FIELDS`."""
    fields = CHILD_FIELDS.get(kind)
    if fields is None:
        fields = ()
        if issubclass(kind, ast.AST) and not issubclass(kind, _UNREAD):
            fields = tuple(name for name in kind._fields if name not in _NOT_CHILDREN)
        CHILD_FIELDS[kind] = fields
    return fields
