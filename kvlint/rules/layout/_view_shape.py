"""What the shape arguments of a `.view(...)` on paged KV say.

A paged KV tensor is `(num_slots, *row)`. A view that pages it splits the
slot dim: `view(-1, page_size, *row)`. KV201 flags that split; KV203 flags the
variant that also moves a factor between the head dim and the page dim, which
no single stride per dim can express once the slot stride is a whole entry.
The two are exclusive: a regroup is reported by KV203 only.

The predicates read spelling, not values: a page size is what is *named*
like one (`page_size`, `self.page_size`, `PAGE_SIZE`) or the literal `1`, and
a page count is `-1`, a floor division by a page size, or a name counting pages
or blocks (`num_pages`, `num_blocks`). A local bound to one of those names
(`ps = self.page_size`, `n = k.shape[0] // ps`) counts as what it is bound to:
the caller passes `bound`, which answers from the function's data flow.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import libcst as cst

from kvlint.analysis.index import trailing_name


def is_minus_one(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
        and expr.expression.evaluated_value == 1
    )


# Words a file must hold for a `.view` in it to page a tensor. The literal page
# size 1 counts only spelled `-1, 1` (or `-1,1`), so the prefilter can see it.
PAGE_SIZE_WORDS = ("page_size", "PAGE_SIZE", "-1, 1", "-1,1")
# Words of a head regroup: a head-count name, or a factor merged into a named page size.
REGROUP_WORDS = ("head", "Head", "HEAD", "page_size", "PAGE_SIZE")


# The one value a local name is bound to where the view is (None: a parameter, several
# definitions, or not a local): how `ps = self.page_size` makes `ps` a page size.
Bound = Callable[["cst.Name"], Optional["cst.BaseExpression"]]
# How many aliases deep a name is followed (`ps = page_size = self.page_size`).
ALIAS_DEPTH = 4


def unbound(_name: cst.Name) -> Optional[cst.BaseExpression]:
    """No local is followed: the spelling alone decides."""
    return None


def is_page_size(expr: cst.BaseExpression, bound: Bound = unbound) -> bool:
    """`page_size`, `self.page_size`, `PAGE_SIZE`, `pool.index_page_size`, a local bound to one, or the literal `1`."""
    if isinstance(expr, cst.Integer):
        return expr.evaluated_value == 1
    return _names_page_size(expr, bound)


def _names_page_size(expr: cst.BaseExpression, bound: Bound = unbound) -> bool:
    return _named(expr, bound, lambda name: "page_size" in name or "PAGE_SIZE" in name)


def _named(expr: cst.BaseExpression, bound: Bound, test: Callable[[str], bool], depth: int = 0) -> bool:
    """Whether `expr`'s trailing name passes `test`, or it is a local bound to an expression whose does."""
    name = trailing_name(expr)
    if name is not None and test(name):
        return True
    value = bound(expr) if isinstance(expr, cst.Name) and depth < ALIAS_DEPTH else None
    return value is not None and _named(value, bound, test, depth + 1)


def is_page_count(expr: cst.BaseExpression, bound: Bound = unbound, depth: int = 0) -> bool:
    """The leading dim of a paged view: `-1`, `n // page_size`, a name like `num_pages` or
    `num_blocks`, or a local bound to one of those."""
    if is_minus_one(expr):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.FloorDivide):
        return is_page_size(expr.right, bound)
    name = trailing_name(expr)
    if name is not None and ("pages" in name.lower() or "blocks" in name.lower()):
        return True
    value = bound(expr) if isinstance(expr, cst.Name) and depth < ALIAS_DEPTH else None
    return value is not None and is_page_count(value, bound, depth + 1)


def _names_head_count(expr: cst.BaseExpression) -> bool:
    name = trailing_name(expr)
    return name is not None and "head" in name.lower() and "dim" not in name.lower()


def _names_dim(expr: cst.BaseExpression) -> bool:
    name = trailing_name(expr)
    return name is not None and "dim" in name.lower()


def _regroups_heads(expr: cst.BaseExpression, last: bool) -> bool:
    """`heads // g`, `heads / g`, or `heads * g` followed by more dims, `g` not a head dim.

    As the last dim, or times a head dim, `heads * x` merges whole heads into
    one row (`view(-1, ps, H * D)`, `view(-1, ps, H * kv_lora_rank)`): a row
    view, not a regroup.
    """
    if not isinstance(expr, cst.BinaryOperation):
        return False
    if isinstance(expr.operator, (cst.FloorDivide, cst.Divide)):
        # `heads // g` or `H // head_group_num`: either side says it splits heads.
        return _names_head_count(expr.left) or _names_head_count(expr.right)
    if isinstance(expr.operator, cst.Multiply) and not last:
        sides = (expr.left, expr.right)
        return any(_names_head_count(side) for side in sides) and not any(_names_dim(side) for side in sides)
    return False


def _merges_into_page_dim(expr: cst.BaseExpression, bound: Bound) -> bool:
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Multiply)
        and (_names_page_size(expr.left, bound) or _names_page_size(expr.right, bound))
    )


def is_head_regroup(args: Sequence[cst.Arg], bound: Bound = unbound) -> bool:
    """A paging view that regroups heads: `view(-1, ps * g, heads // g, D)` and kin."""
    if len(args) < 2 or any(arg.keyword is not None or arg.star for arg in args):
        return False
    if not is_page_count(args[0].value, bound):
        return False
    last = len(args) - 1
    return _merges_into_page_dim(args[1].value, bound) or any(
        _regroups_heads(arg.value, i == last) for i, arg in enumerate(args) if i >= 1
    )


def is_page_split(args: Sequence[cst.Arg], bound: Bound = unbound) -> bool:
    """`view(-1, page_size, *dims)` with at least one trailing dim (a row), and no regroup.

    A trailing `*expr` counts as dims. Keywords are not a shape `.view` accepts.
    """
    if len(args) < 3 or any(arg.keyword is not None or arg.star == "**" for arg in args):
        return False
    leading, page, trailing = args[0], args[1], args[2:]
    if leading.star or page.star or any(arg.star for arg in trailing[:-1]):
        return False
    if not (is_page_count(leading.value, bound) and is_page_size(page.value, bound)):
        return False
    # A literal 1 is a page size only right after -1 (`view(-1, 1, H, D)`); after
    # a named count it is as likely a singleton dim of some other layout.
    if isinstance(page.value, cst.Integer) and not _minus_one_then(leading):
        return False
    # With a page size named further on (`view(-1, 1, H * D // 16, page_size, 16)`, NPU's NZ
    # format) the 1 is a singleton dim of another layout, not the page size.
    if isinstance(page.value, cst.Integer) and any(_names_page_size(arg.value) for arg in trailing):
        return False
    return not is_head_regroup(args, bound)


def _minus_one_then(leading: cst.Arg) -> bool:
    """`-1, ` spelled as one of `PAGE_SIZE_WORDS` expects: no space in `-1`, at most one after the comma."""
    value, comma = leading.value, leading.comma
    return (
        is_minus_one(value)
        and isinstance(value, cst.UnaryOperation)
        and _blank(value.operator.whitespace_after, ("",))
        and isinstance(comma, cst.Comma)
        and _blank(comma.whitespace_before, ("",))
        and _blank(comma.whitespace_after, ("", " "))
    )


def _blank(whitespace: cst.BaseParenthesizableWhitespace, allowed: tuple[str, ...]) -> bool:
    return isinstance(whitespace, cst.SimpleWhitespace) and whitespace.value in allowed
