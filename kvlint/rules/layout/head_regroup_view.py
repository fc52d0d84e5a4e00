"""KV203 head-regroup-view."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Rule
from kvlint.rules.layout._aliases import bound_in
from kvlint.rules.layout._candidates import MayHoldLayoutFinding
from kvlint.rules.layout._paged_kv import by_name_only, paged_kv, paged_kv_trigger
from kvlint.rules.layout._view_shape import REGROUP_WORDS, is_head_regroup
from kvlint.analysis.index import module_index
from kvlint.analysis.walk import code_children
from kvlint.api.types import Invalid, Severity, Valid


class HeadRegroupView(MayHoldLayoutFinding, Rule):
    """A `.view` that regroups heads into pseudo-pages cannot be expressed on a token-major view.

    ## What it does
    Flags a `.view(...)` on a paged KV tensor (as KV201 defines it) that
    pages the slot dim while moving a factor between heads and pages: a
    head-count argument divided or multiplied by something other than a head
    dim (`layer.tp_k_head_num // head_group_num`), or a factor merged into the
    page dim (`self.page_size * head_group_num`).

    ## Why is this bad?
    Such a view is a flat re-chunk of the (token, head) plane: walking the new
    page axis crosses a slot boundary every `head_group_num` steps. On a
    contiguous buffer both steps cost `H*D` elements, so one stride per dim
    describes it; under the token-major pool the slot step is the whole entry,
    so no stride does. The `.view` raises ("view size is not compatible with
    input tensor's size and stride") on a strided view, `as_strided` cannot
    express it, and `.reshape()` would pack a copy and drop the entry stride.

    ## Example
    ```python
    key_cache = key_cache.view(
        -1, self.page_size * head_group_num, layer.tp_k_head_num // head_group_num, layer.head_dim
    )
    ```

    ## Use instead
    State the exclusion, with the strides in the message, next to the view:
    ```python
    assert key_cache.is_contiguous(), (
        f"head_group_num={head_group_num} needs a contiguous paged KV view; "
        f"got strides {key_cache.stride()}"
    )
    ```
    `is_contiguous()` is the exact condition: for a paged KV view it holds
    precisely when the slot stride is `heads * head_dim`.

    ## Fix safety
    No fix: the right answer (exclude the layout, or give this path its own
    contiguous pool) is the author's call.

    ## Options
    `buffer-accessors`, `kv-name-fallback` in `[tool.kvlint.contract]`.
    """

    code = "KV203"
    name = "head-regroup-view"
    severity = Severity.ERROR

    VALID = [
        # The query is not paged KV.
        Valid("def f(q, g, layer):\n    return q.view(-1, g, layer.tp_q_head_num // g, layer.head_dim)\n"),
        # Heads merged with the head dim into one row: a row view (KV201's), not a regroup.
        Valid("def f(k_cache, layer):\n    return k_cache.view(-1, self.page_size, layer.tp_k_head_num * layer.head_dim)\n"),
        # The exclusion is stated, as the review thread asked.
        Valid(
            "def f(key_cache, g, layer):\n"
            "    assert key_cache.is_contiguous(), key_cache.stride()\n"
            "    return key_cache.view(-1, self.page_size, layer.tp_k_head_num // g, layer.head_dim)\n"
        ),
        # Heads merged with the latent into one row: a row view.
        Valid("def f(kv_cache, layer):\n    return kv_cache.view(-1, self.page_size, layer.tp_k_head_num * self.kv_lora_rank)\n"),
        # Keeps the slot dim: the regroup stays inside one row.
        Valid("def f(k_cache, g, layer):\n    return k_cache.view(k_cache.shape[0], layer.tp_k_head_num // g, -1)\n"),
    ]
    INVALID = [
        Invalid(
            "def get_paged_kv_cache(self, layer, head_group_num):\n"
            "    key_cache, value_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)\n"
            "    key_cache = key_cache.view(\n"
            "        -1,\n"
            "        self.page_size * head_group_num,\n"
            "        layer.tp_k_head_num // head_group_num,\n"
            "        layer.head_dim,\n"
            "    )\n"
            "    return key_cache\n",
            line=3,
        ),
        # A head count named `H`, split by a factor named after heads.
        Invalid(
            "def regroup(pool, layer, page_size, H, D, head_group_num):\n"
            "    k_cache = paged_kv_view(pool.get_key_buffer(layer.layer_id), page_size, H, D)\n"
            "    return k_cache.view(-1, page_size, H // head_group_num, D)\n",
            line=3,
        ),
        # Only the head count is divided; the page size is plain.
        Invalid("def f(v_cache, page_size, g, layer):\n    return v_cache.view(-1, page_size, layer.tp_v_head_num // g, layer.v_head_dim)\n"),
        # A factor merged into the page dim, heads split in two dims.
        Invalid("def f(pool, g, page_size):\n    return pool.get_value_buffer(0).view(-1, page_size * g, 2, 128)\n"),
        # The page size through a local alias, the page count named as blocks.
        Invalid(
            "def f(self, pool, g, num_blocks):\n"
            "    ps = self.page_size\n"
            "    return pool.get_value_buffer(0).view(num_blocks, ps * g, 2, 128)\n"
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return ((".view(",), REGROUP_WORDS, *paged_kv_trigger(contract))

    def check(self, ctx: FileContext) -> None:
        tracker = paged_kv(ctx)
        for site in module_index(ctx).calls("view"):
            call = site.call
            if not isinstance(call.func, cst.Attribute) or not is_head_regroup(call.args, bound_in(ctx, site.function)):
                continue
            tensor = call.func.value
            layout = tracker.layout(tensor, site.function)
            if layout is None:
                continue
            if ctx.source_of(tensor) in _asserted_contiguous(ctx, site.function):
                continue
            name = ctx.code_for(tensor)
            ctx.report(
                call,
                f"this `.view` regroups heads of paged KV `{name}` into pseudo-pages: it raises on a token-major "
                f"(strided) view and no single stride can express it; state the exclusion, e.g. "
                f'`assert {name}.is_contiguous(), f"head regroup needs a contiguous paged KV view; '
                f'strides {{{name}.stride()}}"`' + by_name_only(layout, name),
            )


def _asserted_contiguous(ctx: FileContext, function: Optional[cst.FunctionDef]) -> frozenset[str]:
    """Tensors (as source text) the function asserts `.is_contiguous()` of: the exclusion is stated."""
    if function is None:
        return frozenset()

    def build() -> frozenset[str]:
        found = set()
        for check in _descendants(function):
            if not isinstance(check, cst.Assert):
                continue
            for call in _descendants(check):
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "is_contiguous":
                    found.add(ctx.source_of(call.func.value))
        return frozenset(found)

    return ctx.analysis(("asserted-contiguous", id(function)), build)


def _descendants(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    # `libcst.matchers` would do, but importing it costs half a second of every run that checks a file.
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(code_children(node))
