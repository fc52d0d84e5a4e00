"""Tensors the code allocates itself: never paged KV, whatever their names.

A model's own cache (`self.register_buffer("k_cache", torch.zeros(...))`,
`self.v_cache = torch.zeros(...)`, an `nn.Parameter`) is not a pool view. The
name fallback (`kv-name-fallback`) takes a parameter named like a cache for
paged KV only while its origin is unknown: a parameter every call of its
function in this file feeds an allocation of the caller's own (a slice of one
included) has a known origin, and is not paged KV. The origin is followed in
the file through the callers' own parameters (an attention op handing its
`k_cache` to a device-specific kernel wrapper) and through what a method of a
class the file types returns (`k_cache, v_cache = self.kv_cache.get(bsz)`,
where `self.kv_cache: KVCache` and `KVCache.get` returns slices of its own
`register_buffer` caches).

A buffer accessor's result is such a tensor too where its pool hands out only buffers of its own
(`_pool_origin.OWN`): MiniMax's sparse backend asserts its pool is the sparse pool, whose dense and
main pools it builds by size, and hands their buffers to a module helper taking `k_cache`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.closures import closure_reaching
from kvlint.analysis.dataflow import Definition
from kvlint.analysis.helper_calls import argument_for
from kvlint.analysis.index import module_index, trailing_name
from kvlint.analysis.walk import code_children
from kvlint.api.rule import FileContext
from kvlint.rules.layout._pool_origin import OWN, class_of, is_self_attribute, pool_origin, value_classes

ALLOCATORS = frozenset({"zeros", "empty", "ones", "full", "randn", "rand", "zeros_like", "empty_like", "Parameter"})
_DEPTH = 6


# (function, parameter) pairs already being asked about: a cycle of calls proves nothing.
_Asked = frozenset[tuple[int, str]]


def fed_own_allocations(ctx: FileContext, function: cst.FunctionDef, param: str, asked: _Asked = frozenset()) -> bool:
    """Whether every call of `function` in this file (one at least) passes `param` an allocation of the caller's."""
    if (id(function), param) in asked:
        return False
    asked = asked | {(id(function), param)}
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
        if argument is None or not allocated(ctx, argument, site.function, 0, asked):
            return False
        seen = True
    return seen


def allocated(ctx: FileContext, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int,
              asked: _Asked = frozenset()) -> bool:
    """`torch.zeros(...)`, `nn.Parameter(...)`, a slice of one, a local or `self.<attr>` bound only to one, a
    parameter every caller in the file feeds one, an element of what a method returning them returns."""
    if depth > _DEPTH:
        return False
    if isinstance(expr, cst.Call):
        return trailing_name(expr.func) in ALLOCATORS or _own_pool_buffer(ctx, expr, function)
    if isinstance(expr, cst.Subscript):
        return allocated(ctx, expr.value, function, depth + 1, asked)
    if isinstance(expr, cst.Name) and function is not None:
        definitions, owner = closure_reaching(ctx, expr, function) or ((), function)
        return bool(definitions) and all(
            _defined_by_allocation(ctx, definition, owner, depth + 1, asked) for definition in definitions
        )
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        klass = class_of(ctx, function) if function is not None else None
        return klass is not None and _attribute_allocated(ctx, klass, expr.attr.value, depth)
    return False


def _own_pool_buffer(ctx: FileContext, call: cst.Call, function: Optional[cst.FunctionDef]) -> bool:
    """`pool.get_kv_buffer(i)` where `pool` hands out only buffers of its own."""
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value in ctx.contract.buffer_accessors
            and pool_origin(ctx, func.value, function).verdict == OWN)


def _defined_by_allocation(ctx: FileContext, definition: Definition, function: cst.FunctionDef, depth: int,
                           asked: _Asked) -> bool:
    if definition.kind in ("assign", "walrus") and definition.value is not None:
        return allocated(ctx, definition.value, function, depth, asked)
    if definition.kind == "param":
        return fed_own_allocations(ctx, function, definition.target.value, asked)
    if definition.kind == "unpack" and isinstance(definition.source, cst.Call) and definition.unpack_index is not None:
        return _own_pool_buffer(ctx, definition.source, function) or _returns_allocations(
            ctx, definition.source, function, definition.unpack_index, depth, asked)
    return False


def _returns_allocations(ctx: FileContext, call: cst.Call, function: cst.FunctionDef, index: int, depth: int,
                         asked: _Asked) -> bool:
    """Whether `obj.method(...)` returns, at `index` of the tuple it returns, an allocation of `obj`'s own: every
    class of this file `obj` may be (and each subclass here overriding the method) defines it so."""
    func = call.func
    typed = value_classes(ctx, func.value, function) if isinstance(func, cst.Attribute) else None
    if not typed or not isinstance(func, cst.Attribute):
        return False
    named = {name for name, _ in typed}
    loose = {name for name, exact in typed if not exact}
    methods = [
        (method, klass) for method, klass in module_index(ctx).functions
        if klass is not None and method.name.value == func.attr.value
        and (klass.name.value in named or any(trailing_name(base.value) in loose for base in klass.bases))
    ]
    if {klass.name.value for _, klass in methods} < named or not methods:
        return False
    return all(_returns_at(ctx, method, index, depth, asked) for method, _ in methods)


def _returns_at(ctx: FileContext, method: cst.FunctionDef, index: int, depth: int, asked: _Asked) -> bool:
    """Every `return` of `method` (one at least) is a tuple whose element at `index` is an allocation."""
    returns = [node for node in _own_statements(method) if isinstance(node, cst.Return)]
    return bool(returns) and all(
        isinstance(node.value, cst.Tuple) and index < len(node.value.elements)
        and not isinstance(node.value.elements[index], cst.StarredElement)
        and allocated(ctx, node.value.elements[index].value, method, depth + 1, asked)
        for node in returns
    )


def _own_statements(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The nodes of `function`'s body, not those of functions, lambdas or classes inside it."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(child for child in code_children(node)
                     if not isinstance(child, (cst.FunctionDef, cst.Lambda, cst.ClassDef)))
    return found


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
