"""Tensors the code allocates itself: never paged KV, whatever their names.

A model's own cache (`self.register_buffer("k_cache", torch.zeros(...))`,
`self.v_cache = torch.zeros(...)`, an `nn.Parameter`) is not a pool view. The
name fallback (`kv-name-fallback`) takes a parameter named like a cache for
paged KV only while its origin is unknown: a parameter every call of its
function in this file feeds an allocation of the caller's own (a slice of one
included) has a known origin, and is not paged KV.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.dataflow import function_flow
from kvlint.analysis.helper_calls import argument_for
from kvlint.analysis.index import module_index, trailing_name
from kvlint.analysis.walk import code_children
from kvlint.api.rule import FileContext
from kvlint.rules.layout._pool_origin import class_of, is_self_attribute

ALLOCATORS = frozenset({"zeros", "empty", "ones", "full", "randn", "rand", "zeros_like", "empty_like", "Parameter"})
_DEPTH = 6


def fed_own_allocations(ctx: FileContext, function: cst.FunctionDef, param: str) -> bool:
    """Whether every call of `function` in this file (one at least) passes `param` an allocation of the caller's."""
    klass = class_of(ctx, function)
    params = [p.name.value for p in function.params.params]
    if klass is not None and params[:1] in (["self"], ["cls"]):
        params = params[1:]
    position = params.index(param) if param in params else -1
    seen = False
    for site in module_index(ctx).calls(function.name.value):
        func = site.call.func
        own_method = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        if (klass is None and not isinstance(func, cst.Name)) or (klass is not None and not (own_method and site.klass is klass)):
            continue
        argument = argument_for(site.call, param, position)
        if argument is None or not allocated(ctx, argument, site.function, 0):
            return False
        seen = True
    return seen


def allocated(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> bool:
    """`torch.zeros(...)`, `nn.Parameter(...)`, a slice of one, a local or `self.<attr>` bound only to one."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, cst.Call):
        return trailing_name(expr.func) in ALLOCATORS
    if isinstance(expr, cst.Subscript):
        return allocated(ctx, expr.value, function, depth + 1)
    if isinstance(expr, cst.Name) and function is not None:
        definitions = function_flow(ctx, function).reaching(expr)
        return bool(definitions) and all(
            d.kind in ("assign", "walrus") and d.value is not None and allocated(ctx, d.value, function, depth + 1)
            for d in definitions or ()
        )
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        klass = class_of(ctx, function) if function is not None else None
        return klass is not None and _attribute_allocated(ctx, klass, expr.attr.value, depth)
    return False


def _attribute_allocated(ctx: FileContext, klass: cst.ClassDef, attribute: str, depth: int) -> bool:
    """Every assignment of `self.<attribute>` in `klass` allocates (or `register_buffer` names it), one at least."""
    seen = False
    for method in klass.body.body:
        if not isinstance(method, cst.FunctionDef):
            continue
        stack: list[cst.CSTNode] = [method.body]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Assign) and any(is_self_attribute(t.target, attribute) for t in node.targets):
                if not allocated(ctx, node.value, method, depth + 1):
                    return False
                seen = True
            elif isinstance(node, cst.Call) and trailing_name(node.func) == "register_buffer" and node.args:
                name = node.args[0].value
                if isinstance(name, cst.SimpleString) and name.evaluated_value == attribute:
                    seen = True
            stack.extend(code_children(node))
    return seen
