"""KV202 kv-layout-copy."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.api.contract import Contract
from kvlint.analysis.dataflow import function_flow
from kvlint.analysis.index import CallSite
from kvlint.api.rule import FileContext, Rule
from kvlint.rules.layout._paged_kv import paged_kv, paged_kv_trigger
from kvlint.analysis.index import module_index
from kvlint.api.types import Invalid, Severity, Valid

# Tensor methods that pack a strided input into a new contiguous tensor.
_COPY_METHODS = ("reshape", "contiguous", "flatten")
# `torch.<op>(x, ...)`: the same copies spelt as functions.
_TORCH_FUNCTIONS = ("reshape", "flatten")
# Every spelling above, method or `torch.` function, holds one of these.
_COPY_WORDS = (".reshape(", ".contiguous(", ".flatten(")


class KvLayoutCopy(Rule):
    """`.reshape`/`.contiguous()`/`.flatten` on paged KV packs a copy and drops the entry stride.

    ## What it does
    Flags `x.reshape(...)`, `torch.reshape(x, ...)`, `x.contiguous()`,
    `x.flatten(...)` and `torch.flatten(x, ...)` where `x` is a paged KV
    tensor: a value that flows, inside one function, from a pool buffer
    accessor (`get_key_buffer`, `get_kv_buffer`, `k_buffer[...]`, ...)
    through assignments, slices and `paged_view`-family results, or a
    parameter named like a KV cache (`k_cache`, `kv_cache_raw`, ...).

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
    `buffer-accessors`, `kv-name-fallback` in `[tool.kvlint.contract]`.
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
        Invalid("def f(k_cache):\n    return k_cache.flatten(), k_cache.flatten(0, 1), k_cache.reshape(-1, 128)\n", expected_count=3),
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
            if tensor is None or _keeps_slot_dim(site.call, tensor) or not tracker.holds(tensor, site.function):
                continue
            func = site.call.func
            assert isinstance(func, cst.Attribute)
            copy = ctx.code_for(func) if tensor is not func.value else f".{func.attr.value}()"
            ctx.report(
                site.call,
                f"`{copy}` on paged KV `{ctx.code_for(tensor)}` packs a copy: on a "
                f"token-major pool it drops the entry stride and copies every row, and writes to the copy never "
                f"reach the pool; keep the view (`paged_view`) or make the copy explicit, with a comment saying why",
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
