"""KV105's walk of the function that builds a batch: does it reach a door or a forward before its mark is set?

One pass over the function in source order (the order a straight run executes
it), following the built batch through the names it is held in (`batch`,
`self.capture_batch`, a plain alias). What the walk records:

- **bound**: an assignment `batch.<batch mark> = ...` (or `setattr(batch,
  "<batch mark>", ...)`), a call of a binding method (`binding-methods`, by name)
  handed the batch or called on it;
- **reached**: a write-door call with the batch anywhere in its arguments
  (`pool.set_kv_buffer(layer, KVWriteLoc.for_batch(batch), k, v)`), or a
  *forward*: a call handed the batch itself as an argument whose callee's name
  is `forward`, starts with `forward_` or `init_forward_metadata`, or ends with
  `_forward`, and is not a context manager (`forward_context`)
  (`model.forward(ids, positions, batch)`, `runner.forward(batch)`,
  `backend.init_forward_metadata(batch)`, `worker.draft_forward(batch)`).

A name rebound to anything else stops being followed. Functions nested in the
builder (the `run_once` a capture hands the graph) run later, at a time the
walk cannot place: a binding inside one counts as bound from the start, and a
reach inside one counts only when nothing in the builder binds the batch.
Every doubt leans to silence: a batch handed to any other call, returned or
stored is not followed further.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from kvlint.analysis.index import trailing_name
from kvlint.analysis.walk import code_children
from kvlint.api.contract import Contract

def is_forward(name: str) -> bool:
    """A callee KV105 takes for a forward when handed a batch: a forward by name, or a model called
    as a module (`self.model(ids, positions, batch)`, `draft_model(...)`: calling a module runs its
    forward); not a context manager named after one (`forward_context(..., forward_batch=batch)` runs
    nothing)."""
    named = name == "forward" or name.startswith(("forward_", "init_forward_metadata")) or name.endswith("_forward")
    return (named or name == "model" or name.endswith("_model")) and not name.endswith("context")


def dotted(expr: cst.BaseExpression) -> Optional[str]:
    """`batch`, `self.capture_batch`: a name or an attribute chain of names, as text; else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


@dataclass
class Reach:
    """A door or forward call the batch reached, and whether it sits in a nested function."""

    call: cst.Call
    order: int
    nested: bool


@dataclass
class BatchWalk:
    """The walk of one function for one construction."""

    construction: cst.Call
    contract: Contract
    names: set[str] = field(default_factory=set)
    started: bool = False
    order: int = 0
    # Where the builder itself binds the batch, in walk order; whether a nested function does.
    bound_at: list[int] = field(default_factory=list)
    bound_nested: bool = False
    reaches: list[Reach] = field(default_factory=list)

    def first_unbound_reach(self, function: cst.FunctionDef) -> Optional[cst.Call]:
        """The first door or forward call the batch reaches with no binding before it, or None."""
        self._visit(function.body, nested=False)
        if self.bound_nested:
            return None
        for reach in sorted(self.reaches, key=lambda reach: reach.order):
            if reach.nested and not self.bound_at:
                return reach.call
            if not reach.nested and not any(order < reach.order for order in self.bound_at):
                return reach.call
        return None

    def _visit(self, node: cst.CSTNode, nested: bool) -> None:
        self.order += 1
        if node is self.construction:
            self._children(node, nested)
            self.started = True
            return
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self._nested(node)
        elif isinstance(node, cst.ClassDef):
            return
        elif isinstance(node, cst.Assign):
            self._visit(node.value, nested)
            for target in node.targets:
                self._assigned(target.target, node.value, nested)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._visit(node.value, nested)
            self._assigned(node.target, node.value, nested)
        elif isinstance(node, cst.AugAssign):
            self._visit(node.value, nested)
            self._assigned(node.target, None, nested, augmented=True)
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._visit(node.iter, nested)
            self._assigned(node.target, None, nested)
            for part in code_children(node):
                if part is not node.iter and part is not node.target:
                    self._visit(part, nested)
        elif isinstance(node, cst.WithItem):
            self._visit(node.item, nested)
            if node.asname is not None:
                self._assigned(node.asname.name, None, nested)
        elif isinstance(node, cst.Call):
            self._children(node, nested)
            if self.started:
                self._call(node, nested)
        else:
            self._children(node, nested)

    def _children(self, node: cst.CSTNode, nested: bool) -> None:
        for child in code_children(node):
            self._visit(child, nested)

    def _nested(self, scope: cst.FunctionDef | cst.Lambda) -> None:
        """A function defined in the builder: walked where it stands, unless it rebinds a followed name
        (its own local then, not the batch)."""
        if not self.started or not self.names or self.names & _locals(scope):
            return
        self._visit(scope.body, nested=True)

    def _assigned(
        self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], nested: bool, augmented: bool = False
    ) -> None:
        if not self.started:
            return
        if isinstance(target, cst.Attribute) and target.attr.value == self.contract.batch_mark:
            if dotted(target.value) in self.names:
                self._bound(nested)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._assigned(element.value, None, nested)
            return
        if isinstance(target, cst.StarredElement):
            self._assigned(target.value, None, nested)
            return
        text = dotted(target)
        if text is None or nested or augmented:
            return
        if value is self.construction or (value is not None and dotted(value) in self.names):
            self.names.add(text)
        else:
            self.names.discard(text)

    def _call(self, call: cst.Call, nested: bool) -> None:
        name = trailing_name(call.func)
        if name is None:
            return
        values = [arg.value for arg in call.args]
        if name == "setattr" and len(values) >= 2 and self._is_batch(values[0]):
            if isinstance(values[1], cst.SimpleString) and values[1].evaluated_value == self.contract.batch_mark:
                self._bound(nested)
            return
        if name in self.contract.binding_methods:
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if any(self._is_batch(value) for value in values) or (receiver is not None and self._is_batch(receiver)):
                self._bound(nested)
            return
        if name in self.contract.door_loc_index:
            if any(self._holds_batch(value) for value in values):
                self.reaches.append(Reach(call, self.order, nested))
        elif is_forward(name) and any(self._is_batch(value) for value in values):
            self.reaches.append(Reach(call, self.order, nested))

    def _bound(self, nested: bool) -> None:
        if nested:
            self.bound_nested = True
        else:
            self.bound_at.append(self.order)

    def _is_batch(self, expr: cst.BaseExpression) -> bool:
        return expr is self.construction or dotted(expr) in self.names

    def _holds_batch(self, expr: cst.CSTNode) -> bool:
        if isinstance(expr, cst.BaseExpression) and self._is_batch(expr):
            return True
        return any(self._holds_batch(child) for child in code_children(expr))


def _locals(scope: cst.FunctionDef | cst.Lambda) -> set[str]:
    """The names a nested function binds itself: its parameters and its assignment targets."""
    found = {param.name.value for param in _params(scope.params)}
    pending: list[cst.CSTNode] = [scope.body]
    while pending:
        node = pending.pop()
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.AssignTarget):
            targets.append(node.target)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
            targets.append(node.target)
        elif isinstance(node, cst.AsName):
            targets.append(node.name)
        for target in targets:
            found.update(name.value for name in _names(target))
        pending.extend(code_children(node))
    return found


def _params(params: cst.Parameters) -> list[cst.Param]:
    star = [params.star_arg] if isinstance(params.star_arg, cst.Param) else []
    extra = [params.star_kwarg] if params.star_kwarg is not None else []
    return [*params.posonly_params, *params.params, *star, *params.kwonly_params, *extra]


def _names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a target binds: not those an attribute or subscript target reads (`batch.x = ...`)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _names(element.value)]
    return []
