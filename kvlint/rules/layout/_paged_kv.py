"""Which expressions hold paged KV: a pool's per-layer buffer, or a view of one.

Under the token-major pool those tensors are strided with the whole entry as
their slot stride, which is what makes `.view`/`.reshape` on them hazardous.
A value is paged KV when, inside one function, it comes from

* a configured buffer accessor: a call `pool.get_key_buffer(i)` (on any
  receiver; `get_kv_buffer`'s tuple is paged KV too, so its unpacked or
  indexed parts are), or a subscript `self.k_buffer[i]` of the per-layer
  list (a *local* named `k_buffer` is a tensor and follows the next rules);
* a `paged_view`-family call, or a `.view(...)` of paged KV;
* a slice of paged KV (`kv_cache[:, :, d:]`, `k[:n]`), or an integer index
  into it (`get_kv_buffer(i)[0]`). An index by a name (`k_cache[loc]`) is a
  gather, a fresh tensor, and not followed;
* a local whose reaching definition is one of the above (assignment, tuple
  unpacking, `for buf in self.k_buffer`), per `kvlint.analysis.dataflow`;
* a parameter whose name matches the contract's `kv-name-fallback` pattern
  (names alone are a weaker signal, so only parameters get it).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.api.contract import DEFAULT_KV_NAME_FALLBACK, PAGED_HELPERS, Contract
from kvlint.analysis.dataflow import Definition, function_flow
from kvlint.analysis.index import callee_name, trailing_name
from kvlint.api.rule import FileContext

FALLBACK_NAME_WORDS = ("k_cache", "v_cache", "key_cache", "value_cache")


class PagedKV:
    """Answers "is this expression paged KV?" for one file; shared by KV201-KV203."""

    def __init__(self, ctx: FileContext) -> None:
        self._ctx = ctx
        self._accessors = frozenset(ctx.contract.buffer_accessors)

    def holds(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
        """Whether `expr`, evaluated inside `function` (None: module level), is paged KV."""
        return self._expr(expr, function, frozenset())

    def _expr(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], seen: frozenset[int]) -> bool:
        if isinstance(expr, cst.Call):
            name = callee_name(expr)
            if name in self._accessors or name in PAGED_HELPERS:
                return True
            return name == "view" and isinstance(expr.func, cst.Attribute) and self._expr(expr.func.value, function, seen)
        if isinstance(expr, cst.Subscript):
            if trailing_name(expr.value) in self._accessors and not self._is_local(expr.value, function):
                return True
            return _keeps_paged(expr) and self._expr(expr.value, function, seen)
        if isinstance(expr, cst.Name) and function is not None:
            definitions = function_flow(self._ctx, function).reaching(expr)
            return definitions is not None and any(
                self._definition(definition, function, seen) for definition in definitions
            )
        return False

    def _is_local(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
        """A local named like an accessor (`k_buffer = pool.get_key_buffer(i)`) is a tensor, not the
        per-layer list: `k_buffer[loc]` then gathers rows."""
        return (
            isinstance(expr, cst.Name)
            and function is not None
            and function_flow(self._ctx, function).reaching(expr) is not None
        )

    def _definition(self, definition: Definition, function: cst.FunctionDef, seen: frozenset[int]) -> bool:
        # A loop may feed a definition back into itself (`k = k[:n]`).
        key = id(definition.target)
        if key in seen:
            return False
        seen = seen | {key}
        if definition.kind == "param":
            return bool(self._ctx.contract.kv_name_pattern.match(definition.target.value))
        if definition.kind in ("assign", "walrus") and definition.value is not None:
            return self._expr(definition.value, function, seen)
        if definition.kind == "unpack" and definition.source is not None:
            element = _unpacked_element(definition.source, definition.unpack_index)
            if element is not None:
                return self._expr(element, function, seen)
            return self._expr(definition.source, function, seen)
        if definition.kind == "for" and definition.source is not None:
            # `for buf in self.k_buffer`: the per-layer buffers themselves.
            return trailing_name(definition.source) in self._accessors
        return False


def paged_kv(ctx: FileContext) -> PagedKV:
    return ctx.analysis("paged-kv", lambda: PagedKV(ctx))


def _keeps_paged(subscript: cst.Subscript) -> bool:
    """Slices and integer literals select within the tensor; other indices gather a copy."""
    for element in subscript.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            continue
        if isinstance(index, cst.Index) and isinstance(index.value, (cst.Integer, cst.Ellipsis)):
            continue
        return False
    return True


def _unpacked_element(source: cst.BaseExpression, index: Optional[int]) -> Optional[cst.BaseExpression]:
    """For `a, b = x, y` the element bound at `index`; None when the source is not a literal."""
    if index is None or not isinstance(source, (cst.Tuple, cst.List)):
        return None
    elements = source.elements
    if index >= len(elements) or any(isinstance(element, cst.StarredElement) for element in elements[: index + 1]):
        return None
    return elements[index].value


def paged_kv_trigger(contract: Contract) -> tuple[tuple[str, ...], ...]:
    """The trigger group of a file that may hold paged KV (empty: no word is certain).

    Every name the default fallback pattern matches contains one of
    `FALLBACK_NAME_WORDS` (`kv_cache` contains `v_cache`); a custom pattern
    promises no word, so a file is then worth parsing without one.
    """
    if contract.kv_name_fallback != DEFAULT_KV_NAME_FALLBACK:
        return ()
    return ((*contract.buffer_accessors, *PAGED_HELPERS, *FALLBACK_NAME_WORDS),)
