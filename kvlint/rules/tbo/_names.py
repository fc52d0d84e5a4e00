"""KV301: what an expression of CPython's tree names, and what a module imports."""

from __future__ import annotations

import ast
from typing import Optional


def trailing_name(expr: Optional[ast.expr], through_subscript: bool = True) -> Optional[str]:
    """`name` for a Name, the last attribute for `a.b.name`, the origin of `C[int]`; otherwise None."""
    if through_subscript and isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def is_none(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def string_value(node: Optional[ast.expr]) -> Optional[str]:
    """The text of a string literal (adjacent literals joined); None for anything else, f-strings included."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def top_level_imports(tree: ast.Module) -> dict[str, str]:
    """local name -> `pkg.mod.Name` (`.mod.Name` relative) for the module-level `from` imports,
    including those in the body of a top-level `if` or `try`."""
    imports: dict[str, str] = {}
    statements = list(tree.body)
    while statements:
        statement = statements.pop(0)
        if isinstance(statement, (ast.If, ast.Try)):
            statements[0:0] = statement.body
        elif isinstance(statement, ast.ImportFrom) and statement.module is not None:
            base = "." * statement.level + statement.module
            for alias in statement.names:
                if alias.name != "*":
                    imports[alias.asname or alias.name] = f"{base}.{alias.name}"
    return imports
