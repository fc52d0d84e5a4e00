"""What one file states of a backend registry, and where it names a class or function.

A registry is a decorator `register(name)` whose inner function stores the decorated factory
under `name` (`ATTENTION_BACKENDS[name] = fn`); its factories are the module functions decorated
`@register("triton")`. What a factory returns is read on every branch: `return X(...)` names X
(through the file's `import ... as` aliases), `return other_factory(...)` delegates, anything
else (a variable, a call kvlint cannot name) makes the factory opaque.

An older engine has no registry: one function picks the backend by comparing its parameter
with each name in an `if`/`elif` chain (`if backend_str == "ascend": return AscendAttnBackend(self)`).
`dispatch_factories` reads such a chain as a registry whose factories are all that one function:
what each branch returns is what its name builds.

`references` is how admission tells whether a class could be built outside the factories that
refuse it: every place a file names it as a value (a call, an argument, a binding), and any
string equal to it (a class looked up by name). A name in an import, a class's bases, an
annotation or an `isinstance` test builds nothing (`kvlint.learn.statements.building_nothing`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from kvlint.learn.memo import remembered
from kvlint.learn.statements import building_nothing, may_spell, spelling, statements_spelling
from kvlint.learn.tree import names_spelled, parsed_tree


@dataclass(frozen=True)
class FactoryRead:
    name: str
    function: str
    # Named by `return X(...)`, on any branch; `delegates`: other functions returned by a call.
    returned: tuple[str, ...]
    opaque: bool
    line: int = field(compare=False)


# A module-level decorator taking a string: `@register_attention_backend("triton")`. Matched after
# a newline, not at `^` under MULTILINE: a search for the newline's bytes skips ahead, where `^`
# is tried at every line start (a tenth of learning the admission on sglang/srt).
_NAMED_DECORATOR = re.compile(rb"\n@(\w+)\([ \t]*[\"']")


def registry_factories(data: bytes) -> tuple[FactoryRead, ...]:
    """The factories a file registers, remembered by content."""
    if b"@" not in data:
        return ()
    # Only a file defining the decorator it applies can be read as a registry.
    decorators = {match.group(1) for match in _NAMED_DECORATOR.finditer(b"\n" + data)}
    if not any(b"def " + name + b"(" in data for name in decorators):
        return ()
    return tuple(remembered("registry-factories", data, (), lambda: list(_factories(data))))


# `name == "triton"`, twice or more in a file: a chain comparing one name with backend names.
_COMPARED_NAME = re.compile(rb"\b(\w+) == [\"']")


def dispatch_factories(data: bytes) -> tuple[FactoryRead, ...]:
    """The backend names an `if`/`elif` chain of a function (a module function or a method)
    compares one of its parameters with, each with what its branch returns; remembered by content."""
    compared = [match.group(1) for match in _COMPARED_NAME.finditer(data)]
    if len(compared) == len(set(compared)):
        return ()
    return tuple(remembered("dispatch-factories", data, (), lambda: list(_dispatches(data))))


def _dispatches(data: bytes) -> Iterator[FactoryRead]:
    tree = parsed_tree(data)
    if tree is None:
        return
    aliases = _aliases(tree)
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        parameters = {arg.arg for arg in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
        for statement in function.body:
            branches = list(_chain(statement, parameters)) if isinstance(statement, ast.If) else []
            # One parameter compared with two names at least: a dispatch, not a lone special case.
            if len(branches) < 2 or len({parameter for parameter, _, _ in branches}) != 1:
                continue
            local = {**aliases, **_aliases(function)}
            for _, name, branch in branches:
                returned, opaque = _returned(branch, local)
                yield FactoryRead(name, function.name, returned, opaque, branch.lineno)


def _chain(node: ast.If, parameters: set[str]) -> Iterator[tuple[str, str, ast.If]]:
    """(parameter, name, branch) for each link of an `if`/`elif` chain testing `parameter == "name"`."""
    while True:
        test = node.test
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
                and isinstance(test.left, ast.Name) and test.left.id in parameters
                and isinstance(test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, str)):
            yield test.left.id, test.comparators[0].value, node
        if len(node.orelse) != 1 or not isinstance(node.orelse[0], ast.If):
            return
        node = node.orelse[0]


def _factories(data: bytes) -> Iterator[FactoryRead]:
    tree = parsed_tree(data)
    if tree is None:
        return
    registers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and _is_register(node)}
    if not registers:
        return
    aliases = _aliases(tree)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            name = _registered_name(decorator, registers)
            if name is not None:
                returned, opaque = _returned(node, {**aliases, **_aliases(node)})
                yield FactoryRead(name, node.name, returned, opaque, node.lineno)


def _is_register(function: ast.FunctionDef) -> bool:
    """`def register(name): def decorator(fn): D[name] = fn ...`."""
    if len(function.args.args) != 1:
        return False
    key = function.args.args[0].arg
    for inner in function.body:
        if isinstance(inner, ast.FunctionDef) and len(inner.args.args) == 1:
            stored = inner.args.args[0].arg
            for node in ast.walk(inner):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == stored
                        and any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id == key
                                for t in node.targets)):
                    return True
    return False


def _registered_name(decorator: ast.expr, registers: set[str]) -> Optional[str]:
    if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id in registers
            and len(decorator.args) == 1 and isinstance(decorator.args[0], ast.Constant)
            and isinstance(decorator.args[0].value, str)):
        return decorator.args[0].value
    return None


def _aliases(node: ast.AST) -> dict[str, str]:
    """`import ... X as Y` in `node`'s own body (a function's local imports included): Y -> X."""
    found = {}
    for inner in ast.walk(node) if isinstance(node, ast.FunctionDef) else getattr(node, "body", ()):
        if isinstance(inner, ast.ImportFrom):
            for alias in inner.names:
                if alias.asname:
                    found[alias.asname] = alias.name
    return found


def _returned(function: ast.AST, aliases: dict[str, str]) -> tuple[tuple[str, ...], bool]:
    names: list[str] = []
    opaque = False
    body = function.body if isinstance(function, ast.If) else [function]
    for node in (inner for part in body for inner in ast.walk(part)):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        called = value.func if isinstance(value, ast.Call) else None
        name = called.id if isinstance(called, ast.Name) else called.attr if isinstance(called, ast.Attribute) else None
        if name is None:
            opaque = True
        else:
            names.append(aliases.get(name, name))
    return tuple(dict.fromkeys(names)), opaque


@dataclass(frozen=True)
class Reference:
    """`name` used as a value (or spelled in a string, `kind` "string"; imported under another
    name, "alias") inside the top-level definition `place` ("" at module level), in its method
    `method` where `place` is a class ("" elsewhere)."""

    name: str
    kind: str
    place: str
    line: int = field(compare=False)
    method: str = ""


def references(data: bytes, names: tuple[str, ...]) -> tuple[Reference, ...]:
    """Where a file names any of `names` in a way that could build it, remembered by content."""
    wanted = names_spelled(data, names)
    if not wanted:
        return ()
    return tuple(remembered("references", data, wanted, lambda: list(_references(data, set(wanted)))))


def _references(data: bytes, wanted: set[str]) -> Iterator[Reference]:
    for statement, offset, hits in statements_spelling(data, wanted):
        place = statement.name if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
        quiet = building_nothing(statement, hits, data)
        # A class's methods one by one, so each reference says which method holds it.
        parts: list[tuple[ast.AST, str]] = [(item, item.name if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else "")
                 for item in statement.body if may_spell(item, hits)] if isinstance(statement, ast.ClassDef) else []
        if isinstance(statement, ast.ClassDef):
            parts += [(node, "") for node in (*statement.bases, *statement.keywords, *statement.decorator_list)]
        for part, method in parts or [(statement, "")]:
            yield from _references_in(part, hits, quiet, wanted, place, method, offset)


def _references_in(node: ast.AST, hits: list[int], quiet: set[int], wanted: set[str], place: str, method: str,
                   offset: int) -> Iterator[Reference]:
    for inner in spelling(node, hits):
        if id(inner) in quiet:
            continue
        if isinstance(inner, ast.ImportFrom):
            for alias in inner.names:
                if alias.name in wanted and alias.asname and alias.asname != alias.name:
                    yield Reference(alias.name, "alias", place, inner.lineno + offset, method)
            continue
        name = inner.id if isinstance(inner, ast.Name) else inner.attr if isinstance(inner, ast.Attribute) else None
        if name in wanted and name is not None:
            yield Reference(name, "value", place, getattr(inner, "lineno", 0) + offset, method)
        elif isinstance(inner, ast.Constant) and inner.value in wanted:
            yield Reference(str(inner.value), "string", place, inner.lineno + offset, method)
