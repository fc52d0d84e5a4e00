"""A quick walk over a LibCST tree.

`CSTVisitor` and `CSTNode.children` rebuild each node's child list through the
visitor machinery; reading the dataclass fields directly, and skipping the
whitespace and punctuation fields that never hold code, is several times
cheaper. The walks that visit whole modules use it: the module index
(`kvlint.analysis.index`), locating flagged nodes (`kvlint.analysis.locate`) and KV301's scan
(`kvlint.rules.tbo._walk`). Smaller, targeted reads still use LibCST's own
machinery where it is clearer: the data flow's expression walker is a
`CSTVisitor` (`kvlint.analysis.dataflow`). No rule imports `libcst.matchers`: that
module alone takes half a second to import, on every run that checks a file.
"""

from __future__ import annotations

import re

import libcst as cst

_NOT_CODE = re.compile(
    r"whitespace|^(lpar|rpar|lbracket|rbracket|lbrace|rbrace|leading_lines|lines_after_decorators"
    r"|header|footer|comma|semicolon|colon|equal|dot|operator|asynchronous)$"
)


_CODE_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE_TYPE: dict[type, bool] = {}


def _code_fields(node_type: type) -> tuple[str, ...]:
    found = _CODE_FIELDS.get(node_type)
    if found is None:
        names: dict[str, object] = getattr(node_type, "__dataclass_fields__")
        found = _CODE_FIELDS[node_type] = tuple(name for name in names if not _NOT_CODE.search(name))
    return found


def _is_node_type(value_type: type) -> bool:
    # CSTNode is an ABC: an isinstance check per field value is the walk's main cost.
    found = _IS_NODE_TYPE.get(value_type)
    if found is None:
        found = _IS_NODE_TYPE[value_type] = issubclass(value_type, cst.CSTNode)
    return found


def code_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of `node` that hold code, in source order."""
    children: list[cst.CSTNode] = []
    for name in _code_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            children.extend(item for item in value if _is_node_type(type(item)))
        elif _is_node_type(value_type):
            children.append(value)
    return children
