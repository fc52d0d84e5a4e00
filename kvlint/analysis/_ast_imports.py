"""Small readers of CPython's `ast` for the project index: imports and the names a statement binds."""

from __future__ import annotations

import ast


def module_imports(body: list[ast.stmt], found: list[ast.stmt]) -> None:
    """Module-level imports, including those inside `if`/`try` blocks."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try)):
            module_imports(node.body, found)
            module_imports(node.orelse, found)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    module_imports(handler.body, found)


def imports_of(nodes: list[ast.stmt], module: str, is_package: bool) -> dict[str, str]:
    """local name -> absolute dotted origin, relative imports resolved against `module`."""
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:
                    found[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return found


def bound_names(node: ast.AST) -> list[str]:
    targets: list[ast.AST] = []
    if isinstance(node, ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    return [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]
