"""A quick walk over a LibCST tree.

`CSTVisitor` and `CSTNode.children` rebuild each node's child list through the
visitor machinery; reading the dataclass fields directly, and skipping the
whitespace and punctuation fields that never hold code, is several times
cheaper. The walks that visit whole modules use it: the module index
(`kvlint.analysis.index`), locating flagged nodes (`kvlint.analysis.locate`),
the data flow's expression walker (`kvlint.analysis._flow_expressions`) and
the fixer's search for its targets (`kvlint.fix.apply`). No rule imports
`libcst.matchers`: that module alone takes half a second to import, on every
run that checks a file.
"""

from __future__ import annotations

import dataclasses
import re
from operator import attrgetter
from typing import Callable

import libcst as cst

_NOT_CODE = re.compile(
    r"whitespace|^(lpar|rpar|lbracket|rbracket|lbrace|rbrace|leading_lines|lines_after_decorators"
    r"|header|footer|comma|semicolon|colon|equal|dot|operator|asynchronous)$"
)

# What a field's value is, by its exact type: a node, a sequence (LibCST's
# sequence fields hold nodes only, by their annotations), or neither (None, a
# string, `MaybeSentinel`).
_NODE, _SEQUENCE, _NEITHER = 1, 2, 3

_CODE_VALUES: dict[type, Callable[[cst.CSTNode], tuple[object, ...]]] = {}
_KIND: dict[type, int] = {tuple: _SEQUENCE, list: _SEQUENCE}


def _code_values(node_type: type) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    """A function reading the code-holding fields of a `node_type` node, in field order."""
    # `dataclasses.fields`, not `__dataclass_fields__`: the latter lists the `__slots__` class variable too.
    names = tuple(field.name for field in dataclasses.fields(node_type) if not _NOT_CODE.search(field.name))
    if not names:
        read: Callable[[cst.CSTNode], tuple[object, ...]] = lambda node: ()
    elif len(names) == 1:
        one = attrgetter(names[0])
        read = lambda node: (one(node),)
    else:
        read = attrgetter(*names)
    _CODE_VALUES[node_type] = read
    return read


def _kind(value_type: type) -> int:
    # By the class's own bases: CSTNode is an ABC, whose `issubclass` answers "no" (a string, None)
    # only after asking each of LibCST's 345 node classes in turn, on a worker's first file.
    found = _KIND[value_type] = _NODE if cst.CSTNode in value_type.__mro__ else _NEITHER
    return found


def code_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of `node` that hold code, in field order (lexical order but for a few nodes,
    such as a keyword argument's keyword after its value)."""
    read = _CODE_VALUES.get(type(node)) or _code_values(type(node))
    children: list[cst.CSTNode] = []
    for value in read(node):
        kind = _KIND.get(type(value)) or _kind(type(value))
        if kind == _NODE:
            children.append(value)  # type: ignore[arg-type]
        elif kind == _SEQUENCE:
            children.extend(value)  # type: ignore[arg-type]
    return children
