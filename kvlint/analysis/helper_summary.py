"""One file's functions as the project index needs them, read with CPython's `ast`.

For each module function and each method: what every `return` gives (the
batch's raw loc, a marked loc, paged KV, another call's result, or something
else) and where each parameter goes (a write door's loc argument, or an
argument of another call). Nothing is resolved here: calls are kept as
spellings (`self._kv_write_loc`, `helper`, `mod.helper`) for
`kvlint.analysis.project_index` to resolve across files. A summary depends on
the file's bytes and the contract only, so the engine caches it by content.

Local names are followed through their assignments in the same function: a
name is a raw loc (or paged KV) when every value assigned to it is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional, Union

from kvlint.analysis._ast_imports import bound_names, imports_of, module_imports
from kvlint.api.contract import LOC_KEYWORDS, PAGED_HELPERS, Contract

# Calls that return the same tensor (or a view of the same storage): the paged-KV fact survives them.
# `.to`/`.type` return `self` when the dtype and device already match; `.detach()` and
# `.requires_grad_()` share storage; `.view(dtype)` reinterprets the same bytes.
TENSOR_KEEPING = ("to", "type", "detach", "requires_grad_", "view")
CROSS_ATTENTION_FLAG = "is_cross_attention"
ENCODER_LOC = "encoder_out_cache_loc"

Spelling = tuple[str, ...]
_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Return:
    line: int
    # "raw" | "marked" | "paged" | "call" | "other"
    kind: str
    # raw: the source of the raw loc; paged: the accessor's name.
    detail: str = ""
    callee: Optional[Spelling] = None
    # paged: the accessor's own result, `pool.get_key_buffer(i)`, its per-layer `(slots, ...)` form.
    direct: bool = False


@dataclass(frozen=True)
class ParamUse:
    """Parameter `param` is passed at `line` as a write door's loc (`door`) or to `callee`."""

    param: str
    line: int
    door: str = ""
    callee: Optional[Spelling] = None
    position: int = -1
    keyword: str = ""


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    line: int
    # Parameters a caller passes, self/cls left out for a method.
    params: tuple[str, ...]
    returns: tuple[Return, ...]
    uses: tuple[ParamUse, ...]
    # Parameters whose every load is one of `uses`.
    only_passed: frozenset[str]


    def returns_own(self) -> bool:
        """A raw loc or paged KV among its own returns (no call resolved)."""
        return any(ret.kind in ("raw", "paged") for ret in self.returns)

    def door_slots(self) -> set[tuple[str, object]]:
        """(name, position) and (name, keyword) of each parameter passed straight to a door's loc."""
        return {slot for use in self.uses if use.door for slot in self._slots(use.param)}

    def slots_passing_to(self, slots: set[tuple[str, object]]) -> set[tuple[str, object]]:
        """The slots of the parameters it passes to a call at one of `slots` (a parameter chain's link)."""
        found: set[tuple[str, object]] = set()
        for use in self.uses:
            if use.callee is None:
                continue
            at = (use.callee[-1], use.keyword or use.position)
            if at in slots:
                found |= self._slots(use.param)
        return found

    def _slots(self, param: str) -> set[tuple[str, object]]:
        slots: set[tuple[str, object]] = {(self.name, param)}
        if param in self.params:
            slots.add((self.name, self.params.index(param)))
        return slots

    def returns_call_of(self, names: set[str]) -> bool:
        """A return of a call of one of `names` (a link of a returning chain)."""
        return any(ret.callee is not None and ret.callee[-1] in names for ret in self.returns)



@dataclass(frozen=True)
class ClassSummary:
    name: str
    line: int
    # Base classes as written: "Base", "mod.Base".
    bases: tuple[str, ...]
    methods: dict[str, FunctionSummary]


@dataclass(frozen=True)
class FileSummary:
    # local name -> absolute dotted origin ("pkg.mod.f" or "pkg.mod").
    imports: dict[str, str]
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    # Call spellings made in each class's methods ("" for module functions): what a view resolves.
    calls: dict[str, set[Spelling]] = field(default_factory=dict)
    # (class or "", spelling) -> (every such call is a write door's loc argument, a line of one).
    call_uses: dict[tuple[str, Spelling], tuple[bool, int]] = field(default_factory=dict)

    def all_functions(self) -> list[FunctionSummary]:
        return [*self.functions.values(), *(m for klass in self.classes.values() for m in klass.methods.values())]


def summarize(tree: ast.Module, module: str, is_package: bool, contract: Contract) -> FileSummary:
    """The summary of a parsed module whose dotted name is `module`."""
    imports: list[ast.stmt] = []
    summary = FileSummary(imports={})
    doors = dict(contract.write_doors)
    module_imports(tree.body, imports)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            reader = _FunctionReader(node, False, contract, doors, imports)
            summary.functions[node.name] = reader.summary()
            summary.calls.setdefault("", set()).update(reader.spellings())
            reader.record_uses("", summary.call_uses)
        elif isinstance(node, ast.ClassDef):
            methods = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    reader = _FunctionReader(item, True, contract, doors, imports)
                    methods[item.name] = reader.summary()
                    summary.calls.setdefault(node.name, set()).update(reader.spellings())
                    reader.record_uses(node.name, summary.call_uses)
            bases = tuple(text for text in (_dotted(base) for base in node.bases) if text)
            summary.classes[node.name] = ClassSummary(node.name, node.lineno, bases, methods)
    summary.imports.update(imports_of(imports, module, is_package))
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
        self, node: _Function, method: bool, contract: Contract, doors: dict[str, int], imports: list[ast.stmt]
    ) -> None:
        self.node = node
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
        self.returns: list[ast.Return] = []
        self.calls: list[ast.Call] = []
        self.loads: dict[str, int] = {}
        self._walk(node)

    def _walk(self, root: _Function) -> None:
        stack: list[ast.AST] = list(root.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Return):
                self.returns.append(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                for bound in bound_names(node):
                    self.assigned.setdefault(bound, []).append(ast.Constant(None))
            elif isinstance(node, ast.Call):
                self.calls.append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                # A function-level import may bring in the helper the function calls.
                self.imports.append(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.loads[node.id] = self.loads.get(node.id, 0) + 1
            stack.extend(ast.iter_child_nodes(node))

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        else:
            # Unpacking and attribute/subscript stores: a name bound so is unknown.
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    self.assigned.setdefault(name.id, []).append(ast.Constant(None))

    def record_uses(self, klass: str, uses: dict[tuple[str, Spelling], tuple[bool, int]]) -> None:
        """For each call spelling: whether every such call's result goes straight into a door's loc."""
        at_doors: set[int] = set()
        for call in self.calls:
            index = self.doors.get(_trailing(call.func) or "")
            if index is None:
                continue
            args = [a for a in call.args if not isinstance(a, ast.Starred)]
            if index < len(args) and len(args) == len(call.args):
                at_doors.add(id(args[index]))
            at_doors.update(id(k.value) for k in call.keywords if k.arg in LOC_KEYWORDS)
        for call in self.calls:
            spelling = call_spelling(call.func)
            if spelling is None:
                continue
            key = (klass if spelling[0] in ("self", "cls", "super") else "", spelling)
            only, line = uses.get(key, (True, call.lineno))
            uses[key] = (only and id(call) in at_doors, line)

    def spellings(self) -> set[Spelling]:
        return {spelling for spelling in map(call_spelling, (c.func for c in self.calls)) if spelling is not None}

    def summary(self) -> FunctionSummary:
        returns = tuple(self._return(node) for node in self.returns)
        uses = tuple(self._uses())
        passed: dict[str, int] = {}
        for use in uses:
            passed[use.param] = passed.get(use.param, 0) + 1
        only = frozenset(p for p, n in passed.items() if self.loads.get(p, 0) == n and p not in self.assigned)
        return FunctionSummary(self.node.name, self.node.lineno, self.params, returns, uses, only)

    def _return(self, node: ast.Return) -> Return:
        value = node.value
        if value is None:
            return Return(node.lineno, "other")
        raw = self.raw(value, 0)
        if raw is not None:
            return Return(node.lineno, "raw", raw)
        if self.marked(value, 0):
            return Return(node.lineno, "marked")
        paged = self.paged(value, 0)
        if paged is not None:
            direct = isinstance(value, ast.Call) and _trailing(value.func) in self.contract.buffer_accessors
            return Return(node.lineno, "paged", paged, direct=direct)
        if isinstance(value, ast.Call):
            spelling = call_spelling(value.func)
            if spelling is not None:
                return Return(node.lineno, "call", callee=spelling)
        return Return(node.lineno, "other")

    def _defs(self, name: str) -> Optional[list[ast.expr]]:
        """Every value assigned to a local `name`; None for a parameter or an unbound name."""
        if name in self.all_params:
            return None
        return self.assigned.get(name)

    def raw(self, expr: ast.expr, depth: int) -> Optional[str]:
        """The batch's raw loc on every path of `expr`, spelt; the cross-attention idiom counts."""
        attributes = self.contract.loc_attributes
        if isinstance(expr, ast.Attribute) and expr.attr in attributes:
            return ast.unparse(expr)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr in attributes:
            return ast.unparse(expr)
        if isinstance(expr, ast.IfExp):
            branches = [self.raw(branch, depth + 1) for branch in (expr.body, expr.orelse)]
            # A raw branch under the cross-attention flag, or both raw.
            idiom = any(isinstance(b, ast.Attribute) and b.attr == ENCODER_LOC for b in (expr.body, expr.orelse))
            if all(branches) or (idiom and any(branches) and CROSS_ATTENTION_FLAG in ast.unparse(expr.test)):
                return next(b for b in branches if b)
            return None
        if isinstance(expr, ast.Name) and depth < 8:
            defs = self._defs(expr.id)
            if defs:
                found = [self.raw(value, depth + 1) for value in defs]
                if all(found):
                    return found[0]
        return None

    def marked(self, expr: ast.expr, depth: int) -> bool:
        cls = self.contract.write_loc_class
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id == cls:
                return any(k.arg == self.contract.mark for k in expr.keywords)
            if isinstance(func, ast.Attribute) and _dotted(func.value).rsplit(".", 1)[-1] == cls:
                return True
        if isinstance(expr, ast.Name) and depth < 8:
            defs = self._defs(expr.id)
            return bool(defs) and all(self.marked(value, depth + 1) for value in defs)  # type: ignore[union-attr]
        return False

    def paged(self, expr: ast.expr, depth: int) -> Optional[str]:
        """The accessor paged KV in `expr` comes from, if it is one (or a slice, or a tensor-keeping call of one)."""
        accessors = self.contract.buffer_accessors
        if isinstance(expr, ast.Call):
            name = _trailing(expr.func)
            if name in accessors or name in PAGED_HELPERS:
                return name
            if name in TENSOR_KEEPING and isinstance(expr.func, ast.Attribute):
                return self.paged(expr.func.value, depth + 1)
            return None
        if isinstance(expr, ast.Subscript):
            if _trailing(expr.value) in accessors and isinstance(expr.value, ast.Attribute):
                return _trailing(expr.value)
            if _keeps(expr):
                return self.paged(expr.value, depth + 1)
            return None
        if isinstance(expr, ast.Name) and depth < 8:
            defs = self._defs(expr.id)
            if defs:
                found = [self.paged(value, depth + 1) for value in defs]
                if all(found):
                    return found[0]
        return None

    def _uses(self) -> list[ParamUse]:
        found: list[ParamUse] = []
        for call in self.calls:
            name = _trailing(call.func)
            door_index = self.doors.get(name or "")
            spelling = call_spelling(call.func)
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


def _keeps(subscript: ast.Subscript) -> bool:
    """Slices and integer literals select within the tensor; other indices gather a copy."""
    index = subscript.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(
        isinstance(part, ast.Slice) or (isinstance(part, ast.Constant) and isinstance(part.value, int))
        or (isinstance(part, ast.Constant) and part.value is Ellipsis)
        for part in parts
    )


def _trailing(expr: ast.expr) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
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
