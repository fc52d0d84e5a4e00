"""A quick walk over CPython's tree, in source order, for rules that read it.

KV301 reads every file that names the batch class (hundreds in SGLang), and
the layout rules test every file they might flag before LibCST parses it
(`kvlint.rules.layout._candidates`), so both read CPython's tree, which the
checker already has for its pre-parse, and walk it without `ast.walk`'s
generic generators: children come from each node type's code fields, looked
up once per type. (The project index has its own walk, pruned to what its
summaries read: `kvlint.analysis._ast_children`.)
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional, Union

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
SCOPES = (*FUNCTIONS, ast.ClassDef, ast.Lambda)
# Fields that never hold code KV301 reads.
_NOT_CODE = frozenset({"ctx", "op", "ops", "type_comment", "type_ignores"})
# Where `_fields` is not in source order: decorators stand above their definition, and a
# conditional expression reads `body if test else orelse`. Whether a write runs before the
# split is decided by the order of the nodes in one function.
_CODE_FIELDS: dict[type, tuple[str, ...]] = {
    ast.FunctionDef: ("decorator_list", "args", "returns", "body"),
    ast.AsyncFunctionDef: ("decorator_list", "args", "returns", "body"),
    ast.ClassDef: ("decorator_list", "bases", "keywords", "body"),
    ast.IfExp: ("body", "test", "orelse"),
}


def children(node: ast.AST) -> list[ast.AST]:
    """The node's code children in source order."""
    if isinstance(node, ast.Dict):
        # Keys and values alternate in the source; a `**mapping` entry has no key.
        return [part for key, value in zip(node.keys, node.values) for part in (key, value) if part is not None]
    fields = _CODE_FIELDS.get(type(node))
    if fields is None:
        fields = _CODE_FIELDS[type(node)] = tuple(name for name in node._fields if name not in _NOT_CODE)
    found: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def own_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """`root` and its code nodes in source order, yielding nested defs, classes and
    lambdas but not descending into them."""
    stack: list[ast.AST] = [root]
    while stack:
        node = stack.pop()
        yield node
        if node is not root and isinstance(node, SCOPES):
            continue
        stack.extend(reversed(children(node)))


def code_units(data: bytes, tree: ast.Module) -> list[tuple[list[ast.AST], Optional[bytes]]]:
    """The units the rules' data flow stays inside, as (roots, text): each outermost function with
    the functions nested in it, and its source lines (from its first decorator); then the module-
    and class-level code (class headers, not their methods), whose text is None: it is spread over
    the file."""
    lines = data.splitlines(keepends=True)
    units: list[tuple[list[ast.AST], Optional[bytes]]] = []
    rest: list[ast.AST] = []
    statements: list[ast.AST] = list(tree.body)
    while statements:
        statement = statements.pop()
        if isinstance(statement, FUNCTIONS):
            first = min([statement.lineno, *(decorator.lineno for decorator in statement.decorator_list)])
            units.append(([statement], b"".join(lines[first - 1 : statement.end_lineno])))
        elif isinstance(statement, ast.ClassDef):
            rest.extend((*statement.decorator_list, *statement.bases, *statement.keywords))
            rest.extend(getattr(statement, "type_params", ()))
            statements.extend(statement.body)
        else:
            rest.append(statement)
    units.append((rest, None))
    return units


def line_span(node: ast.AST) -> Optional[tuple[int, int]]:
    """The first and last line of `node`, its decorators' included; None for a node without lines."""
    start: Optional[int] = getattr(node, "lineno", None)
    if start is None:
        return None
    end: int = getattr(node, "end_lineno", None) or start
    decorators: list[ast.expr] = getattr(node, "decorator_list", None) or []
    return min([start, *(decorator.lineno for decorator in decorators)]), end
