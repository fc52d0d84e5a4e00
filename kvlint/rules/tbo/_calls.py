"""KV301: the calls through which a function hands a batch on.

Whether an assignment runs before or after the TBO split is decided on the
call graph these calls form (`_timing`). Only calls that pass a batch (as an
argument, or as the receiver of a method) are kept: the split, the model
forward and attention-metadata building all receive the batch they act on.
So are the calls of the batch class's own methods (`Batch.init_new(...)`),
which may pass none: a factory that splits the batch it builds splits it in
its caller, before whatever the caller does with it next. The callee is kept
as written; `_timing` resolves it across files.

A call that hands no batch the scan can see still runs when its caller does:
the model forward hands its batch on inside tuples (`self._core(*state)`) to
helpers that name no batch class. Such calls to the module's own functions
and methods (with arguments: one passing nothing hands nothing on), and
method calls on a parameter of such a helper, are kept as `placing` calls:
they only place what runs after the split (`placing_call`).
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from kvlint.rules.tbo._facts import Call, CallKind

SELF_NAMES = frozenset({"self", "cls"})


def batch_call(
    node: ast.Call, order: int, batches: frozenset[str], imports: dict[str, str], batch_class: str,
    conditional: Callable[[ast.AST], bool],
) -> Optional[Call]:
    """The call as KV301's call graph keeps it, or None when it hands no batch on; `conditional`
    tells whether a node of the function need not run whenever the function does."""
    func = node.func
    receiver = func.value if isinstance(func, ast.Attribute) else None
    factory = isinstance(func, ast.Attribute) and isinstance(receiver, ast.Name) and receiver.id == batch_class
    batch_args = _batch_args(node, batches) if batches else ()
    if not factory and not batch_args and not _is_batch(receiver, batches):
        return None
    return _kept(node, order, batch_args, batches, imports, conditional(node))


def placing_call(node: ast.Call, order: int, parameters: frozenset[str], local: frozenset[str]) -> Optional[Call]:
    """A call handing no batch on that may still run a write after the split: `self.m(...)` or `f(...)`
    naming one of the module's own functions and methods (`local`), or `p.m(...)` on one of
    `parameters` (which may hold the batch). Whether it always runs is left unread: only what runs
    surely before the split asks, and a placing call places nothing there."""
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in parameters:
        return Call(order, CallKind.DYNAMIC, func.attr, placing=True)
    if not (node.args or node.keywords):
        return None  # `self.m()` / `f()` hands nothing on
    if isinstance(func, ast.Name):
        kind, name = CallKind.NAME, func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in SELF_NAMES:
        kind, name = CallKind.SELF, func.attr
    else:
        return None
    return Call(order, kind, name, placing=True) if name in local else None


def _kept(
    node: ast.Call, order: int, batch_args: tuple[int | str, ...], batches: frozenset[str], imports: dict[str, str],
    conditional: bool,
) -> Optional[Call]:
    func = node.func
    receiver = func.value if isinstance(func, ast.Attribute) else None
    if isinstance(func, ast.Name):
        return Call(order, CallKind.NAME, func.id, origin=imports.get(func.id), batch_args=batch_args, conditional=conditional)
    if not isinstance(func, ast.Attribute):
        return None
    name = func.attr
    if isinstance(receiver, ast.Name) and receiver.id in SELF_NAMES:
        return Call(order, CallKind.SELF, name, batch_args=batch_args, conditional=conditional)
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
        return Call(order, CallKind.SELF, name, conditional=conditional)
    if isinstance(receiver, ast.Name) and receiver.id in batches:
        return Call(order, CallKind.BATCH, name, conditional=conditional)
    if isinstance(receiver, ast.Name) and receiver.id[:1].isupper():
        return Call(order, CallKind.OWNER, name, owner=receiver.id, origin=imports.get(receiver.id), conditional=conditional)
    return Call(order, CallKind.DYNAMIC, name, batch_args=batch_args, conditional=conditional)


def _batch_args(node: ast.Call, batches: frozenset[str]) -> tuple[int | str, ...]:
    """Where the call passes a batch: positional indexes and keyword names."""
    positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
    return (
        *(index for index, arg in enumerate(positional) if _is_batch(arg, batches)),
        *(keyword.arg for keyword in node.keywords if keyword.arg is not None and _is_batch(keyword.value, batches)),
    )


def _is_batch(node: Optional[ast.expr], batches: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in batches
