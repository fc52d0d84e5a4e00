"""Paged KV across calls: tensor-keeping calls, and helpers that return paged KV.

A *tensor-keeping call* returns the tensor it is called on, or a tensor over
the same storage with the same strides, so paged KV stays paged KV through it:

* `x.to(...)`, `x.type(...)` (and `torch.Tensor.to(x, ...)`): `self` itself
  when the dtype and device already match, which is the case on the paths that
  feed a kernel the pool's own dtype: a strided view in, the same view out;
* `x.detach()`, `x.requires_grad_()`: the same storage and strides;
* `x.view(dtype)`: the same bytes reinterpreted; the slot stride is still the
  whole entry (in units of the new dtype).

A *paged helper* is a function the project index (`kvlint.analysis.project_index`)
resolved whose return may be paged KV: an accessor result, a slice of one, a
paged helper's result, or a tensor-keeping call of one. Its result is paged KV
in the caller, and a finding on it names the helper and where its buffer
comes from.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.closures import closure_reaching
from kvlint.analysis.helper_calls import helper_fact
from kvlint.analysis.index import callee_name
from kvlint.api.helpers import HelperFact
from kvlint.api.rule import FileContext

KEEPING_METHODS = ("to", "type", "detach", "requires_grad_")


def kept_tensor(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The tensor a tensor-keeping call returns (the same tensor), or None."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    if name in ("to", "type") and isinstance(func.value, cst.Attribute) and func.value.attr.value == "Tensor":
        # `torch.Tensor.to(x, ...)`: the tensor is the first argument.
        first = call.args[0] if call.args else None
        return first.value if first is not None and first.keyword is None and not first.star else None
    if name in KEEPING_METHODS:
        return func.value
    if name == "view" and len(call.args) == 1 and _is_dtype(call.args[0]):
        return func.value
    return None


def keeps_if_dtype_matches(call: cst.Call) -> bool:
    """`.to(...)`/`.type(...)`: the same tensor only when it already has that dtype and device."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "type")


def _is_dtype(arg: cst.Arg) -> bool:
    """`x.view(torch.uint8)`, `x.view(dtype=...)`, `x.view(self.dtype)`, `x.view(kv_dtype)`."""
    if arg.keyword is not None:
        return arg.keyword.value == "dtype"
    value = arg.value
    if isinstance(value, cst.Attribute):
        return (isinstance(value.value, cst.Name) and value.value.value == "torch") or "dtype" in value.attr.value
    return isinstance(value, cst.Name) and "dtype" in value.value


def paged_helper(ctx: FileContext, call: cst.Call, function: Optional[cst.FunctionDef]) -> Optional[HelperFact]:
    """The resolved helper `call` runs, when its return may be paged KV."""
    fact = helper_fact(ctx, call, function)
    return fact if fact is not None and fact.returns_paged is not None else None


def helper_origin(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> str:
    """"; paged KV from the helper `H` (it returns ... at path:line)" when `expr` comes from one; else ""."""
    fact = _origin(ctx, expr, function, 0)
    if fact is None or fact.returns_paged is None:
        return ""
    where = fact.returns_paged
    return f" (paged KV from the helper `{fact.helper}`, which {where.what} at {where.shown()})"


def _origin(
    ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int
) -> Optional[HelperFact]:
    if depth > 8:
        return None
    if isinstance(expr, cst.Call):
        fact = paged_helper(ctx, expr, function)
        if fact is not None:
            return fact
        kept = kept_tensor(expr)
        if kept is None and callee_name(expr) == "view" and isinstance(expr.func, cst.Attribute):
            kept = expr.func.value
        return _origin(ctx, kept, function, depth + 1) if kept is not None else None
    if isinstance(expr, cst.Subscript):
        return _origin(ctx, expr.value, function, depth + 1)
    if isinstance(expr, cst.Name) and function is not None:
        definitions, owner = closure_reaching(ctx, expr, function) or ((), function)
        for definition in definitions:
            if definition.kind in ("assign", "walrus") and definition.value is not None:
                found = _origin(ctx, definition.value, owner, depth + 1)
                if found is not None:
                    return found
    return None
