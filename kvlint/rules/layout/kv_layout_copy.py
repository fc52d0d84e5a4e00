"""KV202 kv-layout-copy."""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from kvlint.api.contract import Contract
from kvlint.analysis.dataflow import function_flow
from kvlint.analysis.index import CallSite
from kvlint.api.rule import FileContext, Rule
from kvlint.rules.layout._candidates import MayHoldLayoutFinding
from kvlint.rules.layout._paged_kv import (
    IN_PAGE,
    PAGES,
    REST,
    ROW,
    SLOTS,
    Layout,
    by_name_only,
    flatten_range,
    merges_pages,
    paged_kv,
    paged_kv_trigger,
)
from kvlint.rules.layout._view_shape import is_minus_one
from kvlint.rules.layout._kept import helper_origin
from kvlint.rules.layout._through_helpers import NO_FIX_AT_CALL, helper_uses
from kvlint.api.helpers import MERGES_DIM0, PACKS
from kvlint.analysis.index import module_index
from kvlint.api.types import Invalid, Severity, Valid

# Tensor methods that pack a strided input into a new contiguous tensor.
_COPY_METHODS = ("reshape", "contiguous", "flatten")
# `torch.<op>(x, ...)`: the same copies spelt as functions.
_TORCH_FUNCTIONS = ("reshape", "flatten")
# Every spelling above, method or `torch.` function, holds one of these.
_COPY_WORDS = (".reshape(", ".contiguous(", ".flatten(")


class KvLayoutCopy(MayHoldLayoutFinding, Rule):
    """`.reshape`/`.contiguous()`/`.flatten` on paged KV packs a copy and drops the entry stride.

    ## What it does
    Flags `x.reshape(...)`, `torch.reshape(x, ...)`, `x.contiguous()`,
    `x.flatten(...)` and `torch.flatten(x, ...)` where `x` is a paged KV
    tensor: a value that flows, inside one function, from a pool buffer
    accessor (`get_key_buffer`, `get_kv_buffer`, `k_buffer[...]`, ...)
    through assignments, slices and `paged_view`-family results, or a
    parameter named like a KV cache (`k_cache`, `kv_cache_raw`, ...), kept
    through tensor-keeping calls (`.to`, `.type`, `.detach()`,
    `.requires_grad_()`, `.view(dtype)`: each returns a tensor over the same
    storage with the same strides) and out of helpers that return paged KV,
    in this file or another (the message then names the helper). Paged KV
    passed to a helper that packs its parameter (itself or down a chain of
    helpers) is flagged in the caller, at the argument, naming the helper and
    the call it relies on; the argument must be paged KV by a fact, not by the
    name fallback, and a merge of its dim 0 with the next counts only where
    dim 0 holds slots. A parameter named like a cache is paged KV by its name
    only: `.to(...)`/`.type(...)` of it (a pool view only if the dtype already
    matches) is not.

    Only a call that really packs across the slot stride is flagged, as far as
    the code states the tensor's dims (see `kvlint explain KV201` for what
    counts as paged KV and how its layout is tracked): `.contiguous()`, a
    `.flatten()` of every dim, and a `.flatten(0, e)`/`.reshape` that merges
    the slot dim (or the in-page dim) with a row dim. Merging the page and
    in-page dims of a page view (`.flatten(0, 1)`, `.reshape(-1, H, D)` of a
    `(pages, page_size, H, D)` view) is a view on a token-major pool and is
    silent; so is a reshape that keeps the tensor's last two dims as they are
    (`x.reshape(-1, 1, x.shape[-2], x.shape[-1])`). Where the code does not
    say what dim 0 holds (a parameter named like a cache; a buffer of a pool
    that allocates page-split buffers, or may: its class unknown in a tree that
    has such pools), only `.contiguous()` and a whole `.flatten()` are reported.

    Not pool views, never flagged: a host cache's buffers (`HostKVCache` and
    its subclasses, by class hierarchy across the tree, `host-cache-classes`)
    and, inside a pool class's own methods, `self.k_buffer[...]` /
    `self.get_key_buffer(...)`: the pool's own allocation (`pool-classes`,
    learned as the classes that assign or index a buffer attribute of their
    own, and their subclasses); and, in a tree with the unified pool's gate,
    a buffer of a pool whose gate is off and whose accessors read its own
    buffers or those of sub-pools that do (a receiver typed as such a class:
    a constructor, an annotation, an `assert isinstance(...)`).

    ## Why is this bad?
    On a contiguous per-layer buffer these calls return a view, so code that
    used them read and wrote the pool itself. Under the token-major pool the
    per-layer view is strided with the whole entry as its slot stride, so each
    of them silently packs a copy instead: `.contiguous()` on a sub-pool view
    copies the whole sub-pool (every layer, every step), `.reshape` "works"
    where `.view` would have raised, and anything written into the result
    never reaches the pool. A kernel handed the copy sees correct values at a
    cost no profile of the old layout showed.

    ## Example
    ```python
    k_cache = pool.get_key_buffer(layer.layer_id).contiguous()
    v_rows = v_cache.reshape(-1, layer.head_dim)
    ```

    ## Use instead
    Keep the view and let the kernel take strides (`paged_view`,
    `paged_kv_view`, `paged_row_view` build paged shapes with the slot
    stride), or make the copy explicit where it is really wanted:
    ```python
    k_cache = paged_kv_view(pool.get_key_buffer(layer.layer_id), page_size, H, D)
    # A packed copy on purpose: the prefix kernel needs contiguous rows.
    v_rows = v_cache.clone(memory_format=torch.contiguous_format).view(-1, layer.head_dim)
    ```

    ## Fix safety
    No fix: whether the kernel can take a strided view, or the copy is
    wanted, is a decision only the author can make.

    ## Options
    `buffer-accessors`, `kv-name-fallback`, `pool-classes`, `host-cache-classes`
    and `page-split-pools` in `[tool.kvlint.contract]`, e.g.
    `host-cache-classes = ["HostKVCache", "CpuPageCache"]` where a codebase
    spells its host caches differently (their subclasses are found in the
    tree), `pool-classes = [...]` to replace the learned list.
    """

    code = "KV202"
    name = "kv-layout-copy"
    severity = Severity.WARNING

    VALID = [
        # Unrelated tensors.
        Valid("def f(q, layer):\n    return q.reshape(-1, layer.tp_q_head_num * layer.head_dim)\n"),
        Valid("import torch\n\ndef f(x):\n    return torch.reshape(x, (-1, 8)).contiguous()\n"),
        # A gathered set of rows is already a fresh tensor.
        Valid("def f(k_cache, loc):\n    return k_cache[loc].contiguous()\n"),
        # Reshaping only the row keeps the slot dim: a view even on a token-major buffer.
        Valid("def f(pool):\n    k = pool.get_key_buffer(0)\n    return k.view(k.shape[0], -1)\n"),
        Valid("def f(pool):\n    return pool.get_key_buffer(0).flatten(1), pool.get_value_buffer(0).flatten(start_dim=1)\n"),
        Valid("def f(k_cache):\n    return k_cache.reshape(k_cache.shape[0], -1), k_cache.reshape((k_cache.size(0), -1))\n"),
        Valid("import torch\n\ndef f(k_cache):\n    return torch.reshape(k_cache, (k_cache.shape[0], -1))\n"),
        # A local named like an accessor is a tensor; indexing it by loc gathers a copy.
        Valid("def f(pool, loc):\n    k_buffer, v_buffer = pool.get_kv_buffer(0)\n    k = k_buffer[loc]\n    return k.contiguous()\n"),
        # Merging the page and in-page dims of a page view is a view on a token-major pool.
        Valid(
            "def f(pool, layer, page_size):\n"
            "    k = pool.get_key_buffer(layer.layer_id).view(-1, page_size, 8, 128)\n"
            "    return k.flatten(0, 1), k.reshape(-1, 8, 128)\n"
        ),
        Valid("def f(self, page_size):\n    return paged_view(self.kv_buffer[0], page_size).flatten(0, 1)\n"),
        # The row kept as the tensor's own last dims: only token dims merge (a page view to page size 1).
        Valid("def f(key_cache):\n    return key_cache.reshape(-1, 1, key_cache.shape[-2], key_cache.shape[-1])\n"),
        # Dims not stated (a cache-named parameter, a buffer of a page-split pool): a merge of the
        # first two dims may be the page merge, so it is not reported.
        Valid("def f(k_cache, loc):\n    return k_cache.flatten(0, 1)[loc]\n"),
        Valid(
            "class Backend:\n"
            "    swa_kv_pool: NPUPool\n\n"
            "    def f(self, i):\n"
            "        return self.swa_kv_pool.kv_buffer[i].flatten(0, 1)\n",
            contract={"page-split-pools": "NPUPool"},
        ),
        # A host cache's pages (`HostKVCache` and its subclasses) are CPU copies, not pool views.
        Valid(
            "class MHATokenToKVPoolHost(HostKVCache):\n"
            "    def get_data_page(self, index, flat=True):\n"
            "        data_page = self.kv_buffer[index]\n"
            "        return data_page.flatten() if flat else data_page\n",
            contract={"host-cache-classes": "HostKVCache,MHATokenToKVPoolHost"},
        ),
        # A pool's own allocation inside its own method.
        Valid(
            "class NPUPool(BasePool):\n"
            "    def offload_buffers(self, i):\n"
            "        return [self.k_buffer[i].flatten(0, 1), self.v_buffer[i].flatten(0, 1)]\n",
            contract={"pool-classes": "NPUPool"},
        ),
        # A model's own cache, whatever its name: allocated by the code (`register_buffer`,
        # `torch.zeros`), and a helper parameter every call in the file feeds one of them.
        Valid(
            "import torch\n\n"
            "class Attention(nn.Module):\n"
            "    def __init__(self):\n"
            '        self.register_buffer("k_cache", torch.zeros(8, 4096, 4, 64))\n'
            "        self.v_cache = torch.zeros(8, 4096, 4, 64)\n\n"
            "    def forward(self, q, n):\n"
            "        k_cache = self.k_cache[:, :n]\n"
            "        return self._attend(q, k_cache, self.v_cache[:, :n]), self.k_cache[:, :n].contiguous()\n\n"
            "    def _attend(self, q, k_cache, v_cache):\n"
            "        return fused(q, k_cache.contiguous(), v_cache.contiguous())\n"
        ),
        # `torch` shadowed by a parameter is not the torch module.
        Valid("import torch\n\ndef f(torch, k_cache):\n    return torch.reshape(k_cache, (-1,))\n"),
    ]
    INVALID = [
        Invalid(
            "def f(self, layer):\n    return self.token_to_kv_pool.get_key_buffer(layer.layer_id).contiguous()\n",
            line=2,
            column=12,
        ),
        Invalid(
            "def f(pool, layer):\n"
            "    k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
            "    return k_cache.flatten(0, 1), v_cache.reshape(-1, layer.head_dim)\n",
            expected_count=2,
        ),
        Invalid(
            "import torch\n\ndef f(pool, n):\n    k = pool.get_key_buffer(0)[:n]\n    return torch.reshape(k, (-1, 128))\n",
        ),
        Invalid("def f(kv_cache, layer):\n    return kv_cache[:, :, layer.v_head_dim:].contiguous()\n"),
        # A parameter named like a cache has no stated dims: only merging every dim is known to pack.
        Invalid("def f(k_cache):\n    return k_cache.flatten(), k_cache.flatten(0, 1), k_cache.reshape(-1, 128)\n", expected_count=1),
        # A per-layer buffer is `(slots, row)`: merging the slot dim with the row packs a copy.
        Invalid(
            "def f(pool):\n    k = pool.get_key_buffer(0)\n    return k.flatten(0, 1), k.reshape(-1, 128)\n", expected_count=2
        ),
        # Merging pages, in-page and head dims crosses the slot stride (a start of 1 is not judged).
        Invalid(
            "def f(pool, page_size):\n"
            "    k = paged_kv_view(pool.get_key_buffer(0), page_size, 8, 128)\n"
            "    return k.flatten(1, 2), k.flatten(0, 2)\n",
        ),
        Invalid(
            "from runtime_shim.paged import paged_view\n\n"
            "def f(self, page_size):\n    return paged_view(self.kv_buffer[0], page_size).contiguous()\n"
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return (_COPY_WORDS, *paged_kv_trigger(contract))

    def check(self, ctx: FileContext) -> None:
        tracker = paged_kv(ctx)
        for site in module_index(ctx).calls(*_COPY_METHODS):
            tensor = _copied_tensor(ctx, site)
            if tensor is None or _keeps_slot_dim(site.call, tensor):
                continue
            layout = tracker.layout(tensor, site.function)
            if layout is None or not _packs(site.call, tensor, layout):
                continue
            func = site.call.func
            assert isinstance(func, cst.Attribute)
            copy = ctx.code_for(func) if tensor is not func.value else f".{func.attr.value}()"
            ctx.report(
                site.call,
                f"`{copy}` on paged KV `{ctx.code_for(tensor)}` packs a copy: on a "
                f"token-major pool it drops the entry stride and copies every row, and writes to the copy never "
                f"reach the pool; keep the view (`paged_view`) or make the copy explicit, with a comment saying why"
                + by_name_only(layout, ctx.code_for(tensor)) + helper_origin(ctx, tensor, site.function),
            )
        for use in helper_uses(ctx, (PACKS, MERGES_DIM0)):
            ctx.report(
                use.argument,
                f"paged KV `{ctx.code_for(use.argument)}` is packed into a copy by {use.relied_on()}: on a "
                f"token-major pool that drops the entry stride and copies every row, and writes to the copy never "
                f"reach the pool; keep the view (`paged_view`) or make the copy explicit, with a comment saying why; "
                f"{NO_FIX_AT_CALL}" + helper_origin(ctx, use.argument, use.function),
            )


def _copied_tensor(ctx: FileContext, site: CallSite) -> Optional[cst.BaseExpression]:
    """The tensor a copy call packs: `x` in `x.reshape(...)` or in `torch.reshape(x, ...)`."""
    func = site.call.func
    if not isinstance(func, cst.Attribute):
        return None
    receiver = func.value
    if not _is_torch_module(ctx, site, receiver):
        return receiver
    args = site.call.args
    if func.attr.value not in _TORCH_FUNCTIONS or not args or args[0].keyword is not None or args[0].star:
        return None
    return args[0].value


def _is_torch_module(ctx: FileContext, site: CallSite, expr: cst.BaseExpression) -> bool:
    """`expr` names the imported `torch` module, not a local or parameter shadowing it."""
    if not isinstance(expr, cst.Name) or module_index(ctx).imports.get(expr.value) != "torch":
        return False
    return site.function is None or function_flow(ctx, site.function).reaching(expr) is None


def _packs(call: cst.Call, tensor: cst.BaseExpression, layout: Layout) -> bool:
    """Whether the call packs across the slot stride, as far as `layout` says.

    `.contiguous()` always copies a strided view. `.flatten(0, e)` and
    `.reshape` merge dims: merging the page and in-page dims of a page view is
    a view (the in-page stride times the page size is the page stride); merging
    a slot or in-page dim with a row dim is a copy. Where the layout does not
    say what dim 0 holds (a parameter named like a cache, a buffer of a
    page-split pool), only a merge of every dim is known to pack.
    """
    func = call.func
    assert isinstance(func, cst.Attribute)
    method = func.attr.value
    if method == "contiguous":
        return True
    if method == "flatten":
        span = flatten_range(call)
        if span is None:
            return layout[0] == SLOTS
        start, end = span
        if end == -1:
            return True
        merges = merges_pages(layout, end)
        return merges is False
    args = [arg for arg in call.args if arg.keyword is None][0 if func.value is tensor else 1 :]
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)):
        args = [cst.Arg(element.value) for element in args[0].value.elements]
    if _keeps_trailing_row(args, tensor):
        return False
    if layout[:2] == (PAGES, IN_PAGE) and ROW in layout and REST not in layout:
        # `(pages, in-page, *row)` to `(-1, *row)`: the page merge, a view.
        row = len(layout) - 2
        return not (len(args) == row + 1 and is_minus_one(args[0].value))
    return layout[0] == SLOTS


def _keeps_trailing_row(args: Sequence[cst.Arg], tensor: cst.BaseExpression) -> bool:
    """`x.reshape(-1, 1, x.shape[-2], x.shape[-1])`: the last dims of `x` kept as they are (at least two,
    a whole `(H, D)` row), the leading ones `-1` or `1`: only token dims merge, a view."""
    kept = 0
    for arg in reversed(args):
        if _is_own_dim(arg.value, tensor, -(kept + 1)):
            kept += 1
        else:
            break
    leading = args[: len(args) - kept]
    return kept >= 2 and bool(leading) and all(
        is_minus_one(arg.value) or (isinstance(arg.value, cst.Integer) and arg.value.evaluated_value == 1)
        for arg in leading
    )


def _is_own_dim(expr: cst.BaseExpression, tensor: cst.BaseExpression, index: int) -> bool:
    """`tensor.shape[index]` or `tensor.size(index)` for a negative literal `index`."""
    def negative(value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.UnaryOperation)
            and isinstance(value.operator, cst.Minus)
            and isinstance(value.expression, cst.Integer)
            and -int(value.expression.evaluated_value) == index
        )

    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        element = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            isinstance(element, cst.Index) and negative(element.value) and expr.value.value.deep_equals(tensor)
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size":
        return len(expr.args) == 1 and negative(expr.args[0].value) and expr.func.value.deep_equals(tensor)
    return False


def _keeps_slot_dim(call: cst.Call, tensor: cst.BaseExpression) -> bool:
    """`x.flatten(1)`, `x.reshape(x.shape[0], -1)`: only the row is reshaped.

    Merging dims inside one row never crosses the slot stride, so torch
    returns a view on a token-major buffer too: no copy to report.
    """
    func = call.func
    assert isinstance(func, cst.Attribute)
    # `torch.op(x, ...)` takes the tensor first; the method form does not.
    args = [arg for arg in call.args if arg.keyword is None][0 if func.value is tensor else 1 :]
    if func.attr.value == "flatten":
        start = next((arg.value for arg in call.args if arg.keyword and arg.keyword.value == "start_dim"), None)
        if start is None and args:
            start = args[0].value
        return isinstance(start, cst.Integer) and start.evaluated_value >= 1
    if func.attr.value == "reshape" and args:
        first = args[0].value
        if len(args) == 1 and isinstance(first, (cst.Tuple, cst.List)) and first.elements:
            first = first.elements[0].value
        return _is_slot_count(first)
    return False


def _is_slot_count(expr: cst.BaseExpression) -> bool:
    """`t.shape[0]` or `t.size(0)`."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.evaluated_value == 0
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size":
        return (
            len(expr.args) == 1
            and isinstance(expr.args[0].value, cst.Integer)
            and expr.args[0].value.evaluated_value == 0
        )
    return False
