"""Where a paging `.view` cannot differ from the paged helpers: its page size is pinned above 1, its
tensor is shown contiguous, or its result is copied at once.

`x.view(-1, ps, ...)` on a token-major per-layer buffer has the very strides `paged_view` gives
whenever `ps > 1`; only a size-1 page dim gets the row stride instead of the slot stride. So a
view is no hazard where the code pins `ps` above 1 on the way to it:

* a module constant assigned once (`PAGE_SIZE = 64`, `_aliases.constant_page_size`);
* a method of a class only ever built for backends whose page size the engine forces above 1
  (`page-pinned-classes`, `kvlint.learn.page_pins`), or a test that an object is an instance of
  such classes (`isinstance(self.dense_backend, TRTLLMHAAttnBackend)`): it and its subclasses
  exist only in a run under those backends;
* a test that held: an `if` whose condition (or one of its `and`-ed parts) is `ps == N`, with the
  view in its body, or an `and` chain with `ps == N` before the part holding the view
  (`self.page_size == 16 and kernel(k=k_cache.view(-1, self.page_size, ...))`);
* an `assert ps == N` in the same or an enclosing block before the statement holding the view,
  or right after it where that statement only binds the view (the view is used after the assert);
  nothing the test reads may be bound again in between.

Nor is it one whose tensor the code shows contiguous on the way to it, in the same forms (`if
x.is_contiguous()`, `assert x.is_contiguous()`), or past an `if` that always leaves unless it is
(`if not x.is_contiguous() or ...: return`): on a contiguous buffer `.view` is exact at any page
size, and a token-major per-layer view is contiguous only where its entry holds that row alone.

Nor is it one where the view is copied at once (`x.view(...).contiguous()`, `.clone()`): no
kernel sees its strides; KV202 judges the copy. Nor one bound to a name nothing reads. `ps` and
`x` are matched by their source text, after following the function's local aliases (`ps =
self.page_size`).
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from kvlint.analysis.dataflow import function_flow
from kvlint.analysis.walk import code_children
from kvlint.analysis.index import trailing_name
from kvlint.api.rule import FileContext
from kvlint.rules.layout._aliases import aliased, constant_page_size
from kvlint.rules.layout._pool_origin import class_of

_COPIES = frozenset({"contiguous", "clone"})
# A test on the way to a view that, where it holds, makes the view safe.
Safe = Callable[["cst.BaseExpression"], bool]


def harmless_view(ctx: FileContext, call: cst.Call, function: Optional[cst.FunctionDef]) -> bool:
    """Whether `call`, a paging `x.view(-1, ps, ...)`, runs only with `ps` above 1 or is copied at once."""
    page_size = call.args[1].value
    fixed = constant_page_size(ctx, page_size, function)
    if fixed is not None and fixed > 1:
        return True
    if function is None:
        return False
    klass = class_of(ctx, function)
    if klass is not None and klass.name.value in dict(ctx.contract.page_pinned_classes):
        return True
    path = _path_to(function.body, call)
    if not path:
        return False
    if _copied_at_once(path) or _never_read(ctx, path, function):
        return True
    spelled = _spelling(ctx, page_size, function)
    tensor = _spelling(ctx, call.func.value, function) if isinstance(call.func, cst.Attribute) else ""

    def safe(test: cst.BaseExpression) -> bool:
        return (_pins(ctx, test, spelled, function) or _pinned_instance(ctx, test)
                or bool(tensor) and _contiguous(ctx, test, tensor, function))

    rebound = {spelled, tensor} - {""}
    return _held_before(path, safe) or _asserted(path, safe, rebound) or _exited_unless(path, safe, rebound)


def _path_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from `root` down to `target`, both included; [] where `target` is not below `root`."""
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(code_children(node)))
    return []


def _copied_at_once(path: list[cst.CSTNode]) -> bool:
    """`x.view(...).contiguous()`: the view is the receiver of a copying call."""
    if len(path) < 3:
        return False
    call, attribute, outer = path[-1], path[-2], path[-3]
    return (isinstance(attribute, cst.Attribute) and attribute.value is call and attribute.attr.value in _COPIES
            and isinstance(outer, cst.Call) and outer.func is attribute)


def _never_read(ctx: FileContext, path: list[cst.CSTNode], function: cst.FunctionDef) -> bool:
    """`k = x.view(...)` where nothing reads that `k`: a view no code uses (the scope's reads, any
    mention of the name in a function, lambda or class nested in it, and `locals()`, count as reads)."""
    statement = next((node for node in reversed(path) if isinstance(node, cst.SimpleStatementLine)), None)
    if statement is None or not _binds_only(statement, path):
        return False
    assign = statement.body[0]
    assert isinstance(assign, cst.Assign)
    target = assign.targets[0].target
    if len(assign.targets) != 1 or not isinstance(target, cst.Name) or function_flow(ctx, function).read(target):
        return False
    if any(isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("locals", "vars")
           for node in _below(function.body)):
        return False  # every local is read there
    nested = [node for node in _below(function.body) if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef))]
    return not any(isinstance(node, cst.Name) and node.value == target.value for scope in nested for node in _below(scope))


def _below(root: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(code_children(node))
    return found


def _spelling(ctx: FileContext, expr: cst.BaseExpression, function: cst.FunctionDef) -> str:
    """The page size's source text, through the function's local aliases (`ps = self.page_size`)."""
    return ctx.source_of(aliased(ctx, expr, function))


def _pins(ctx: FileContext, test: cst.BaseExpression, spelled: str, function: cst.FunctionDef) -> bool:
    """`ps == N` with N above 1."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    for side, other in ((test.left, target.comparator), (target.comparator, test.left)):
        if isinstance(other, cst.Integer) and int(other.evaluated_value) > 1 and _spelling(ctx, side, function) == spelled:
            return True
    return False


def _pinned_instance(ctx: FileContext, test: cst.BaseExpression) -> bool:
    """`isinstance(x, C)` (or `(C, D)`), each class page-pinned."""
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"
            and len(test.args) == 2):
        return False
    kinds = test.args[1].value
    parts = [element.value for element in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    pinned = dict(ctx.contract.page_pinned_classes)
    return all(trailing_name(part) in pinned for part in parts)


def _contiguous(ctx: FileContext, test: cst.BaseExpression, tensor: str, function: cst.FunctionDef) -> bool:
    """`x.is_contiguous()` on the viewed tensor: where it holds, `.view` splits it exactly."""
    return (isinstance(test, cst.Call) and not test.args and isinstance(test.func, cst.Attribute)
            and test.func.attr.value == "is_contiguous" and _spelling(ctx, test.func.value, function) == tensor)


def _holds(test: cst.BaseExpression, safe: Safe) -> bool:
    """Whether `test` holding makes the view safe: a safe part, alone or `and`-ed with others."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _holds(test.left, safe) or _holds(test.right, safe)
    return safe(test)


def _fails(test: cst.BaseExpression, safe: Safe) -> bool:
    """Whether `test` failing makes the view safe: `not <safe>`, alone or `or`-ed with others."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _fails(test.left, safe) or _fails(test.right, safe)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _holds(test.expression, safe)
    return False


def _held_before(path: list[cst.CSTNode], safe: Safe) -> bool:
    """An `if` with the view in its body, or an `and` chain with the view in a later part, whose test makes it safe."""
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, cst.If) and child is parent.body and _holds(parent.test, safe):
            return True
        if (isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And)
                and child is parent.right and _holds(parent.left, safe)):
            return True
    return False


def _asserted(path: list[cst.CSTNode], safe: Safe, rebound: set[str]) -> bool:
    """An `assert` making the view safe before the statement holding it, in its block or an enclosing
    one, with nothing tested rebound in between; or right after it where that statement only binds the view."""
    for before in _statements_before(path, rebound):
        if isinstance(before, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Assert) and _holds(small.test, safe) for small in before.body):
            return True
    return False


def _exited_unless(path: list[cst.CSTNode], safe: Safe, rebound: set[str]) -> bool:
    """`if not x.is_contiguous() or ...: return` before the statement holding the view: past it the test failed."""
    return any(isinstance(before, cst.If) and before.orelse is None and _exits(before.body) and _fails(before.test, safe)
               for before in _statements_before(path, rebound))


def _statements_before(path: list[cst.CSTNode], rebound: set[str]) -> list[cst.CSTNode]:
    """The statements that run before the one holding the view in each block holding it, back to the
    last one rebinding a tested name (an assert right after a statement that only binds the view counts)."""
    found: list[cst.CSTNode] = []
    for parent, child in reversed(list(zip(path, path[1:]))):
        body: list[cst.CSTNode] = list(parent.body) if isinstance(parent, cst.IndentedBlock) else []
        if child not in body:
            continue
        at = body.index(child)
        if _binds_only(child, path):
            found += body[at + 1 : at + 2]
        for statement in reversed(body[:at]):
            if _rebinds(statement, rebound):
                return found
            found.append(statement)
    return found


def _exits(block: cst.BaseSuite) -> bool:
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(
        last.body[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _rebinds(statement: cst.CSTNode, names: set[str]) -> bool:
    targets = (node.target for node in _below(statement) if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)))
    return any(cst.Module(body=[]).code_for_node(target) in names for target in targets)


def _binds_only(statement: cst.CSTNode, path: list[cst.CSTNode]) -> bool:
    """`k = x.view(...)`: a one-assignment line whose value is the view itself."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    assign = statement.body[0]
    return isinstance(assign, cst.Assign) and assign.value is path[-1]
