"""KV301: places in a module that give a batch field a value other than None.

A missing Optional field only breaks a TBO split when some parent carries a
value in it, so the rule looks for the writes that put one there:
`batch.f = v`, `setattr(batch, "f", v)`, `Batch(f=v)`, and `cls(f=v)` /
`ret.f = v` inside the batch class's own factories (`init_new`). A receiver
counts as a batch only on evidence: a parameter or local annotated with the
batch class, a local bound from a batch constructor or factory, or `self`
inside the batch class. A bare name like `batch` is not evidence: the
scheduler's `ScheduleBatch` shares many field names.

A write whose value reads the same field of the same batch (`self.f =
pad(self.f)`) only reshapes a value some other write gave, so it is not one
of them; a copy from another batch (`Batch(f=other.f)`) is. The same scan records the calls that hand a
batch on (`_calls`), for the timing of each write.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from kvlint.rules.tbo._calls import batch_call
from kvlint.rules.tbo._facts import Assignment, Call, FunctionFact, FunctionKey
from kvlint.analysis.index import is_none, trailing_name
from kvlint.api.rule import one_line_code
from kvlint.rules.tbo._lines import LineFinder
from kvlint.rules.tbo._walk import own_nodes

SNIPPET_WIDTH = 60


def scan_batch_code(
    module: cst.Module, batch_class: str, lines: LineFinder, imports: dict[str, str]
) -> tuple[list[Assignment], list[FunctionFact]]:
    """The module's writes of a non-None value to a batch field, and its functions that hand a batch on."""
    finder = _AssignmentFinder(module, batch_class, lines, imports)
    for statement in module.body:
        finder.top = statement
        finder.scan(statement, klass=None, batches=frozenset(), function=None)
    functions = [
        FunctionFact(key, finder.batch_params.get(key, ()), key in finder.constructs, tuple(calls))
        for key, calls in finder.calls.items()
        if calls or key in finder.constructs or key in finder.batch_params
    ]
    return finder.found, functions


class _AssignmentFinder:
    def __init__(self, module: cst.Module, batch_class: str, lines: LineFinder, imports: dict[str, str]) -> None:
        self.module = module
        self.batch_class = batch_class
        self.mentions_batch = re.compile(rf"\b{re.escape(batch_class)}\b")
        self.lines = lines
        self.imports = imports
        self.found: list[Assignment] = []
        self.calls: dict[FunctionKey, list[Call]] = {}
        self.batch_params: dict[FunctionKey, tuple[int | str, ...]] = {}
        self.constructs: set[FunctionKey] = set()
        # The module-level statement being scanned: positions are looked up inside it.
        self.top: cst.CSTNode = module
        # Nodes met so far, in source order: where a write or call stands relative to another.
        self.order = 0

    def scan(
        self, scope: cst.CSTNode, klass: Optional[str], batches: frozenset[str], function: Optional[FunctionKey]
    ) -> None:
        """Scan one scope's own nodes, then each nested scope with its own batch names."""
        nodes = list(own_nodes(scope))
        if isinstance(scope, cst.ClassDef):
            klass, batches = scope.name.value, frozenset()
        in_batch_class = klass == self.batch_class
        if isinstance(scope, cst.FunctionDef):
            own = self._batch_names(scope, nodes, in_batch_class)
            if function is None:
                function = (klass or "", scope.name.value)
                self.calls[function] = []
                if own[0]:
                    # Registered even without batch parameters: `self` in the batch class holds one.
                    self.batch_params[function] = own[1]
            batches = batches | own[0]
        for node in nodes:
            if node is scope:
                continue
            self.order += 1
            if isinstance(node, (cst.ClassDef, cst.FunctionDef, cst.Lambda)):
                self.scan(node, klass, batches, function)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    self._attribute_write(node, target.target, node.value, batches, function)
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                self._attribute_write(node, node.target, node.value, batches, function)
            elif isinstance(node, cst.Call):
                self._call(node, batches, in_batch_class, function)

    def _call(
        self, node: cst.Call, batches: frozenset[str], in_batch_class: bool, function: Optional[FunctionKey]
    ) -> None:
        if function is not None and batches:
            call = batch_call(node, self.order, batches, self.imports)
            if call is not None:
                self.calls[function].append(call)
        if self._constructs_batch(node, in_batch_class):
            if function is not None:
                self.constructs.add(function)
            for arg in node.args:
                if arg.keyword is not None and not is_none(arg.value):
                    self._record(arg.keyword.value, arg, function)
        elif isinstance(node.func, cst.Name) and node.func.value == "setattr" and len(node.args) == 3:
            receiver, name, value = (arg.value for arg in node.args)
            if (
                _is_name_in(receiver, batches)
                and isinstance(name, cst.SimpleString)
                and isinstance(name.evaluated_value, str)
                and not is_none(value)
                and not _reads_own_field(value, receiver, name.evaluated_value)
            ):
                self._record(name.evaluated_value, node, function)

    def _attribute_write(
        self,
        statement: cst.CSTNode,
        target: cst.BaseExpression,
        value: cst.BaseExpression,
        batches: frozenset[str],
        function: Optional[FunctionKey],
    ) -> None:
        if isinstance(target, cst.Attribute) and _is_name_in(target.value, batches) and not is_none(value):
            if not _reads_own_field(value, target.value, target.attr.value):
                self._record(target.attr.value, statement, function)

    def _record(self, field: str, node: cst.CSTNode, function: Optional[FunctionKey]) -> None:
        text = one_line_code(self.module.code_for_node(node), SNIPPET_WIDTH)
        self.found.append(Assignment(field, self.lines.span(node, self.top).line, text, function, self.order))

    def _constructs_batch(self, call: cst.Call, in_batch_class: bool) -> bool:
        """`Batch(...)`, `mod.Batch(...)`, or `cls(...)` inside the batch class."""
        if trailing_name(call.func, through_subscript=True) == self.batch_class:
            return True
        return in_batch_class and isinstance(call.func, cst.Name) and call.func.value == "cls"

    def _makes_batch(self, value: cst.BaseExpression, in_batch_class: bool) -> bool:
        """A constructor or a factory on the class: `Batch(...)`, `Batch.init_new(...)`."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Attribute) and trailing_name(func.value, through_subscript=True) == self.batch_class:
            return True
        return self._constructs_batch(value, in_batch_class)

    def _batch_names(
        self, function: cst.FunctionDef, nodes: list[cst.CSTNode], in_batch_class: bool
    ) -> tuple[frozenset[str], tuple[int | str, ...]]:
        """The function's names holding a batch, and its batch parameters by position and name."""
        names: set[str] = set()
        params = function.params
        positional = [*params.posonly_params, *params.params]
        if positional and positional[0].name.value in ("self", "cls"):
            if in_batch_class and positional[0].name.value == "self":
                names.add("self")
            positional = positional[1:]
        batch_params: list[int | str] = []
        for index, param in enumerate((*positional, *params.kwonly_params)):
            if param.annotation is not None and self._annotates_batch(param.annotation.annotation):
                names.add(param.name.value)
                batch_params.extend((index, param.name.value) if index < len(positional) else (param.name.value,))
        for node in nodes:
            if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
                if self._annotates_batch(node.annotation.annotation):
                    names.add(node.target.value)
            elif isinstance(node, cst.Assign) and self._makes_batch(node.value, in_batch_class):
                names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        return frozenset(names), tuple(batch_params)

    def _annotates_batch(self, annotation: cst.BaseExpression) -> bool:
        return self.mentions_batch.search(self.module.code_for_node(annotation)) is not None


def _is_name_in(node: cst.BaseExpression, names: frozenset[str]) -> bool:
    return isinstance(node, cst.Name) and node.value in names


def _reads_own_field(value: cst.BaseExpression, receiver: cst.BaseExpression, field: str) -> bool:
    """Does `value` read `field` of the batch it is written to (`b.f = pad(b.f)`)?"""
    if not isinstance(receiver, cst.Name):
        return False
    return any(
        isinstance(node, cst.Attribute) and node.attr.value == field and _is_name_in(node.value, frozenset({receiver.value}))
        for node in own_nodes(value)
    )
