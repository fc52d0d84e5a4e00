"""KV301: places in a module that give a batch field a value other than None.

A missing Optional field only breaks a TBO split when some parent carries a
value in it, so the rule looks for the writes that put one there:
`batch.f = v`, `setattr(batch, "f", v)`, `Batch(f=v)`, and `cls(f=v)` /
`ret.f = v` inside the batch class's own factories (`init_new`). A receiver
counts as a batch only on evidence: a parameter or local annotated with the
batch class, a local bound from a batch constructor or factory, `self`
inside the batch class, or a parameter that a function of the same module
hands a batch (`self._core(q, forward_batch)`, `_fill(forward_batch)`). A
bare name like `batch` is not evidence: the scheduler's `ScheduleBatch`
shares many field names.

A write whose value reads the same field of the same batch (`self.f =
pad(self.f)`) only reshapes a value some other write gave, so it is not one
of them; a copy from another batch (`Batch(f=other.f)`) is. The same scan records the calls that hand a
batch on (`_calls`), for the timing of each write.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from kvlint.api.rule import one_line_code
from kvlint.rules.tbo._calls import batch_call, placing_call
from kvlint.rules.tbo._conditions import conditional_nodes
from kvlint.rules.tbo._facts import Assignment, Call, CallKind, FunctionFact, FunctionKey
from kvlint.rules.tbo._names import is_none, string_value, trailing_name
from kvlint.rules.tbo._source import SourceText
from kvlint.rules.tbo._values import never_none
from kvlint.analysis.ast_walk import FUNCTIONS, SCOPES, Function, own_nodes

SNIPPET_WIDTH = 60


def scan_batch_code(
    tree: ast.Module, batch_class: str, source: SourceText, imports: dict[str, str], whole: bool
) -> tuple[list[Assignment], list[FunctionFact]]:
    """The module's writes of a non-None value to a batch field, and its functions that hand a batch on.

    Not `whole`: of a top-level class, only its header and its definitions count.
    """
    # The module's own functions and methods: what a placing call may run (`placing_call`).
    local = frozenset(
        node.name for statement in tree.body
        for node in ((statement,) if isinstance(statement, FUNCTIONS) else
                     statement.body if isinstance(statement, ast.ClassDef) else ())
        if isinstance(node, FUNCTIONS)
    )
    finder = _AssignmentFinder(batch_class, source, imports, local)
    for statement in tree.body:
        cut = not whole and isinstance(statement, ast.ClassDef)
        finder.scan(statement, klass=None, batches=frozenset(), function=None, cut=cut)
    finder.scan_handed()
    functions = [
        FunctionFact(key, finder.batch_params.get(key, ()), key in finder.constructs, tuple(calls))
        for key, calls in finder.calls.items()
        if calls or key in finder.constructs or key in finder.batch_params
    ]
    return finder.found, functions


class _AssignmentFinder:
    def __init__(
        self, batch_class: str, source: SourceText, imports: dict[str, str], local_functions: frozenset[str]
    ) -> None:
        self.batch_class = batch_class
        self.mentions_batch = re.compile(rf"\b{re.escape(batch_class)}\b")
        self.source = source
        self.imports = imports
        self.found: list[Assignment] = []
        self.calls: dict[FunctionKey, list[Call]] = {}
        self.batch_params: dict[FunctionKey, tuple[int | str, ...]] = {}
        self.constructs: set[FunctionKey] = set()
        # Functions of the module passed over for naming no batch, and where a scanned one hands
        # them a batch (`self._core(q, fb)`, `_helper(fb)`): those parameters hold one after all.
        # A function a scanned one calls is scanned too, handed nothing (`self._core(*state)`): what it
        # runs is placed by its caller (`placing_call`).
        self.passed_over: dict[FunctionKey, Function] = {}
        self.handed: dict[FunctionKey, set[int | str]] = {}
        self.local_functions = local_functions
        # The parameters of the function being scanned that it was not shown to get a batch in, when
        # it was scanned for being called: a method called on one may be the batch's.
        self.untyped: frozenset[str] = frozenset()
        # Nodes met so far, in source order: where a write or call stands relative to another.
        self.order = 0
        # The outermost function being scanned, and the ids of its nodes that need not run whenever
        # it does (read on the first write or call kept: most functions scanned have none).
        self.function_node: Optional[Function] = None
        self.conditional: Optional[set[int]] = None

    def scan(
        self, scope: ast.AST, klass: Optional[str], batches: frozenset[str], function: Optional[FunctionKey], cut: bool = False,
        handed: Optional[tuple[int | str, ...]] = None,
    ) -> None:
        """Scan one scope's own nodes, then each nested scope with its own batch names.

        `cut`: a class of which only the header and the definitions count. `handed`: the parameters
        a scanned function of the module hands a batch in, when it calls this one.
        """
        if isinstance(scope, ast.ClassDef):
            klass, batches = scope.name, frozenset()
        in_batch_class = klass == self.batch_class
        if (isinstance(scope, FUNCTIONS) and function is None and handed is None and not in_batch_class
                and not self._names_batch_class(scope)):
            # Nothing in it is typed or built as a batch, so it neither writes one nor hands one on,
            # unless a function of this module hands it one (`scan_handed`).
            self.passed_over[(klass or "", scope.name)] = scope
            return
        nodes = _header_and_definitions(scope) if isinstance(scope, ast.ClassDef) and cut else list(own_nodes(scope))
        if isinstance(scope, FUNCTIONS):
            own = self._batch_names(scope, nodes, in_batch_class, handed or ())
            if function is None:
                function = (klass or "", scope.name)
                self.calls[function] = []
                self.function_node, self.conditional = scope, None
                self.untyped = _parameters(scope) - own[0] if handed is not None else frozenset()
                if own[0]:
                    # Registered even without batch parameters: `self` in the batch class holds one.
                    self.batch_params[function] = own[1]
            batches = batches | own[0]
        for node in nodes:
            if node is scope:
                continue
            self.order += 1
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self.scan(node, klass, batches, function, cut=cut and isinstance(node, ast.ClassDef))
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._attribute_write(node, target, node.value, batches, function)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._attribute_write(node, node.target, node.value, batches, function)
            elif isinstance(node, ast.Call):
                self._call(node, batches, in_batch_class, function)

    def _names_batch_class(self, function: Function) -> bool:
        first = function.decorator_list[0] if function.decorator_list else function
        return self.batch_class in self.source.text[self.source.start(first) : self.source.end(function)]

    def scan_handed(self) -> None:
        """Scan each passed-over function a scanned one calls, with the parameters it gets a batch in."""
        while pending := [key for key in self.handed if key in self.passed_over]:
            for key in pending:
                scope = self.passed_over.pop(key)
                self.scan(scope, key[0] or None, frozenset(), None, handed=tuple(self.handed[key]))

    def _call(self, node: ast.Call, batches: frozenset[str], in_batch_class: bool, function: Optional[FunctionKey]) -> None:
        if function is not None:
            call = batch_call(node, self.order, batches, self.imports, self.batch_class, self._conditional)
            if call is None:
                call = placing_call(node, self.order, self.untyped, self.local_functions)
            if call is not None:
                self.calls[function].append(call)
                if call.origin is None and call.kind in (CallKind.SELF, CallKind.NAME):
                    owner = function[0] if call.kind is CallKind.SELF else ""
                    self.handed.setdefault((owner, call.name), set()).update(call.batch_args)
        if self._constructs_batch(node, in_batch_class):
            if function is not None:
                self.constructs.add(function)
            for keyword in node.keywords:
                if keyword.arg is not None and not is_none(keyword.value):
                    code = _argument_code(self.source, node, keyword)
                    self._record(keyword.arg, keyword, keyword.value, code, function)
        elif isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3 and not node.keywords:
            receiver, name, value = node.args
            field = string_value(name)
            if _is_name_in(receiver, batches) and field is not None and not is_none(value):
                if not _reads_own_field(value, receiver, field):
                    self._record(field, node, value, self.source.code(node), function)

    def _attribute_write(
        self, statement: ast.stmt, target: ast.expr, value: ast.expr, batches: frozenset[str], function: Optional[FunctionKey]
    ) -> None:
        if isinstance(target, ast.Attribute) and _is_name_in(target.value, batches) and not is_none(value):
            if not _reads_own_field(value, target.value, target.attr):
                self._record(target.attr, statement, value, self.source.code(statement), function)

    def _record(self, field: str, node: ast.AST, value: ast.expr, code: str, function: Optional[FunctionKey]) -> None:
        line: int = node.lineno  # type: ignore[attr-defined]
        snippet = one_line_code(code, SNIPPET_WIDTH)
        conditional = self._conditional(node)
        self.found.append(Assignment(field, line, snippet, function, self.order, never_none(value), conditional))

    def _conditional(self, node: ast.AST) -> bool:
        if self.function_node is None:
            return False
        if self.conditional is None:
            self.conditional = conditional_nodes(self.function_node)
        return id(node) in self.conditional

    def _constructs_batch(self, call: ast.Call, in_batch_class: bool) -> bool:
        """`Batch(...)`, `mod.Batch(...)`, or `cls(...)` inside the batch class."""
        if trailing_name(call.func) == self.batch_class:
            return True
        return in_batch_class and isinstance(call.func, ast.Name) and call.func.id == "cls"

    def _makes_batch(self, value: ast.expr, in_batch_class: bool) -> bool:
        """A constructor or a factory on the class: `Batch(...)`, `Batch.init_new(...)`."""
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Attribute) and trailing_name(func.value) == self.batch_class:
            return True
        return self._constructs_batch(value, in_batch_class)

    def _batch_names(
        self, function: Function, nodes: list[ast.AST], in_batch_class: bool, handed: tuple[int | str, ...] = ()
    ) -> tuple[frozenset[str], tuple[int | str, ...]]:
        """The function's names holding a batch, and its batch parameters by position and name."""
        names: set[str] = set()
        params = function.args
        positional = [*params.posonlyargs, *params.args]
        if positional and positional[0].arg in ("self", "cls"):
            if in_batch_class and positional[0].arg == "self":
                names.add("self")
            positional = positional[1:]
        batch_params: list[int | str] = []
        for index, param in enumerate((*positional, *params.kwonlyargs)):
            given = (index < len(positional) and index in handed) or param.arg in handed
            if given or param.annotation is not None and self._annotates_batch(param.annotation):
                names.add(param.arg)
                batch_params.extend((index, param.arg) if index < len(positional) else (param.arg,))
        for node in nodes:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if self._annotates_batch(node.annotation):
                    names.add(node.target.id)
            elif isinstance(node, ast.Assign) and self._makes_batch(node.value, in_batch_class):
                names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        return frozenset(names), tuple(batch_params)

    def _annotates_batch(self, annotation: ast.expr) -> bool:
        return self.mentions_batch.search(self.source.code(annotation)) is not None


def _parameters(function: Function) -> frozenset[str]:
    args = function.args
    return frozenset(arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)) - {"self", "cls"}


def _header_and_definitions(klass: ast.ClassDef) -> list[ast.AST]:
    header = (*klass.decorator_list, *klass.bases, *klass.keywords)
    definitions = [statement for statement in klass.body if isinstance(statement, SCOPES)]
    return [klass, *(node for part in header for node in own_nodes(part)), *definitions]


def _argument_code(source: SourceText, call: ast.Call, keyword: ast.keyword) -> str:
    """A keyword argument's code as LibCST keeps it: up to the next argument, or to the closing parenthesis."""
    start = source.start(keyword)
    later = [offset for offset in map(source.start, [*call.args, *call.keywords]) if offset > start]
    return source.text[start : min(later, default=source.end(call) - 1)]


def _is_name_in(node: ast.expr, names: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _reads_own_field(value: ast.expr, receiver: ast.expr, field: str) -> bool:
    """Does `value` read `field` of the batch it is written to (`b.f = pad(b.f)`)?"""
    if not isinstance(receiver, ast.Name):
        return False
    return any(
        isinstance(node, ast.Attribute) and node.attr == field and _is_name_in(node.value, frozenset({receiver.id}))
        for node in own_nodes(value)
    )
