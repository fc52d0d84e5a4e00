"""One file's functions as the project index needs them, read with CPython's `ast`.

For each module function and each method: what every `return` gives (the
batch's raw loc, a marked loc, paged KV, another call's result, or something
else), where each parameter goes (a write door's loc argument, or an
argument of another call), which parameters are the tensor of a
layout-sensitive call (`kvlint.analysis._ast_tensors`), and which call
arguments are paged KV or another call's result (where the index starts
looking for such helpers). Nothing is resolved here: calls are kept as
spellings (`self._kv_write_loc`, `helper`, `mod.helper`) for
`kvlint.analysis.project_index` to resolve across files. A summary depends on
the file's bytes and the contract only, so the engine caches it by content.

Local names are followed through their assignments in the same function: a
name is a raw loc (or paged KV) when every value assigned to it is.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional, TypeVar, Union

from kvlint.analysis._ast_children import CHILD_FIELDS, child_fields
from kvlint.analysis._ast_imports import bound_names, imports_of, module_imports
from kvlint.analysis._ast_tensors import TENSOR_KEEPING, is_page_size, keeps, layout_use, trailing
from kvlint.analysis.summaries import ClassSummary, FileSummary, FunctionSummary, ParamUse, Return, Spelling
from kvlint.api.contract import LOC_KEYWORDS, PAGED_HELPERS, Contract

CROSS_ATTENTION_FLAG = "is_cross_attention"
ENCODER_LOC = "encoder_out_cache_loc"

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
# The node types the walk reads besides names and attributes (the rest it only enters).
_READ = frozenset({
    ast.Call, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Return, ast.Assign,
    ast.AnnAssign, ast.NamedExpr, ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
    ast.Import, ast.ImportFrom,
})
_Answer = TypeVar("_Answer")
# One empty set for every function without such parameters or arguments (most): a file's pickled
# summary then holds it once, and loading it makes one object, not two per function.
_EMPTY: frozenset[Any] = frozenset()


def summarize(tree: ast.Module, module: str, is_package: bool, contract: Contract) -> FileSummary:
    """The summary of a parsed module whose dotted name is `module`."""
    imports: list[ast.stmt] = []
    summary = FileSummary(imports={})
    doors = dict(contract.write_doors)
    module_imports(tree.body, imports)
    tensor_args: set[tuple[Spelling, object, str]] = set()
    # Each spelling one object for the whole file (an equal tuple is pickled and loaded once).
    spellings: dict[Spelling, Spelling] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            reader = _FunctionReader(node, False, contract, doors, imports, spellings)
            summary.functions[node.name] = reader.summary()
            summary.calls.setdefault("", set()).update(reader.spellings())
            reader.record_uses("", summary.call_uses)
            tensor_args.update(reader.tensor_args())
        elif isinstance(node, ast.ClassDef):
            methods = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    reader = _FunctionReader(item, True, contract, doors, imports, spellings)
                    methods[item.name] = reader.summary()
                    summary.calls.setdefault(node.name, set()).update(reader.spellings())
                    reader.record_uses(node.name, summary.call_uses)
                    tensor_args.update(reader.tensor_args())
            bases = tuple(text for text in (_dotted(base) for base in node.bases) if text)
            summary.classes[node.name] = ClassSummary(node.name, node.lineno, bases, methods)
    summary.imports.update(imports_of(imports, module, is_package))
    # `obj.f(...)` resolves only where `obj` is an imported module: a tensor's or a pool's own
    # methods (`k.copy_(...)`, `pool.set_kv_buffer(...)`) are no helpers to look for.
    summary.tensor_args.update(
        (spelling[-1], slot, origin) for spelling, slot, origin in tensor_args
        if spelling[0] != "attr" or spelling[1] in summary.imports
    )
    return summary


def call_spelling(func: ast.expr) -> Optional[Spelling]:
    """How a call names its target, for the index to resolve; None for anything else."""
    if isinstance(func, ast.Name):
        return ("name", func.id)
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value
    if isinstance(owner, ast.Name):
        if owner.id in ("self", "cls"):
            return (owner.id, func.attr)
        return ("attr", owner.id, func.attr)
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        return ("super", func.attr)
    return None


class _FunctionReader:
    def __init__(
        self,
        node: _Function,
        method: bool,
        contract: Contract,
        doors: dict[str, int],
        imports: list[ast.stmt],
        spellings: dict[Spelling, Spelling],
    ) -> None:
        self.node = node
        self._spellings = spellings
        self.imports = imports
        self.contract = contract
        self.doors = doors
        args = [*node.args.posonlyargs, *node.args.args]
        names = [arg.arg for arg in args]
        is_static = any(_dotted(d) == "staticmethod" for d in node.decorator_list)
        if method and not is_static and names:
            names = names[1:]
        self.params = tuple(names)
        self.all_params = frozenset(names) | {arg.arg for arg in node.args.kwonlyargs}
        self.assigned: dict[str, list[ast.expr]] = {}
        self._answers: dict[tuple[str, str], object] = {}
        self.returns: list[ast.Return] = []
        self.calls: list[ast.Call] = []
        self.loads: dict[str, int] = {}
        self._walk(node)

    def _walk(self, root: _Function) -> None:
        # Depth first in `ast.iter_child_nodes` order (the order of `returns`, `calls` and each
        # name's values is what the summary keeps), the commonest nodes first, the few types read
        # found by one set lookup, and field values stacked as they are, those without children
        # entering nothing (`kvlint.analysis._ast_children`): the generic generators cost most
        # of the summaries.
        stack: list[object] = list(root.body)
        loads = self.loads
        fields_of = CHILD_FIELDS.get
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    loads[node.id] = loads.get(node.id, 0) + 1
                continue
            if isinstance(node, ast.Attribute):
                stack.append(node.value)
                continue
            kind = type(node)
            if kind in _READ:
                if isinstance(node, ast.Call):
                    self.calls.append(node)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                elif isinstance(node, ast.Return):
                    self.returns.append(node)
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        self._bind(target, node.value)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
                    if node.value is not None:
                        self._bind(node.target, node.value)
                elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                    for bound in bound_names(node):
                        self.assigned.setdefault(bound, []).append(ast.Constant(None))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    # A function-level import may bring in the helper the function calls.
                    self.imports.append(node)
            fields = fields_of(kind)
            for field in fields if fields is not None else child_fields(kind):
                value = getattr(node, field)
                if type(value) is list:
                    stack.extend(value)
                else:
                    stack.append(value)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            # `k, v = pool.get_kv_buffer(i)`: each name is the value's element at its index.
            for index, element in enumerate(target.elts):
                self._bind(element, ast.Subscript(value, ast.Constant(index), ast.Load()))
        else:
            # Unpacking and attribute/subscript stores: a name bound so is unknown.
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    self.assigned.setdefault(name.id, []).append(ast.Constant(None))

    def record_uses(self, klass: str, uses: dict[tuple[str, Spelling], bool]) -> None:
        """For each call spelling: whether every such call's result goes straight into a door's loc."""
        at_doors: set[int] = set()
        for call in self.calls:
            index = self.doors.get(trailing(call.func) or "")
            if index is None:
                continue
            args = [a for a in call.args if not isinstance(a, ast.Starred)]
            if index < len(args) and len(args) == len(call.args):
                at_doors.add(id(args[index]))
            at_doors.update(id(k.value) for k in call.keywords if k.arg in LOC_KEYWORDS)
        for call in self.calls:
            spelling = self._spelling(call.func)
            if spelling is None:
                continue
            key = (klass if spelling[0] in ("self", "cls", "super") else "", spelling)
            uses[key] = uses.get(key, True) and id(call) in at_doors

    def spellings(self) -> set[Spelling]:
        return {spelling for spelling in map(self._spelling, (c.func for c in self.calls)) if spelling is not None}

    def _spelling(self, func: ast.expr) -> Optional[Spelling]:
        spelling = call_spelling(func)
        return None if spelling is None else self._spellings.setdefault(spelling, spelling)

    def summary(self) -> FunctionSummary:
        returns = tuple(self._return(node) for node in self.returns)
        uses = tuple(self._uses())
        passed: dict[str, int] = {}
        for use in uses:
            passed[use.param] = passed.get(use.param, 0) + 1
        only = frozenset(p for p, n in passed.items() if self.loads.get(p, 0) == n and p not in self.assigned) or _EMPTY
        layout = tuple(
            use for use in (layout_use(call, lambda e: self._root_param(e), self.all_params) for call in self.calls) if use
        )
        page_args = frozenset(
            (call.lineno, position) for call in self.calls for position, arg in enumerate(call.args) if is_page_size(arg)
        ) or _EMPTY
        return FunctionSummary(self.node.name, self.node.lineno, self.params, returns, uses, only, layout, page_args)

    def tensor_args(self) -> set[tuple[Spelling, object, str]]:
        found: set[tuple[Spelling, object, str]] = set()
        for call in self.calls:
            spelling = call_spelling(call.func)
            if spelling is None:
                continue
            slots: list[tuple[object, ast.expr]] = [*enumerate(call.args), *((k.arg, k.value) for k in call.keywords if k.arg)]
            for slot, arg in slots:
                origin = self._origin(arg)
                if origin is not None:
                    found.add((spelling, slot, origin))
        return found

    def _origin(self, expr: ast.expr) -> Optional[str]:
        """"" for paged KV of a buffer accessor, the name of the call a value comes from, else None."""
        if self.paged(expr) is not None:
            return ""
        if isinstance(expr, ast.Call):
            name = trailing(expr.func)
            if name in TENSOR_KEEPING and isinstance(expr.func, ast.Attribute):
                return self._origin(expr.func.value)
            return name
        if isinstance(expr, ast.Subscript) and keeps(expr):
            return self._origin(expr.value)
        if isinstance(expr, ast.Name):
            return self._per_name("origin", expr.id, lambda values: next(
                (origin for origin in map(self._origin, values) if origin is not None), None
            ))
        return None

    def _root_param(self, expr: ast.expr) -> Optional[str]:
        """The parameter `expr` is (never reassigned), a slice of, or a tensor-keeping call of."""
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in TENSOR_KEEPING:
            return self._root_param(expr.func.value)
        if isinstance(expr, ast.Subscript) and keeps(expr):
            return self._root_param(expr.value)
        if not isinstance(expr, ast.Name):
            return None
        if expr.id in self.all_params:
            return expr.id if expr.id not in self.assigned else None
        roots = self._per_name("root", expr.id, lambda values: {self._root_param(value) for value in values})
        return next(iter(roots)) if roots is not None and len(roots) == 1 else None

    def _return(self, node: ast.Return) -> Return:
        value = node.value
        if value is None:
            return Return(node.lineno, "other")
        raw = self.raw(value)
        if raw is not None:
            return Return(node.lineno, "raw", raw)
        if self.marked(value):
            return Return(node.lineno, "marked")
        paged = self.paged(value)
        if paged is not None:
            direct = isinstance(value, ast.Call) and trailing(value.func) in self.contract.buffer_accessors
            return Return(node.lineno, "paged", paged, direct=direct)
        if isinstance(value, ast.Call):
            spelling = self._spelling(value.func)
            if spelling is not None:
                return Return(node.lineno, "call", callee=spelling)
        return Return(node.lineno, "other")

    def _per_name(self, question: str, name: str, answer: Callable[[list[ast.expr]], _Answer]) -> Optional[_Answer]:
        """`answer` over every value assigned to the local `name` (None for a parameter or an unbound
        name), once per name: a name assigned from itself (`k = k[:n]`) meets None on that path, so
        the walk is linear in the function, not exponential in its reassignments."""
        key = (question, name)
        if key not in self._answers:
            values = None if name in self.all_params else self.assigned.get(name)
            self._answers[key] = None
            self._answers[key] = answer(values) if values else None
        return self._answers[key]  # type: ignore[return-value]

    def raw(self, expr: ast.expr) -> Optional[str]:
        """The batch's raw loc on every path of `expr`, spelt; the cross-attention idiom counts."""
        attributes = self.contract.loc_attributes
        if isinstance(expr, ast.Attribute) and expr.attr in attributes:
            return ast.unparse(expr)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr in attributes:
            return ast.unparse(expr)
        if isinstance(expr, ast.IfExp):
            branches = [self.raw(branch) for branch in (expr.body, expr.orelse)]
            # A raw branch under the cross-attention flag, or both raw.
            idiom = any(isinstance(b, ast.Attribute) and b.attr == ENCODER_LOC for b in (expr.body, expr.orelse))
            if all(branches) or (idiom and any(branches) and CROSS_ATTENTION_FLAG in ast.unparse(expr.test)):
                return next(b for b in branches if b)
            return None
        if isinstance(expr, ast.Name):
            found = self._per_name("raw", expr.id, lambda values: [self.raw(value) for value in values])
            if found and all(found):
                return found[0]
        return None

    def marked(self, expr: ast.expr) -> bool:
        cls = self.contract.write_loc_class
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id == cls:
                return any(k.arg == self.contract.mark for k in expr.keywords)
            if isinstance(func, ast.Attribute) and _dotted(func.value).rsplit(".", 1)[-1] == cls:
                return True
        if isinstance(expr, ast.Name):
            found = self._per_name("marked", expr.id, lambda values: [self.marked(value) for value in values])
            return found is not None and bool(found) and all(found)
        return False

    def paged(self, expr: ast.expr) -> Optional[str]:
        """The accessor paged KV in `expr` comes from, if it is one (or a slice, or a tensor-keeping call of one)."""
        accessors = self.contract.buffer_accessors
        if isinstance(expr, ast.Call):
            name = trailing(expr.func)
            if name in accessors or name in PAGED_HELPERS:
                return name
            if name in TENSOR_KEEPING and isinstance(expr.func, ast.Attribute):
                return self.paged(expr.func.value)
            return None
        if isinstance(expr, ast.Subscript):
            if trailing(expr.value) in accessors and isinstance(expr.value, ast.Attribute):
                return trailing(expr.value)
            if keeps(expr):
                return self.paged(expr.value)
            return None
        if isinstance(expr, ast.Name):
            found = self._per_name("paged", expr.id, lambda values: [self.paged(value) for value in values])
            if found and all(found):
                return found[0]
        return None

    def _uses(self) -> list[ParamUse]:
        found: list[ParamUse] = []
        for call in self.calls:
            name = trailing(call.func)
            door_index = self.doors.get(name or "")
            spelling = self._spelling(call.func)
            positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
            if len(positional) != len(call.args):
                positional = call.args[: next(i for i, a in enumerate(call.args) if isinstance(a, ast.Starred))]
            for position, arg in enumerate(positional):
                param = self._param_of(arg)
                if param is None:
                    continue
                if door_index is not None and position == door_index:
                    found.append(ParamUse(param, call.lineno, door=name or ""))
                elif spelling is not None:
                    found.append(ParamUse(param, call.lineno, callee=spelling, position=position))
            for keyword in call.keywords:
                param = self._param_of(keyword.value) if keyword.arg else None
                if param is None:
                    continue
                if door_index is not None and keyword.arg in LOC_KEYWORDS:
                    found.append(ParamUse(param, call.lineno, door=name or ""))
                elif spelling is not None:
                    found.append(ParamUse(param, call.lineno, callee=spelling, keyword=keyword.arg or ""))
        return found

    def _param_of(self, arg: ast.expr) -> Optional[str]:
        """The parameter `arg` is, unchanged: the parameter itself, never reassigned."""
        if isinstance(arg, ast.Name) and arg.id in self.all_params and arg.id not in self.assigned:
            return arg.id
        return None


def _dotted(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        inner = _dotted(expr.value)
        return f"{inner}.{expr.attr}" if inner else ""
    if isinstance(expr, ast.Subscript):
        return _dotted(expr.value)
    return ""
