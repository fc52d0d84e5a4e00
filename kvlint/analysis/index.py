"""One pass over a module that every rule shares: calls, functions, imports.

Rules look up candidate calls by the trailing name of the callee
(`x.set_kv_buffer(...)` -> "set_kv_buffer") instead of each walking the whole
tree; the walk is the dominant cost after parsing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import repeat
from typing import Optional, Sequence, cast

import libcst as cst

from kvlint.api.rule import FileContext
from kvlint.analysis.walk import code_children


@dataclass(frozen=True)
class CallSite:
    call: cst.Call
    # The innermost function holding the call, or None at module/class level.
    function: Optional[cst.FunctionDef]
    # The innermost class holding `function` (or the call), if any.
    klass: Optional[cst.ClassDef]


@dataclass
class ModuleIndex:
    calls_by_name: dict[str, list[CallSite]] = field(default_factory=lambda: defaultdict(list))
    functions: list[tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = field(default_factory=list)
    classes: list[cst.ClassDef] = field(default_factory=list)
    # id of a function defined inside another function (in its body, or in a class there) -> that function.
    enclosing: dict[int, cst.FunctionDef] = field(default_factory=dict)
    # local name -> dotted origin ("pkg.mod.Name" for `from pkg.mod import Name as local`,
    # "pkg.mod" for `import pkg.mod as local`).
    imports: dict[str, str] = field(default_factory=dict)

    def calls(self, *names: str) -> list[CallSite]:
        found: list[CallSite] = []
        for name in names:
            found.extend(self.calls_by_name.get(name, ()))
        return found


def trailing_name(expr: cst.BaseExpression, *, through_subscript: bool = False) -> Optional[str]:
    """`name` for a Name, the last attribute for `a.b.name`; otherwise None.

    With `through_subscript`, a subscripted type names its origin: `C[int]` -> "C".
    """
    # By exact type, as in `build_index`, which asks this of every call.
    if through_subscript and type(expr) is cst.Subscript:
        expr = expr.value
    kind = type(expr)
    if kind is cst.Name:
        return cast(cst.Name, expr).value
    if kind is cst.Attribute:
        return cast(cst.Attribute, expr).attr.value
    return None


def callee_name(call: cst.Call) -> Optional[str]:
    """The trailing name of what is called: `a.b.c(...)` -> "c", `f(...)` -> "f"."""
    return trailing_name(call.func)


def module_index(ctx: FileContext) -> ModuleIndex:
    """The file's index, built once and shared by every rule that asks."""
    return ctx.analysis("module-index", lambda: build_index(ctx.module))


def build_index(module: cst.Module) -> ModuleIndex:
    index = ModuleIndex()
    calls = index.calls_by_name
    # (node, innermost function, innermost class) in source order.
    stack: list[tuple[cst.CSTNode, Optional[cst.FunctionDef], Optional[cst.ClassDef]]] = [(module, None, None)]
    while stack:
        node, function, klass = stack.pop()
        # By exact type: these node classes have no subclasses, and `isinstance` on LibCST's
        # abstract base goes through `ABCMeta` for every node of the file (a fifth of this walk).
        kind = type(node)
        if kind is cst.Name:
            # Two nodes in five; a name holds no code.
            continue
        if kind is cst.Call:
            name = callee_name(cast(cst.Call, node))
            if name is not None:
                calls[name].append(CallSite(cast(cst.Call, node), function, klass))
        elif kind is cst.FunctionDef:
            if function is not None:
                index.enclosing[id(node)] = function
            function = cast(cst.FunctionDef, node)
            index.functions.append((function, klass))
        elif kind is cst.ClassDef:
            klass = cast(cst.ClassDef, node)
            index.classes.append(klass)
        elif kind is cst.Import:
            _record_import(index, cast(cst.Import, node))
        elif kind is cst.ImportFrom:
            _record_import_from(index, cast(cst.ImportFrom, node))
        children = code_children(node)
        children.reverse()
        # `zip` with `repeat` builds the stack's tuples in C: a generator expression cost half the walk.
        stack.extend(zip(children, repeat(function), repeat(klass)))
    return index


def _record_import(index: ModuleIndex, node: cst.Import) -> None:
    for alias in node.names:
        dotted = _dotted(alias.name)
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            index.imports[alias.asname.name.value] = dotted
        else:
            index.imports[dotted.split(".")[0]] = dotted.split(".")[0]


def _record_import_from(index: ModuleIndex, node: cst.ImportFrom) -> None:
    index.imports.update(import_from_origins(node))


def import_from_origins(node: cst.ImportFrom) -> dict[str, str]:
    """local name -> `pkg.mod.Name` for `from pkg.mod import Name [as local]`; the one spelling of an origin."""
    if isinstance(node.names, cst.ImportStar) or node.module is None:
        return {}
    base = "." * len(node.relative) + _dotted(node.module)
    origins: dict[str, str] = {}
    for alias in node.names:
        name = _dotted(alias.name)
        local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
        origins[local] = f"{base}.{name}"
    return origins


def top_level_imports(module: cst.Module) -> dict[str, str]:
    """`import_from_origins` of the module-level `from` imports, including inside `if`/`try` blocks."""
    imports: dict[str, str] = {}
    for statement in _top_level_statements(module.body):
        if isinstance(statement, cst.ImportFrom):
            imports.update(import_from_origins(statement))
    return imports


def _top_level_statements(body: Sequence[cst.BaseStatement]) -> list[cst.BaseSmallStatement]:
    found: list[cst.BaseSmallStatement] = []
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            found.extend(statement.body)
        elif isinstance(statement, (cst.If, cst.Try)) and isinstance(statement.body, cst.IndentedBlock):
            found.extend(_top_level_statements(statement.body.body))
    return found


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def is_none(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
