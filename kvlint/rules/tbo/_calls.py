"""KV301: the calls through which a function hands a batch on.

Whether an assignment runs before or after the TBO split is decided on the
call graph these calls form (`_timing`). Only calls that pass a batch (as an
argument, or as the receiver of a method) are kept: the split, the model
forward and attention-metadata building all receive the batch they act on.
The callee is kept as written; `_timing` resolves it across files.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.rules.tbo._facts import Call, CallKind

SELF_NAMES = frozenset({"self", "cls"})


def batch_call(node: cst.Call, order: int, batches: frozenset[str], imports: dict[str, str]) -> Optional[Call]:
    """The call as KV301's call graph keeps it, or None when it hands no batch on."""
    func = node.func
    receiver = func.value if isinstance(func, cst.Attribute) else None
    positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
    batch_args: tuple[int | str, ...] = (
        *(index for index, arg in enumerate(positional) if _is_batch(arg.value, batches)),
        *(arg.keyword.value for arg in node.args if arg.keyword is not None and _is_batch(arg.value, batches)),
    )
    if not batch_args and not _is_batch(receiver, batches):
        return None
    if isinstance(func, cst.Name):
        return Call(order, CallKind.NAME, func.value, origin=imports.get(func.value), batch_args=batch_args)
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    if isinstance(receiver, cst.Name) and receiver.value in SELF_NAMES:
        return Call(order, CallKind.SELF, name)
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
        return Call(order, CallKind.SELF, name)
    if isinstance(receiver, cst.Name) and receiver.value in batches:
        return Call(order, CallKind.BATCH, name)
    if isinstance(receiver, cst.Name) and receiver.value[:1].isupper():
        return Call(order, CallKind.OWNER, name, owner=receiver.value, origin=imports.get(receiver.value))
    return Call(order, CallKind.DYNAMIC, name, batch_args=batch_args)


def _is_batch(node: Optional[cst.BaseExpression], batches: frozenset[str]) -> bool:
    return isinstance(node, cst.Name) and node.value in batches
