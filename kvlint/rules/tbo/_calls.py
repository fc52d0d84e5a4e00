"""KV301: the calls through which a function hands a batch on.

Whether an assignment runs before or after the TBO split is decided on the
call graph these calls form (`_timing`). Only calls that pass a batch (as an
argument, or as the receiver of a method) are kept: the split, the model
forward and attention-metadata building all receive the batch they act on.
The callee is kept as written; `_timing` resolves it across files.
"""

from __future__ import annotations

import ast
from typing import Optional

from kvlint.rules.tbo._facts import Call, CallKind

SELF_NAMES = frozenset({"self", "cls"})


def batch_call(node: ast.Call, order: int, batches: frozenset[str], imports: dict[str, str]) -> Optional[Call]:
    """The call as KV301's call graph keeps it, or None when it hands no batch on."""
    func = node.func
    receiver = func.value if isinstance(func, ast.Attribute) else None
    positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
    batch_args: tuple[int | str, ...] = (
        *(index for index, arg in enumerate(positional) if _is_batch(arg, batches)),
        *(keyword.arg for keyword in node.keywords if keyword.arg is not None and _is_batch(keyword.value, batches)),
    )
    if not batch_args and not _is_batch(receiver, batches):
        return None
    if isinstance(func, ast.Name):
        return Call(order, CallKind.NAME, func.id, origin=imports.get(func.id), batch_args=batch_args)
    if not isinstance(func, ast.Attribute):
        return None
    name = func.attr
    if isinstance(receiver, ast.Name) and receiver.id in SELF_NAMES:
        return Call(order, CallKind.SELF, name)
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
        return Call(order, CallKind.SELF, name)
    if isinstance(receiver, ast.Name) and receiver.id in batches:
        return Call(order, CallKind.BATCH, name)
    if isinstance(receiver, ast.Name) and receiver.id[:1].isupper():
        return Call(order, CallKind.OWNER, name, owner=receiver.id, origin=imports.get(receiver.id))
    return Call(order, CallKind.DYNAMIC, name, batch_args=batch_args)


def _is_batch(node: Optional[ast.expr], batches: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in batches
