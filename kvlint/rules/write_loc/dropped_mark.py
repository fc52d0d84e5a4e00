"""KV103 dropped-mark."""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from kvlint.api.contract import LOC_KEYWORDS, Contract
from kvlint.analysis.dataflow import function_flow
from kvlint.api.rule import FileContext, Rule
from kvlint.analysis.index import module_index
from kvlint.rules.write_loc._api_words import mark_stated, mark_unnamed
from kvlint.rules.write_loc._door_classes import door_call, refusal_ruled_out
from kvlint.rules.write_loc._raw_loc import loc_argument
from kvlint.api.types import Invalid, Severity, Valid
from kvlint.analysis.ast_walk import Function
from kvlint.rules.write_loc._candidates import ast_loc_argument, encoded, file_units, walk

# The helper that takes a write loc apart: `loc, swa_loc, full_loc = unwrap_write_loc(loc_info)`.
UNWRAP_FUNCTION = "unwrap_write_loc"
_MAX_ALIAS_DEPTH = 8


class DroppedMark(Rule):
    """A write door forwards a loc taken out of its incoming `KVWriteLoc`, without the mark.

    ## What it does
    Inside the body of a method that is itself a write door (its name is a
    configured door and it takes a `loc`/`loc_info` parameter), flags a call to
    another object's write door (not one on `self`: the pool's own helpers run
    behind the door that holds the mark) whose loc is unwrapped from the
    incoming loc:
    `unwrap_write_loc(loc_info)[0]`, a name unpacked from `unwrap_write_loc(...)`,
    `loc_info.loc`, `loc_info.swa_loc`, `loc_info.full_loc`. Only where some
    definition of the inner door the receiver can reach (by its class, as far
    as the tree says: a constructor, an annotation, an annotated parameter kept
    as the attribute) needs the mark: one that ignores it loses nothing. Nor
    where the pools' own code rules out every class that would refuse: a
    sub-pool built from a handed class by `size=` is never a unified pool whose
    constructor takes a unified buffer, an `isinstance` test on the way
    narrows, and an instance whose own gate is off refuses nothing itself.

    ## Why is this bad?
    The caller marked its loc; the wrapper door hands the inner door a bare
    tensor, so the inner pool sees an unmarked loc. A unified inner pool refuses
    it, and any check the mark was meant to enable is silently skipped.

    ## Example
    ```python
    def set_kv_buffer(self, layer, loc_info, cache_k, cache_v):
        loc, swa_loc, _ = unwrap_write_loc(loc_info)
        self.full_kv_pool.set_kv_buffer(None, loc, cache_k, cache_v)
    ```

    ## Use instead
    ```python
    def set_kv_buffer(self, layer, loc_info, cache_k, cache_v):
        loc, swa_loc, _ = unwrap_write_loc(loc_info)
        self.full_kv_pool.set_kv_buffer(None, KVWriteLoc(loc, id_space=loc_info.id_space), cache_k, cache_v)
    ```

    ## Fix safety
    No fix: the incoming loc may be a bare tensor on some paths (that is what
    `unwrap_write_loc` tolerates), and whether the inner pool should see the
    outer mark or a mark of its own is the author's decision.

    ## Options
    `write-doors` and `mark` in `[tool.kvlint.contract]`; `mark-predicate`
    (learned: a function of the write-loc class's module that tests
    `isinstance(x, KVWriteLoc)` and reads the mark, such as
    `write_loc_is_physical`) is what the suggestion reads the incoming mark
    with. Without one the suggestion uses `getattr(loc_info, "<mark>", <unmarked>)`,
    never `loc_info.<mark>`, which a bare tensor (accepted by the tree's
    unwrap) does not have.
    """

    code = "KV103"
    name = "dropped-mark"
    severity = Severity.ERROR
    fix_applicability = None

    VALID = [
        # Forwarding the incoming write loc itself keeps its mark.
        Valid(
            "class Pool:\n"
            "    def set_kv_buffer(self, layer, loc_info, k, v):\n"
            "        self.inner.set_kv_buffer(layer, loc_info, k, v)\n"
        ),
        # Re-wrapped with the incoming mark.
        Valid(
            "class Pool:\n"
            "    def set_kv_buffer(self, layer, loc_info, k, v):\n"
            "        loc, swa_loc, _ = unwrap_write_loc(loc_info)\n"
            "        self.inner.set_kv_buffer(layer, KVWriteLoc(swa_loc, id_space=loc_info.id_space), k, v)\n"
        ),
        # Not a door: no incoming mark to drop.
        Valid(
            "class Backend:\n"
            "    def forward(self, layer, loc_info, k, v):\n"
            "        loc, _, _ = unwrap_write_loc(loc_info)\n"
            "        self.pool.set_kv_buffer(layer, loc, k, v)\n"
        ),
        # The pool's own helper, on `self`: the outer door holds (and checks) the mark.
        Valid(
            "class Pool:\n"
            "    def set_kv_buffer(self, layer, loc_info, k, v):\n"
            "        loc, _, _ = unwrap_write_loc(loc_info)\n"
            "        self._set_quantized_kv_buffer(layer.layer_id, 0, loc, k, v)\n"
        ),
        # A door without a loc parameter.
        Valid(
            "class Pool:\n"
            "    def set_kv_buffer(self, *args, **kwargs):\n"
            "        loc = unwrap_write_loc(args[1])[0]\n"
            "        self.inner.set_kv_buffer(None, loc, args[2], args[3])\n"
        ),
        # The unwrapped loc is read, not forwarded.
        Valid(
            "class Pool:\n"
            "    def set_kv_buffer(self, layer, loc, k, v):\n"
            "        n = loc.loc.shape[0]\n"
            "        self.inner.set_kv_buffer(layer, loc, k[:n], v[:n])\n"
        ),
    ]
    INVALID = [
        Invalid(
            "class SWAPool:\n"
            "    def set_kv_buffer(self, layer, loc_info, k, v):\n"
            "        loc, swa_loc, _ = unwrap_write_loc(loc_info)\n"
            "        if layer.is_swa:\n"
            "            loc = swa_loc\n"
            "        self.full_kv_pool.set_kv_buffer(None, loc, k, v)\n",
            line=6,
            column=47,
        ),
        Invalid(
            "class Pool:\n"
            "    def set_mla_kv_buffer(self, layer, loc, k_nope, k_rope):\n"
            "        self.inner.set_mla_kv_buffer(layer, loc.swa_loc, k_nope, k_rope)\n"
        ),
        Invalid(
            "class Pool:\n"
            "    def set_kv_buffer(self, layer, loc_info, k, v):\n"
            "        self.inner.set_kv_buffer(layer, loc=unwrap_write_loc(loc_info)[0], cache_k=k, cache_v=v)\n"
        ),
        Invalid(
            "class Pool:\n"
            "    def _set_kv_buffer(self, q, layer, loc_info, k):\n"
            "        inner = loc_info.full_loc[: k.shape[0]]\n"
            "        self.pool._set_kv_buffer(q, layer, inner, k)\n"
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        # Only a door's own body can drop a mark, and only by unwrapping the incoming loc.
        unwrapping = (UNWRAP_FUNCTION, *(f".{field}" for field in contract.write_loc_fields))
        return (tuple(f"def {door}" for door, _ in contract.write_doors), unwrapping)

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        """A door method taking a loc parameter whose body calls another object's door and unwraps a loc."""
        doors = contract.door_loc_index
        return any(
            _may_forward_unwrapped(method, contract)
            for unit in file_units(data, tree) if unit.holds_any(encoded(doors))
            for name, methods in unit.nodes().functions.items() if name in doors
            for method in methods
        )

    def check(self, ctx: FileContext) -> None:
        index = module_index(ctx)
        doors = ctx.contract.door_loc_index
        for site in index.calls(*doors):
            door_method = site.function
            if door_method is None or door_method.name.value not in doors:
                continue
            incoming = _loc_parameter(door_method)
            if incoming is None:
                continue
            if _on_self(site.call):
                # The outer door already holds the mark (and checks it); a call
                # into the same pool's own helpers is not a hand-off to another pool.
                continue
            door = _callee(site.call)
            arg = loc_argument(site.call, doors[door])
            if arg is None or not _unwrapped(ctx, arg.value, door_method, incoming, 0):
                continue
            if not door_call(ctx, site, door).may_refuse(ctx.contract) or refusal_ruled_out(ctx, site, door):
                # Every definition the inner pool can run ignores the mark: nothing is dropped.
                continue
            ctx.report(
                arg.value,
                f"`{door_method.name.value}` forwards `{ctx.code_for(arg.value)}`, taken out of the incoming "
                f"`{incoming.name.value}`, to `{door}`: the mark is dropped; pass a write loc that carries it"
                + _example(ctx, incoming.name.value),
            )


def _may_forward_unwrapped(method: Function, contract: Contract) -> bool:
    """`check`'s conditions on CPython's tree, names only: a loc parameter, and a door called on anything
    but `self` with a loc that may be unwrapped from it (anywhere in the method, nested code included)."""
    args = method.args
    if not any(arg.arg in LOC_KEYWORDS for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)):
        return False
    body = walk([method])
    # A name is unwrapped through its definitions: an unwrap call or a field read must be there.
    names_may_be = UNWRAP_FUNCTION in body.calls or not body.attributes.isdisjoint(contract.write_loc_fields)
    return any(
        not _ast_on_self(call) and _may_be_unwrapped(ast_loc_argument(call, index), contract, names_may_be)
        for door, index in contract.door_loc_index.items() for call in body.calls.get(door, ())
    )


def _ast_on_self(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"


def _may_be_unwrapped(loc: Optional[ast.expr], contract: Contract, names_may_be: bool) -> bool:
    """What `_unwrapped` may say yes to: an unwrap call, a field read, a name (through its definitions)."""
    if isinstance(loc, ast.Subscript):
        loc = loc.value
    if isinstance(loc, ast.Call):
        return isinstance(loc.func, ast.Name) and loc.func.id == UNWRAP_FUNCTION
    if isinstance(loc, ast.Attribute):
        return loc.attr in contract.write_loc_fields
    return isinstance(loc, ast.Name) and names_may_be


def _example(ctx: FileContext, incoming: str) -> str:
    """How to carry the mark, by the stated keyword; where the keyword is only assumed, why none is named."""
    if not mark_stated(ctx.contract):
        return f" ({mark_unnamed(ctx.contract)})"
    return f", e.g. `{ctx.contract.write_loc_class}(..., {ctx.contract.mark}={_incoming_mark(ctx, incoming)})`"


def _incoming_mark(ctx: FileContext, incoming: str) -> str:
    """The incoming loc's mark, read the tree's way: its predicate (`write_loc_is_physical(loc_info)`)
    accepts a bare tensor too, where `loc_info.physical` would raise `AttributeError`."""
    predicate = ctx.contract.mark_predicate
    if predicate:
        return f"{predicate}({incoming})"
    unmarked = "False" if ctx.contract.mark == "physical" else '"virtual"'
    return f'getattr({incoming}, "{ctx.contract.mark}", {unmarked})'


def _callee(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value  # type: ignore[attr-defined]


def _on_self(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _loc_parameter(func: cst.FunctionDef) -> Optional[cst.Param]:
    for param in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params):
        if param.name.value in LOC_KEYWORDS:
            return param
    return None


def _unwrapped(
    ctx: FileContext, expr: cst.BaseExpression, func: cst.FunctionDef, incoming: cst.Param, depth: int
) -> bool:
    """Whether every value `expr` can hold was taken out of the incoming write loc."""
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Call):
        return (
            isinstance(expr.func, cst.Name)
            and expr.func.value == UNWRAP_FUNCTION
            and bool(expr.args)
            and _is_incoming(ctx, expr.args[0].value, func, incoming)
        )
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ctx.contract.write_loc_fields and _is_incoming(ctx, expr.value, func, incoming)
    if not isinstance(expr, cst.Name) or depth >= _MAX_ALIAS_DEPTH:
        return False
    definitions = function_flow(ctx, func).reaching(expr)
    if not definitions:
        return False
    for definition in definitions:
        if definition.kind == "unpack" and definition.source is not None:
            taken = definition.source
        elif definition.kind in ("assign", "walrus") and definition.value is not None:
            taken = definition.value
        else:
            return False
        if not _unwrapped(ctx, taken, func, incoming, depth + 1):
            return False
    return True


def _is_incoming(ctx: FileContext, expr: cst.BaseExpression, func: cst.FunctionDef, incoming: cst.Param) -> bool:
    if not isinstance(expr, cst.Name):
        return False
    definitions = function_flow(ctx, func).reaching(expr)
    if not definitions:
        return False
    return all(d.kind == "param" and d.param is incoming for d in definitions)
