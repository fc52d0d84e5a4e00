"""KV301: which nodes of a function may not run whenever the function does.

A never-None write makes *every* split raise only if it runs on every path
to the split. Its own function's code is read for that: a node is
conditional under a branch (`if`, `match`, a conditional expression, the
right side of `and`/`or`), in a loop's body, an exception handler or `else`,
a comprehension's element, a nested function or lambda, and below a
statement that may return early. A `raise` on the way does not make what
follows conditional: that path splits nothing. A try's body and `finally`,
a `with`'s body and a loop's first test are not conditional either.
"""

from __future__ import annotations

import ast

from kvlint.analysis.ast_walk import Function, own_nodes, SCOPES


def conditional_nodes(function: Function) -> set[int]:
    """The ids of the function's own nodes (nested scopes' included) that are conditional."""
    found: set[int] = set()
    _block(function.body, found, conditional=False)
    return found


def _block(statements: list[ast.stmt], found: set[int], conditional: bool) -> None:
    for statement in statements:
        _statement(statement, found, conditional)
        if not conditional and _may_return(statement):
            conditional = True


def _statement(statement: ast.stmt, found: set[int], conditional: bool) -> None:
    if conditional or isinstance(statement, SCOPES):
        _mark(statement, found)
        return
    if isinstance(statement, ast.If):
        _expression(statement.test, found)
        _block(statement.body, found, True)
        _block(statement.orelse, found, True)
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        _expression(statement.iter, found)
        _mark(statement.target, found)
        _block(statement.body, found, True)
        _block(statement.orelse, found, True)
    elif isinstance(statement, ast.While):
        _expression(statement.test, found)
        _block(statement.body, found, True)
        _block(statement.orelse, found, True)
    elif isinstance(statement, (ast.Try, ast.TryStar)):
        _block(statement.body, found, False)
        for handler in statement.handlers:
            _mark(handler, found)
        _block(statement.orelse, found, True)
        _block(statement.finalbody, found, False)
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        for item in statement.items:
            _expression(item.context_expr, found)
        _block(statement.body, found, False)
    elif isinstance(statement, ast.Match):
        _expression(statement.subject, found)
        for case in statement.cases:
            _mark(case, found)
    else:
        _expression(statement, found)


def _expression(root: ast.AST, found: set[int]) -> None:
    """The conditional parts of a simple statement or expression."""
    for node in own_nodes(root):
        if node is not root and isinstance(node, SCOPES):
            _mark(node, found)
        elif isinstance(node, ast.IfExp):
            _mark(node.body, found)
            _mark(node.orelse, found)
        elif isinstance(node, ast.BoolOp):
            for value in node.values[1:]:
                _mark(value, found)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            # Only the first iterable surely runs.
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for index, generator in enumerate(node.generators):
                parts.extend((generator.target, *generator.ifs, *([generator.iter] if index else [])))
            for part in parts:
                _mark(part, found)


def _mark(root: ast.AST, found: set[int]) -> None:
    """`root` and everything under it, nested scopes included."""
    stack = [root]
    while stack:
        node = stack.pop()
        found.add(id(node))
        stack.extend(ast.iter_child_nodes(node))


def _may_return(statement: ast.stmt) -> bool:
    """A compound statement holding a `return` of its function: what follows may not run."""
    if isinstance(statement, (ast.Return, *SCOPES)):
        return isinstance(statement, ast.Return)
    return any(isinstance(node, ast.Return) for node in own_nodes(statement))
