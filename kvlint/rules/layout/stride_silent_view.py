"""KV201 stride-silent-view."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import libcst as cst

from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Replacement, Rule
from kvlint.rules.layout._aliases import bound_in
from kvlint.rules.layout._candidates import MayHoldLayoutFinding
from kvlint.rules.layout._paged_view_fix import paged_view_fix
from kvlint.rules.layout._paged_kv import MAYBE_SLOTS, SLOTS, by_name_only, paged_kv, paged_kv_trigger
from kvlint.rules.layout._view_shape import PAGE_SIZE_WORDS, is_page_split
from kvlint.rules.layout._kept import helper_origin
from kvlint.rules.layout._page_pinned import harmless_view
from kvlint.rules.layout._stride_message import helper_message, no_fix_clause, unsafe_fix_clauses, view_message
from kvlint.rules.layout._through_helpers import helper_uses
from kvlint.api.helpers import PAGE_SPLIT
from kvlint.analysis.index import module_index
from kvlint.api.types import Applicability, Invalid, Severity, Valid

_RUNTIME_SHIM = {"paged-helpers-module": "runtime_shim.paged"}


class StrideSilentView(MayHoldLayoutFinding, Rule):
    """`.view(-1, page_size, ...)` on paged KV is stride-silent, and wrong at page size 1.

    ## What it does
    Flags a `.view(...)` on a paged KV tensor (see below) that splits its slot
    dim into pages: the first argument is `-1` (or a page count such as
    `n // page_size` or `num_pages`), the second a page size (a name or
    attribute containing `page_size`, a `PAGE_SIZE`-style constant, or the
    literal `1` after `-1`), followed by the row: one dim (`view(-1, ps, R)`,
    the MLA row view, flagged too: its row stride is as silent as a head split's) or
    more (`view(-1, ps, H, D)`). A `.view` that keeps the slot
    dim (`k_cache.view(k_cache.shape[0], -1)`) is not flagged, and neither is
    a view that regroups heads into pseudo-pages (that is KV203).

    A paged KV tensor is a value that flows, inside one function, from a pool
    buffer accessor (`get_key_buffer`, `get_value_buffer`, `get_kv_buffer` and
    its tuple unpacking, `k_buffer[...]`, `v_buffer[...]`, `kv_buffer[...]`),
    through assignments, slices and `paged_view`-family results (a nested
    function reads its enclosing function's locals as they stand at its `def`),
    or a parameter named like `k_cache`/`v_cache_raw` (the `kv-name-fallback`).

    The fact survives *tensor-keeping calls*, which return the same tensor or
    one over the same storage with the same strides: `.to(...)` and
    `.type(...)` (and `torch.Tensor.to(x, ...)`: `self` when the dtype and
    device already match, as on the paths that hand a kernel the pool's own
    dtype), `.detach()`, `.requires_grad_()`, and `.view(dtype)` (the same
    bytes reinterpreted; the slot stride is still the whole entry). A copy
    (`.clone()`, an index by a tensor) ends it. It also crosses functions and
    files: the result of a helper whose return may be paged KV (an accessor
    result, a slice of one, a paged helper's result, or a tensor-keeping call
    of one, through any chain of helpers) is paged KV in the caller, and the
    message names the helper and where its buffer comes from. Dim 0 holds
    slots only when the helper returns the accessor's own result; then the fix
    is the same as for a direct view, else there is none.

    The other way round, paged KV passed to a helper that pages its parameter
    (`def _paged(buf, page_size): return buf.view(-1, page_size, 1, 512)`,
    itself or down a chain of helpers it passes the parameter to, across
    files and the class hierarchy) is flagged in the caller, at the argument,
    naming the helper and the `.view` it relies on. The argument must be
    paged KV by a fact, not by the name fallback; a page size the helper takes
    as a parameter must be named as one at the call. Such a finding has no
    fix: the `.view` is the helper's, to be fixed there for every caller.
    A parameter named like a cache is paged KV by its name only: `.to(...)` and
    `.type(...)` of it (a pool view only if the dtype already matches) are not.

    ## Why is this bad?
    Under the token-major pool a per-layer view is strided: its slot stride is
    the whole entry (every layer's K and V of one token). The `.view` does not
    raise. For `page_size > 1` it returns the right shape whose in-page token
    stride is the entry, `2 * layer_num` times the `H*D` the shape suggests; a
    kernel that derives strides from the shape reads bytes that much too close
    together, silently. At `page_size == 1` it is wrong outright: the size-1
    page dim gets the row stride instead of the slot stride, and a later
    `.permute` moves it where the kernel reads the token stride. The paged
    helpers build the view with `as_strided` from the buffer's own strides,
    so dim 1 carries the slot stride at every page size and the code says so.

    At `page_size > 1` the helpers return the very strides the `.view` did:
    the rewrite does not make a kernel that ignores `stride()` correct. That
    needs a stride-parity test of the kernel (contiguous vs over-strided
    cache, equal outputs), as the review thread asked. So a view is not
    flagged where the code pins its page size above 1 on the way to it (a
    module constant, `PAGE_SIZE = 64`; an `if`, `and` chain or `assert`
    testing `page_size == 64`; a backend class the engine only builds for
    backends whose page size its argument handling forces above 1, listed as
    `page-pinned-classes` by `kvlint contract`, or a test that an object is
    an instance of one), nor past a test that the
    tensor is contiguous (a token-major view never is), nor where its result
    is copied at once (`.view(...).contiguous()`, which KV202 judges): there
    it cannot differ from the helpers.

    ## Example
    ```python
    k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)
    k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)
    kv_cache = pool.get_key_buffer(layer.layer_id).view(-1, page_size, kv_lora_rank + qk_rope_head_dim)
    ```

    ## Use instead
    ```python
    k_cache = paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)
    kv_cache = paged_row_view(pool.get_key_buffer(layer.layer_id), page_size)
    ```

    ## Fix safety
    Safe only where dim 0 is known to hold slots: the value is a buffer
    accessor's per-layer `(slots, H, D)` or `(slots, D)` result (or a slice of
    one) of a pool that allocates slot-major buffers. Whether a pool is
    page-split is decided by its class (`page-split-pools`, learned from what
    each pool class allocates: `torch.zeros((layers, pages, page_size, 1, D))`
    is page-split, `(size + page_size, H, D)` is not), and the receiver's class
    by what the file states (a constructor call, an annotation, an attribute
    assigned one, an `assert isinstance(...)`), never by a folder. A buffer of a
    page-split pool, or of an unknown pool in a backend class that meets no other
    (`page-split-only`), is that pool's own contiguous allocation: no finding. So
    is, in a tree with the unified pool's gate, a buffer of a pool whose gate is
    off and whose accessors read its own buffers or those of sub-pools that do
    (built by size from a handed class: never a unified pool). A parameter named like a
    cache may already be `(pages, page_size, H, D)`: the helpers would assert or
    return a wrong shape, so the finding has no fix and its message says what
    kvlint could not know. Where the receiver's
    class is unknown (or a base of a page-split pool) and the tree has a
    page-split pool its backend class may meet (not one built only for other
    backends or platforms: `page-split-apart`), the fix is unsafe and the
    message names that pool; so too where the tree defines no paged helper and
    `paged-helpers-module` is not pinned.

    Where it is offered: on a contiguous buffer each helper returns exactly what the
    `.view` returned (same shape, strides and storage); on a token-major view it returns
    the same shape with the slot stride in the page dims, and raises where the `.view`
    would have raised (a slot count not divisible by the page size, a row that is not `H
    * D`). The forms: `x.view(-1, ps, R)` becomes `paged_row_view(x, ps)` (`R` must be
    the whole row, as it is for every pool buffer); `x.view(-1, ps, H, D)` becomes
    `paged_kv_view(x, ps, H, D)`; `x.view(-1, ps, *x.shape[1:])` becomes `paged_view(x,
    ps)`. When the helpers module defines only `paged_view`, the row is shaped first:
    `paged_view(x.view(x.shape[0], H, D), ps)`; that form names `x` twice, so it is
    offered only when `x` is a plain name. The helper is imported from the contract's
    `paged-helpers-module` unless the file already has it.

    ## Options
    `buffer-accessors`, `kv-name-fallback`, `paged-helpers-module`,
    `page-split-pools` in `[tool.kvlint.contract]`; the helpers the module
    defines and the page-split pools are learned from the scanned tree.
    """

    code = "KV201"
    name = "stride-silent-view"
    severity = Severity.ERROR
    fix_applicability = Applicability.SAFE

    VALID = [
        # Not paged KV: a query, an activation, an unrelated parameter.
        Valid("def f(q, layer, page_size):\n    return q.view(-1, page_size, layer.tp_q_head_num, layer.head_dim)\n"),
        # Keeps the slot dim: only the row is reshaped.
        Valid("def f(pool, layer):\n    k_cache = pool.get_key_buffer(layer.layer_id)\n    return k_cache.view(k_cache.shape[0], -1)\n"),
        Valid("def f(pool, layer):\n    return pool.get_key_buffer(0).view(-1, layer.tp_k_head_num, layer.head_dim)\n"),
        # Already the safe spelling.
        Valid("def f(k_cache, layer):\n    return paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"),
        # A head regroup is KV203's.
        Valid("def f(k_cache, layer, g):\n    return k_cache.view(-1, self.page_size * g, layer.tp_k_head_num // g, layer.head_dim)\n"),
        # A gather by loc is a fresh tensor, not the pool's view.
        Valid("def f(k_cache, loc, page_size):\n    return k_cache[loc].view(-1, page_size, 8, 128)\n"),
        # The second dim is not a page size.
        Valid("def f(k_cache, block):\n    return k_cache.view(-1, block, 8, 128)\n"),
        # The parameter name is not a KV cache name.
        Valid("def f(cache, page_size):\n    return cache.view(-1, page_size, 8, 128)\n"),
        # A local bound to something other than a page size, or to a page size on one path only.
        Valid("def f(self, pool, flag):\n    k = pool.get_key_buffer(0)\n    blk = self.block_len\n"
              "    n = self.page_size if flag else self.chunk\n    return k.view(-1, blk, 8, 128), k.view(-1, n, 8, 128)\n"),
        # Page size pinned above 1 or tensor shown contiguous on the way: the helpers' strides; copied at once: KV202's.
        Valid("PAGE_SIZE = 64\n\ndef f(pool):\n    return pool.get_key_buffer(0).view(-1, PAGE_SIZE, 576)\n"),
        Valid("def f(self, pool, layer):\n    k = pool.get_key_buffer(layer.layer_id)\n"
              "    if self.page_size == 16 and fits(layer):\n        run(k.view(-1, self.page_size, 8, 128))\n"
              "    return self.page_size == 16 and run(k.view(-1, self.page_size, 8, 128))\n"),
        Valid("def f(self, pool):\n    k = pool.get_key_buffer(0).view(-1, self.page_size, 1, 576)\n"
              "    assert self.page_size == 64, 'only page size 64'\n"
              "    return k, pool.get_key_buffer(0).view(-1, self.page_size, 8, 64).contiguous()\n"),
        Valid("def f(pool, page_size):\n    k = pool.get_key_buffer(0)\n    if not k.is_contiguous():\n        return None\n"
              "    return k.view(-1, page_size, 8, 128)\n"),
        # A closure's view of a tensor the enclosing function allocated, named like a cache.
        Valid("def f(self):\n    k_cache = torch.zeros(64, 8, 128)\n\n    def attend():\n        return k_cache.view(-1, self.page_size, 8, 128)\n"),
    ]
    INVALID = [
        Invalid(
            "def decode(self, pool, layer):\n"
            "    k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
            "    k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"
            "    return k_cache\n",
            expected_replacement="from sglang.srt.mem_cache.layout.paged_view import paged_kv_view\n\n"
            "def decode(self, pool, layer):\n"
            "    k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
            "    k_cache = paged_kv_view(k_cache, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"
            "    return k_cache\n",
            line=3,
            column=15,
        ),
        # Page size 1, the case where `.view` and `paged_view` differ in stride(1).
        Invalid(
            "from runtime_shim.paged import paged_kv_view\n\n"
            "def decode(self, layer):\n"
            "    k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)\n"
            "    return v_cache.view(-1, 1, layer.tp_v_head_num, layer.head_dim).permute(0, 2, 1, 3)\n",
            expected_replacement="from runtime_shim.paged import paged_kv_view\n\n"
            "def decode(self, layer):\n"
            "    k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)\n"
            "    return paged_kv_view(v_cache, 1, layer.tp_v_head_num, layer.head_dim).permute(0, 2, 1, 3)\n",
            contract=_RUNTIME_SHIM,
        ),
        # The MLA row view, on a page size constant imported from elsewhere (its value unknown here).
        Invalid(
            "import torch\nfrom .config import PAGE_SIZE\n\n"
            "def decode(pool, layer, kv_lora_rank, qk_rope_head_dim):\n"
            "    kv_cache = pool.get_key_buffer(layer.layer_id)\n"
            "    return kv_cache.view(-1, PAGE_SIZE, kv_lora_rank + qk_rope_head_dim)\n",
            expected_replacement="import torch\nfrom .config import PAGE_SIZE\nfrom runtime_shim.paged import paged_row_view\n\n"
            "def decode(pool, layer, kv_lora_rank, qk_rope_head_dim):\n"
            "    kv_cache = pool.get_key_buffer(layer.layer_id)\n"
            "    return paged_row_view(kv_cache, PAGE_SIZE)\n",
            contract=_RUNTIME_SHIM,
        ),
        # A slice of a buffer, page size a plain local, the whole row spelt as the shape.
        Invalid(
            "def f(self, layer, page_size):\n"
            "    kv = self.kv_buffer[layer.layer_id][:, :, layer.v_head_dim:]\n"
            "    return kv.view(-1, page_size, *kv.shape[1:])\n",
            expected_replacement="from runtime_shim.paged import paged_view\n\n"
            "def f(self, layer, page_size):\n"
            "    kv = self.kv_buffer[layer.layer_id][:, :, layer.v_head_dim:]\n"
            "    return paged_view(kv, page_size)\n",
            contract=_RUNTIME_SHIM,
        ),
        # A multi-line call kept multi-line.
        Invalid(
            "from runtime_shim import paged as P\n\n"
            "def f(self, layer):\n"
            "    k_cache_raw = self.token_to_kv_pool.get_key_buffer(layer.layer_id)\n"
            "    return k_cache_raw.view(\n"
            "        -1,\n"
            "        self.page_size,\n"
            "        layer.tp_k_head_num,\n"
            "        layer.head_dim,\n"
            "    )\n",
            expected_replacement="from runtime_shim import paged as P\n\n"
            "def f(self, layer):\n"
            "    k_cache_raw = self.token_to_kv_pool.get_key_buffer(layer.layer_id)\n"
            "    return P.paged_kv_view(\n"
            "        k_cache_raw,\n"
            "        self.page_size,\n"
            "        layer.tp_k_head_num,\n"
            "        layer.head_dim,\n"
            "    )\n",
            contract=_RUNTIME_SHIM,
        ),
        # Both halves of one `get_kv_buffer`, through a per-layer buffer subscript.
        Invalid(
            "def f(self, layer_id, page_size):\n"
            "    k = self.k_buffer[layer_id]\n"
            "    v = self.v_buffer[layer_id]\n"
            "    return k.view(num_pages, page_size, 8, 128), v.view(k.shape[0] // page_size, page_size, 8, 128)\n",
            expected_replacement="from sglang.srt.mem_cache.layout.paged_view import paged_kv_view\n\n"
            "def f(self, layer_id, page_size):\n"
            "    k = self.k_buffer[layer_id]\n"
            "    v = self.v_buffer[layer_id]\n"
            "    return paged_kv_view(k, page_size, 8, 128), paged_kv_view(v, page_size, 8, 128)\n",
            expected_count=2,
        ),
    ]

    # The forms the forks use: the page size through a local alias (a closure's too), the page count named or computed.
    INVALID += [
        Invalid(
            "def decode(self, pool, layer):\n"
            "    ps = self.page_size\n"
            "    k = pool.get_key_buffer(layer.layer_id)\n"
            "    def attend():\n        return k.view(-1, ps, 8, 128)\n\n"
            "    return k.view(-1, ps, layer.tp_k_head_num, layer.head_dim), attend\n",
            expected_replacement="from runtime_shim.paged import paged_kv_view\n\n"
            "def decode(self, pool, layer):\n"
            "    ps = self.page_size\n"
            "    k = pool.get_key_buffer(layer.layer_id)\n"
            "    def attend():\n        return paged_kv_view(k, ps, 8, 128)\n\n"
            "    return paged_kv_view(k, ps, layer.tp_k_head_num, layer.head_dim), attend\n",
            contract=_RUNTIME_SHIM,
            expected_count=2,
        ),
        Invalid(
            "def decode(self, pool, num_blocks):\n"
            "    ps = self.page_size\n"
            "    k_cache = pool.get_key_buffer(0)\n"
            "    num_pages = k_cache.shape[0] // ps\n"
            "    return k_cache.view(num_pages, ps, 8, 128), k_cache.view(num_blocks, self.page_size, 1024)\n",
            expected_replacement="from runtime_shim.paged import paged_kv_view, paged_row_view\n\n"
            "def decode(self, pool, num_blocks):\n"
            "    ps = self.page_size\n"
            "    k_cache = pool.get_key_buffer(0)\n"
            "    num_pages = k_cache.shape[0] // ps\n"
            "    return paged_kv_view(k_cache, ps, 8, 128), paged_row_view(k_cache, self.page_size)\n",
            contract=_RUNTIME_SHIM,
            expected_count=2,
        ),
    ]
    # Where dim 0 is not known to hold slots the finding stays, with no safe fix.
    INVALID += [
        # A parameter named like a cache (the fallback): its dims are not stated.
        Invalid("def f(self, k_cache_raw, layer):\n    return k_cache_raw.view(-1, self.page_size, 8, 128)\n"),
        # A pool of unknown class in a tree that has a page-split pool: the fix is unsafe.
        Invalid(
            "def f(self, layer):\n"
            "    v = self.token_to_kv_pool.get_value_buffer(layer.layer_id)\n"
            "    return v.view(-1, self.page_size, layer.tp_v_head_num * layer.v_head_dim)\n",
            contract={"page-split-pools": "NPUPool"},
        ),
        # The tree defines no paged helper: the finding says so and its fix is unsafe.
        Invalid(
            "def f(pool, layer, page_size):\n    return pool.get_key_buffer(0).view(-1, page_size, 8, 128)\n",
            contract={"missing": "paged-helpers-module"},
        ),
    ]
    # The pool class the buffer comes from decides, not the folder: a slot-major pool's buffer
    # keeps its fix in a tree with a page-split pool (typed by a constructor or an annotation).
    INVALID += [
        Invalid(
            "class Backend:\n"
            "    def __init__(self, size):\n"
            "        self.pool = MHAPool(size)\n\n"
            "    def decode(self, layer):\n"
            "        k = self.pool.get_key_buffer(layer.layer_id)\n"
            "        return k.view(-1, self.page_size, 8, 128)\n",
            expected_replacement="from runtime_shim.paged import paged_kv_view\n\n"
            "class Backend:\n"
            "    def __init__(self, size):\n"
            "        self.pool = MHAPool(size)\n\n"
            "    def decode(self, layer):\n"
            "        k = self.pool.get_key_buffer(layer.layer_id)\n"
            "        return paged_kv_view(k, self.page_size, 8, 128)\n",
            contract={**_RUNTIME_SHIM, "page-split-pools": "NPUPool"},
        ),
    ]
    VALID += [
        # A buffer of a pool allocating page-split `(pages, page_size, H, D)` buffers (`page-split-pools`,
        # learned from what each pool class allocates), typed or in a class meeting no other pool
        # (`page-split-only`): the pool's own contiguous allocation, where `.view` is exact.
        Valid("def f(self, layer, pool: NPUPool):\n    return pool.get_value_buffer(0).view(-1, self.page_size, 1024)\n",
              contract={"page-split-pools": "NPUPool"}),
        Valid("class Ascend:\n    def f(self, layer):\n        v = self.token_to_kv_pool.get_value_buffer(0)\n"
              "        return v.view(-1, self.page_size, 1024)\n",
              contract={"page-split-pools": "NPUPool", "page-split-only": "Ascend"}),
        # A pool class on its own allocation, in its own method (the NPU pool's scatter):
        # the pool chose that layout; it is not a view the pool hands out.
        Valid(
            "import torch\n\n"
            "class NPUPool(BasePool):\n"
            "    def set_kv_buffer(self, layer_id, loc, cache_v):\n"
            "        torch_npu.npu_scatter_nd_update_(\n"
            "            self.v_buffer[layer_id].view(-1, 1, self.dim), loc.view(-1, 1), cache_v.view(-1, 1, self.dim)\n"
            "        )\n",
            contract={"pool-classes": "BasePool,NPUPool"},
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return ((".view(",), PAGE_SIZE_WORDS, *paged_kv_trigger(contract))

    def check(self, ctx: FileContext) -> None:
        tracker = paged_kv(ctx)
        for site in module_index(ctx).calls("view"):
            call = site.call
            if not isinstance(call.func, cst.Attribute) or not is_page_split(call.args, bound_in(ctx, site.function)):
                continue
            tensor = call.func.value
            layout = tracker.layout(tensor, site.function)
            if layout is None:
                continue
            if harmless_view(ctx, call, site.function):
                continue
            message = view_message(ctx, tensor)
            fix: Optional[Replacement] = None
            origin = tracker.buffer_origin(tensor, site.function)
            if layout[0] not in (SLOTS, MAYBE_SLOTS):
                message += no_fix_clause(ctx, tensor, origin) + by_name_only(layout, ctx.code_for(tensor))
            else:
                fix = paged_view_fix(ctx, call, tensor)
                unsafe = unsafe_fix_clauses(ctx, origin if layout[0] == MAYBE_SLOTS else None) if fix is not None else ""
                if fix is not None and unsafe:
                    message += unsafe
                    fix = replace(fix, applicability=Applicability.UNSAFE)
            ctx.report(call, message + helper_origin(ctx, tensor, site.function), fix)
        for use in helper_uses(ctx, (PAGE_SPLIT,)):
            ctx.report(use.argument, helper_message(ctx, use))
