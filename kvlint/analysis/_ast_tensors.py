"""Tensor expressions on CPython's `ast`, for the project index's summaries.

Which subscripts select within a tensor, which calls keep it, and which calls
are layout-sensitive on paged KV: a `.view(-1, page_size, *row)` page split
(KV201), or a `.contiguous()`/`.flatten`/`.reshape` that packs a copy (KV202).
The spellings are the ones `kvlint.rules.layout` reads on LibCST; here they
only say where a helper uses a parameter that way, for its callers to be
judged with what they pass.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Optional

from kvlint.api.helpers import MERGES_DIM0, PACKS, PAGE_SPLIT

# Calls that return the same tensor (or a view of the same storage): the paged-KV fact survives them.
# `.to`/`.type` return `self` when the dtype and device already match; `.detach()` and
# `.requires_grad_()` share storage; `.view(dtype)` reinterprets the same bytes.
TENSOR_KEEPING = ("to", "type", "detach", "requires_grad_", "view")



@dataclass(frozen=True)
class LayoutUse:
    """Parameter `param` is the tensor of a layout-sensitive call (`kind`) at `line`, spelt `call`."""

    param: str
    line: int
    # PAGE_SPLIT, PACKS or MERGES_DIM0 (`kvlint.api.helpers`).
    kind: str
    call: str
    # A page split whose page size is a parameter of the function: its caller names the page size.
    page_param: str = ""
    # A page split at the literal page size 1, `view(-1, 1, *row)`: also how a page-split
    # `(pages, page_size, ...)` buffer is flattened to token rows, so a page split only of `(slots, ...)`.
    unit_page: bool = False


def keeps(subscript: ast.Subscript) -> bool:
    """Slices and integer literals select within the tensor; other indices gather a copy."""
    index = subscript.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(
        isinstance(part, ast.Slice)
        or (isinstance(part, ast.Constant) and (isinstance(part.value, int) or part.value is Ellipsis))
        for part in parts
    )


def trailing(expr: ast.expr) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def layout_use(call: ast.Call, param_of: Callable[[ast.expr], Optional[str]], params: frozenset[str]) -> Optional[LayoutUse]:
    """The layout-sensitive use `call` makes of a parameter (`param_of` finds it under slices and
    tensor-keeping calls); None when it makes none."""
    func = call.func
    if not isinstance(func, ast.Attribute) or any(isinstance(arg, ast.Starred) for arg in call.args):
        return None
    param = param_of(func.value)
    if param is None:
        return None
    method, args = func.attr, call.args
    text = ast.unparse(call)
    line = call.lineno
    if method == "view":
        page = _page_split(args, params)
        if page is None:
            return None
        return LayoutUse(param, line, PAGE_SPLIT, text, page, unit_page=isinstance(args[1], ast.Constant))
    if method == "contiguous":
        return LayoutUse(param, line, PACKS, text)
    if method == "flatten":
        span = _flatten_span(call)
        if span is None or span[0] != 0:
            return None
        return LayoutUse(param, line, PACKS if span[1] == -1 else MERGES_DIM0, text)
    if method == "reshape" and args and not call.keywords and not _keeps_slot_or_row(args):
        return LayoutUse(param, line, MERGES_DIM0, text)
    return None


def _page_split(args: list[ast.expr], params: frozenset[str]) -> Optional[str]:
    """For `view(-1, page_size, *row)` (no head regroup): "" when the page size is spelt so, the
    parameter's name when a parameter gives it; None for any other view."""
    if len(args) < 3 or not _page_count(args[0]):
        return None
    page = args[1]
    if _regroups(args):
        return None
    if isinstance(page, ast.Constant) and page.value == 1 and _minus_one(args[0]):
        # With a page size named further on (`view(-1, 1, H * D // 16, page_size, 16)`, NPU's NZ
        # format) the 1 is a singleton dim of another layout, not the page size.
        return None if any(_names_page_size(arg) for arg in args[2:]) else ""
    if _names_page_size(page):
        return ""
    if isinstance(page, ast.Name) and page.id in params:
        return page.id
    return None


def is_page_size(expr: ast.expr) -> bool:
    """A page size as a caller spells it: named like one, or the literal 1."""
    return (isinstance(expr, ast.Constant) and expr.value == 1) or _names_page_size(expr)


def _names_page_size(expr: ast.expr) -> bool:
    name = trailing(expr)
    return name is not None and ("page_size" in name or "PAGE_SIZE" in name)


def _minus_one(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant) and expr.operand.value == 1
    )


def _page_count(expr: ast.expr) -> bool:
    if _minus_one(expr):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.FloorDiv):
        return is_page_size(expr.right)
    name = trailing(expr)
    return name is not None and ("pages" in name.lower() or "blocks" in name.lower())


def _regroups(args: list[ast.expr]) -> bool:
    """A factor moved between the page dim and the head dim (KV203's, not a page split)."""
    def heads(expr: ast.expr) -> bool:
        name = trailing(expr)
        return name is not None and "head" in name.lower() and "dim" not in name.lower()

    page = args[1]
    if isinstance(page, ast.BinOp) and isinstance(page.op, ast.Mult):
        return True
    for arg in args[2:-1]:
        if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.FloorDiv, ast.Div, ast.Mult)):
            if heads(arg.left) or heads(arg.right):
                return True
    last = args[-1]
    return isinstance(last, ast.BinOp) and isinstance(last.op, (ast.FloorDiv, ast.Div)) and (
        heads(last.left) or heads(last.right)
    )


def _flatten_span(call: ast.Call) -> Optional[tuple[int, int]]:
    """`(start_dim, end_dim)` of a `.flatten(...)` spelt with literal ints (defaults 0, -1)."""
    values = {"start_dim": 0, "end_dim": -1}
    named = [(name, arg) for name, arg in zip(("start_dim", "end_dim"), call.args)]
    named += [(keyword.arg or "", keyword.value) for keyword in call.keywords]
    for name, arg in named:
        number = _int(arg)
        if name not in values or number is None:
            return None
        values[name] = number
    return values["start_dim"], values["end_dim"]


def _int(expr: ast.expr) -> Optional[int]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    return -1 if _minus_one(expr) else None


def _keeps_slot_or_row(args: list[ast.expr]) -> bool:
    """`reshape(x.shape[0], -1)` keeps the slot dim; `reshape(-1, 1, x.shape[-2], x.shape[-1])`
    keeps the row: neither crosses the slot stride."""
    shape = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else args
    if not shape:
        return True
    first = shape[0]
    if isinstance(first, ast.Subscript) and trailing(first.value) == "shape":
        return isinstance(first.slice, ast.Constant) and first.slice.value == 0
    if isinstance(first, ast.Call) and trailing(first.func) == "size":
        return len(first.args) == 1 and isinstance(first.args[0], ast.Constant) and first.args[0].value == 0
    own = [d for d in shape if isinstance(d, ast.Subscript) and trailing(d.value) == "shape" and isinstance(d.slice, ast.UnaryOp)]
    return len(own) >= 2 and shape[-len(own):] == own
