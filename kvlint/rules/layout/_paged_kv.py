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
  unpacking, `for buf in self.k_buffer`), per `kvlint.analysis.dataflow`; a
  nested function's closure variable by the definitions reaching its `def` in
  the function that binds it (`kvlint.analysis.closures`);
* a parameter whose name matches the contract's `kv-name-fallback` pattern
  (names alone are a weaker signal, so only parameters get it), unless every
  call of its function in the file passes a tensor the caller allocated
  (`_own_allocation`: a model's own `register_buffer` cache). Such a value
  has the `NAMED_LAYOUT`: dims unknown, and paged KV by its name only. It does
  not survive `.to(...)`/`.type(...)`, which keep a pool view only when the
  dtype already matches (a name guess and a dtype guess together are no
  finding), nor does it reach a helper's layout-sensitive use of its
  parameter (`_through_helpers`: a finding one call away rests on a fact).

What is *not* a pool view: inside a method of a pool class (one that assigns a
buffer attribute, `self.k_buffer = ...`, or derives from one: the contract's
`pool-classes`), `self.k_buffer[i]` and `self.get_key_buffer(i)` are the pool's
own allocation, whose layout the pool itself chose; inside a host cache
(`HostKVCache` and its subclasses: `host-cache-classes`) they are CPU pages.

Alongside "is it paged KV" the tracker keeps a `Layout`: what each dim holds,
where the code states it. A buffer accessor's per-layer form is `(slots, row)`
(`(slots, H, D)` or `(slots, D)`) where every pool its receiver may be
allocates slot-major buffers; where the receiver is a page-split pool
(`(pages, page_size, ...)`, `_pool_origin`), or the method's class meets no
other (`page-split-only`), or where every pool it may be hands out only
buffers of its own, never views of the unified buffer (`kvlint.analysis.own_buffers`), the buffer
is that pool's own contiguous allocation, which no layout rule concerns: it is not tracked; where it may be either (its class unknown while the tree has page-split pools,
or typed as a base of one) dim 0 is `MAYBE_SLOTS`: slots if the pool is the
slot-major kind, which no rule relies on but KV201's fix, offered as unsafe.
The paged helpers give `(pages, in-page, ...)`;
`.view(-1, page_size, *row)` of a `(slots, ...)` tensor gives
`(pages, in-page, row...)`; slices keep the layout; merging the page and
in-page dims (`.flatten(0, 1)`) gives `(slots, ...)` back. Anything else is an
unknown layout: still paged KV, but no rule may rely on its dims.
"""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from kvlint.api.contract import DEFAULT_KV_NAME_FALLBACK, PAGED_HELPERS, Contract
from kvlint.analysis.closures import closure_reaching
from kvlint.analysis.dataflow import Definition
from kvlint.analysis.index import callee_name, module_index, trailing_name
from kvlint.rules.layout._view_shape import Bound, is_minus_one, is_page_split, unbound
from kvlint.rules.layout._aliases import bound_in
from kvlint.rules.layout._own_allocation import fed_own_allocations
from kvlint.rules.layout._pool_origin import EITHER, STRIDED, PoolOrigin, pool_origin
from kvlint.rules.layout._kept import keeps_if_dtype_matches, kept_tensor, paged_helper
from kvlint.api.rule import FileContext

FALLBACK_NAME_WORDS = ("k_cache", "v_cache", "key_cache", "value_cache")


SLOTS = "slots"
PAGES = "pages"
IN_PAGE = "in-page"
ROW = "row"
UNKNOWN = "?"
# Dim 0 of a parameter that is paged KV by its name only (the fallback): unknown, and a guess.
NAMED = "named?"
# Dim 0 of a buffer whose pool may be slot-major or page-split: slots or pages.
MAYBE_SLOTS = "slots?"
# Any number of further dims, unknown.
REST = "..."

# What each dim of a paged KV value holds, as far as the code states it.
Layout = tuple[str, ...]
ACCESSOR_LAYOUT: Layout = (SLOTS, REST)
UNKNOWN_LAYOUT: Layout = (UNKNOWN, REST)
NAMED_LAYOUT: Layout = (NAMED, REST)
_HELPER_LAYOUTS: dict[str, Layout] = {
    "paged_view": (PAGES, IN_PAGE, REST),
    "paged_row_view": (PAGES, IN_PAGE, ROW),
    "paged_kv_view": (PAGES, IN_PAGE, ROW, ROW),
}
HELPER_LAYOUT_NAMES = frozenset(_HELPER_LAYOUTS)


class PagedKV:
    """Answers "is this expression paged KV, and what do its dims hold?" for one file; shared by KV201-KV203."""

    def __init__(self, ctx: FileContext) -> None:
        self._ctx = ctx
        self._accessors = frozenset(ctx.contract.buffer_accessors)
        contract = ctx.contract
        owners = frozenset((*contract.pool_classes, *contract.host_cache_classes))
        self._own_methods = frozenset(
            id(function) for function, klass in module_index(ctx).functions if klass is not None and klass.name.value in owners
        )

    def holds(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
        """Whether `expr`, evaluated inside `function` (None: module level), is paged KV."""
        return self.layout(expr, function) is not None

    def layout(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Layout]:
        """The layout of `expr` if it is paged KV (`UNKNOWN_LAYOUT` where the code does not say); None if not."""
        return self._expr(expr, function, frozenset())

    def _own(self, receiver: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
        """`self.<buffer>` (or `self.get_key_buffer`) inside a pool's or host cache's own method:
        its own allocation, not a pool view."""
        if function is None or id(function) not in self._own_methods:
            return False
        base = receiver.value if isinstance(receiver, cst.Attribute) else receiver
        return isinstance(base, cst.Name) and base.value == "self"

    def _expr(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], seen: frozenset[int]) -> Optional[Layout]:
        if isinstance(expr, cst.Call):
            return self._call(expr, function, seen)
        if isinstance(expr, cst.Subscript):
            if trailing_name(expr.value) in self._accessors and not self._is_local(expr.value, function):
                if self._own(expr.value, function):
                    return None
                # `self.k_buffer[i]`: one layer's buffer; `get_kv_buffer(i)[0]`: one half of the pair.
                return self._buffer_layout(_receiver(expr.value), function)
            if not _keeps_paged(expr):
                return None
            inner = self._expr(expr.value, function, seen)
            if inner is None or all(isinstance(e.slice, cst.Slice) for e in expr.slice):
                return inner
            return unknown_like(inner)
        if isinstance(expr, cst.Name) and function is not None:
            reached = closure_reaching(self._ctx, expr, function)
            if reached is None:
                return None
            definitions, owner = reached
            layouts = [self._definition(definition, owner, seen) for definition in definitions]
            found = [layout for layout in layouts if layout is not None]
            if not found:
                return None
            return found[0] if all(layout == found[0] for layout in found) else UNKNOWN_LAYOUT
        return None

    def _call(self, call: cst.Call, function: Optional[cst.FunctionDef], seen: frozenset[int]) -> Optional[Layout]:
        name = callee_name(call)
        if name in self._accessors:
            if isinstance(call.func, cst.Attribute) and self._own(call.func, function):
                return None
            return self._buffer_layout(_receiver(call.func), function)
        if name in _HELPER_LAYOUTS:
            return _HELPER_LAYOUTS[name]
        # Across calls (`_kept`): a tensor-keeping call keeps its tensor (and layout); a paged
        # helper's result is paged KV, `(slots, ...)` only when it returns the accessor's own result.
        kept = kept_tensor(call)
        if kept is not None:
            inner = self._expr(kept, function, seen)
            return None if inner == NAMED_LAYOUT and keeps_if_dtype_matches(call) else inner
        helper = paged_helper(self._ctx, call, function)
        if helper is not None:
            return self._buffer_layout(None, function) if helper.returns_accessor else UNKNOWN_LAYOUT
        if not isinstance(call.func, cst.Attribute) or name not in ("view", "flatten", "reshape"):
            return None
        if name != "view":
            # A merge of the page and in-page dims stays a view on a token-major pool (KV202 judges the rest).
            inner = self._expr(call.func.value, function, seen)
            return None if inner is None else merged_layout(call, call.func.value, inner)
        inner = self._expr(call.func.value, function, seen)
        if inner is None:
            return None
        return viewed_layout(call.args, inner, bound_in(self._ctx, function))

    def _is_local(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> bool:
        """A local named like an accessor (`k_buffer = pool.get_key_buffer(i)`) is a tensor, not the
        per-layer list: `k_buffer[loc]` then gathers rows."""
        return (
            isinstance(expr, cst.Name)
            and function is not None
            and closure_reaching(self._ctx, expr, function) is not None
        )

    def _definition(self, definition: Definition, function: cst.FunctionDef, seen: frozenset[int]) -> Optional[Layout]:
        # A loop may feed a definition back into itself (`k = k[:n]`).
        key = id(definition.target)
        if key in seen:
            return None
        seen = seen | {key}
        if definition.kind == "param":
            name = definition.target.value
            if not self._ctx.contract.kv_name_pattern.match(name) or fed_own_allocations(self._ctx, function, name):
                return None
            return NAMED_LAYOUT
        if definition.kind in ("assign", "walrus") and definition.value is not None:
            return self._expr(definition.value, function, seen)
        if definition.kind == "unpack" and definition.source is not None:
            element = _unpacked_element(definition.source, definition.unpack_index)
            if element is not None:
                return self._expr(element, function, seen)
            return self._expr(definition.source, function, seen)
        if definition.kind == "for" and definition.source is not None:
            # `for buf in self.k_buffer`: the per-layer buffers themselves.
            if trailing_name(definition.source) not in self._accessors:
                return None
            return None if self._own(definition.source, function) else self._buffer_layout(_receiver(definition.source), function)
        return None

    def _buffer_layout(self, receiver: Optional[cst.BaseExpression], function: Optional[cst.FunctionDef]) -> Optional[Layout]:
        """A per-layer buffer's layout, by the pools `receiver` (None: not in this file) may be; None where
        each allocates page-split buffers, or hands out only buffers of its own (never a view of the unified
        buffer): that is the pool's own contiguous allocation, never a strided view."""
        verdict = pool_origin(self._ctx, receiver, function).verdict
        if verdict == STRIDED:
            return ACCESSOR_LAYOUT
        return (MAYBE_SLOTS, REST) if verdict == EITHER else None

    def buffer_origin(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[PoolOrigin]:
        """The pool the buffer under `expr` comes from, followed as `layout` follows it; None if none is reached."""
        return self._origin(expr, function, 0)

    def _origin(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[PoolOrigin]:
        if depth > 12:
            return None
        if isinstance(expr, cst.Call):
            if callee_name(expr) in self._accessors:
                return pool_origin(self._ctx, _receiver(expr.func), function)
            if paged_helper(self._ctx, expr, function) is not None:
                return pool_origin(self._ctx, None, function)
            inner = kept_tensor(expr)
            if inner is None and isinstance(expr.func, cst.Attribute):
                inner = expr.func.value
            return self._origin(inner, function, depth + 1) if inner is not None else None
        if isinstance(expr, cst.Subscript):
            if trailing_name(expr.value) in self._accessors and not self._is_local(expr.value, function):
                return pool_origin(self._ctx, _receiver(expr.value), function)
            return self._origin(expr.value, function, depth + 1)
        if isinstance(expr, cst.Name) and function is not None:
            definitions, owner = closure_reaching(self._ctx, expr, function) or ((), function)
            for definition in definitions:
                source = definition.value if definition.kind in ("assign", "walrus") else definition.source
                if definition.kind == "for" and source is not None and trailing_name(source) in self._accessors:
                    return pool_origin(self._ctx, _receiver(source), owner)
                found = self._origin(source, owner, depth + 1) if source is not None else None
                if found is not None:
                    return found
        return None


def _receiver(accessor: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`pool` of `pool.get_key_buffer` or `pool.k_buffer`; None for a bare name."""
    return accessor.value if isinstance(accessor, cst.Attribute) else None


def viewed_layout(args: Sequence[cst.Arg], inner: Layout, bound: Bound = unbound) -> Layout:
    """The layout of `x.view(*args)` for `x` of layout `inner` (`bound`: what local names in the shape stand for)."""
    if len(args) == 1 and _is_dtype(args[0]):
        return inner
    if inner[0] == SLOTS and is_page_split(args, bound):
        trailing = args[2:]
        if any(arg.star for arg in trailing):
            return (PAGES, IN_PAGE, REST)
        return (PAGES, IN_PAGE, *([ROW] * len(trailing)))
    return unknown_like(inner)


def by_name_only(layout: Layout, code: str) -> str:
    """The clause a finding on a value paged KV by its name alone adds ("" for any other)."""
    if layout[0] != NAMED:
        return ""
    return f"; `{code}` is taken for paged KV by its name alone (its origin is unknown)"


def unknown_like(inner: Layout) -> Layout:
    """The layout of a tensor derived from one of layout `inner` where the code does not state its dims:
    unknown, and still only a name guess if `inner` was."""
    return NAMED_LAYOUT if inner[0] == NAMED else UNKNOWN_LAYOUT


def _is_dtype(arg: cst.Arg) -> bool:
    """`x.view(torch.uint8)`, `x.view(self.dtype)`: a reinterpretation, same dims."""
    if arg.keyword is not None and arg.keyword.value == "dtype":
        return True
    value = arg.value
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "torch":
        return True
    name = trailing_name(value)
    return name is not None and "dtype" in name.lower()


def merges_pages(layout: Layout, end: int) -> Optional[bool]:
    """Whether merging dims `0..end` (`-1`: all) of `layout` merges exactly the page and
    in-page dims, which a token-major pool's strides allow (a view); False when it merges
    a slot or in-page dim with a row dim (a packed copy); None when the layout does not say."""
    first = layout[0]
    if first == SLOTS:
        # The next dim is the row: slots and row never merge into a view.
        return False
    if first == PAGES and layout[1:2] == (IN_PAGE,):
        return end == 1
    return None


def merged_layout(call: cst.Call, tensor: cst.BaseExpression, inner: Layout) -> Layout:
    """The layout after a `.flatten`/`.reshape` that merges the page and in-page dims; unknown otherwise."""
    func = call.func
    assert isinstance(func, cst.Attribute)
    if func.attr.value == "flatten" and flatten_range(call) == (0, 1) and merges_pages(inner, 1):
        return (SLOTS, *inner[2:])
    return unknown_like(inner)


def flatten_range(call: cst.Call) -> Optional[tuple[int, int]]:
    """`(start_dim, end_dim)` of a `.flatten(...)` spelled with literal ints (defaults 0, -1)."""
    values = {"start_dim": 0, "end_dim": -1}
    positional = [arg for arg in call.args if arg.keyword is None]
    for name, arg in zip(("start_dim", "end_dim"), positional):
        number = _int(arg.value)
        if number is None:
            return None
        values[name] = number
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in values:
            number = _int(arg.value)
            if number is None:
                return None
            values[arg.keyword.value] = number
    return values["start_dim"], values["end_dim"]


def _int(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if is_minus_one(expr):
        return -1
    return None


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
