"""Add the imports fixes need with LibCST's `AddImportsVisitor`, without walking the whole module.

`AddImportsVisitor` reads and edits only the head of a module: its first
statement (a docstring or `__strict__` keeps the imports below it), the
import lines that follow, and the leading lines of the first statement after
them (it makes sure a blank line separates that statement from the imports);
the new import lines go in between. Yet a transform copies and walks every
node: about six seconds for a 5,000-line backend. So it runs on the head
alone, where each compound statement (a class, a function: never an import, a
docstring or `__strict__`) is stood in for by a `pass` line with its leading
lines, and the rest of the body is put back untouched.
"""

from __future__ import annotations

from typing import Sequence, Union

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

_Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def add_imports(module: cst.Module, needed: Sequence[tuple[str, str]], filename: str = "") -> cst.Module:
    """`module` importing each (module, name) of `needed`, exactly as `AddImportsVisitor` adds them."""
    if not needed:
        return module
    # A context of our own: a caller's codemod context would run the import visitor a second time.
    context = CodemodContext(filename=filename or None)
    for module_name, name in needed:
        AddImportsVisitor.add_needed_import(context, module_name, name)
    body = list(module.body)
    head = body[: _head_end(body)]
    stood_in = [i for i, statement in enumerate(head) if isinstance(statement, cst.BaseCompoundStatement)]
    for i in stood_in:
        head[i] = cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=head[i].leading_lines)
    added = AddImportsVisitor(context).transform_module(module.with_changes(body=head))
    new_head = list(added.body)
    # New lines go before the first statement that is not an import, so a compound statement keeps
    # its place counted from the end of the head.
    shift = len(new_head) - len(head)
    for i in stood_in:
        new_head[i + shift] = body[i].with_changes(leading_lines=new_head[i + shift].leading_lines)
    return added.with_changes(body=[*new_head, *body[len(head):]])


def _head_end(body: list[_Statement]) -> int:
    """How many statements the visitor may read or edit: the first, the import lines after it,
    and the first statement after those."""
    end = 1
    while end < len(body) and _is_import_line(body[end]):
        end += 1
    return min(end + 1, len(body))


def _is_import_line(statement: _Statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )
