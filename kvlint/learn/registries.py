"""Factories a module keeps in a registry of its own, and the functions that hand them out.

    _KV_POOL_FACTORIES: List[...] = []

    def register_kv_pool_factory(name, predicate, factory):
        _KV_POOL_FACTORIES.append((name, predicate, factory))

    def resolve_kv_pool_factory(model_config, server_args):
        for name, predicate, factory in _KV_POOL_FACTORIES: ...

A plugin registers its class at import, a module-level call (`register_kv_pool_factory("v4",
pred, V4Pool)`); no code names the class where it is built. It is built where what the registry
holds is handed out and called: kvlint takes that to be wherever a function reading the registry
(`resolve_...`) is called (`kvlint.learn.ties`). A registration inside a function is not read so:
it ties the class as any other place naming it does. Read here: a module-level list or dict (`= []`, `= {}`, `list()`,
`dict()`); a module-level function storing one of its parameters in it (`.append(...)`,
`.insert(i, ...)`, `[key] = ...`, `.setdefault(key, ...)`, the parameter itself or inside a tuple)
registers; every other module-level function reading it hands out.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from kvlint.learn.memo import remembered
from kvlint.learn.statements import statements_spelling

# A module-level empty list or dict, maybe annotated: a file without one keeps no registry. Found
# after a newline (and at the file's start): a regex anchored at every line cost 4x as much.
_EMPTY_LINE = rb"([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=[ \t]*(?:\[\]|\{\}|list\(\)|dict\(\))[ \t]*(?=\r?\n|\Z)"
_EMPTY_FIRST = re.compile(_EMPTY_LINE)
_EMPTY = re.compile(b"\n" + _EMPTY_LINE)
_STORES = frozenset({"append", "insert", "setdefault"})


@dataclass(frozen=True)
class Registering:
    """A function storing its `parameters` (names, by position) in a registry that `readers` hand out."""

    function: str
    parameters: tuple[tuple[int, str], ...]
    readers: tuple[str, ...]

    def stores(self, argument: int | str) -> bool:
        """Whether the argument at this position (or of this keyword) is stored."""
        return any(argument in (position, name) for position, name in self.parameters)


def registerings_of(data: bytes, function: str) -> tuple[Registering, ...]:
    """The registering functions named `function` this file defines."""
    if f"def {function}(".encode() not in data:
        return ()
    return tuple(registering for registering in registerings(data) if registering.function == function)


def registerings(data: bytes) -> tuple[Registering, ...]:
    """The registering functions this file defines."""
    if not any(_stored_into(data, name) for name in _empty_names(data)):
        return ()
    return tuple(remembered("registerings", data, (), lambda: list(_read(data))))


def _empty_names(data: bytes) -> list[bytes]:
    """The names a line at column 0 binds to an empty list or dict."""
    first = _EMPTY_FIRST.match(data)
    return ([first.group(1)] if first is not None else []) + _EMPTY.findall(data)


def _stored_into(data: bytes, container: bytes) -> bool:
    """Whether the file may store into `container` (read from the bytes: most files keep no registry)."""
    if any(container + store in data for store in (b".append(", b".insert(", b".setdefault(")):
        return True
    return re.search(rb"\b" + re.escape(container) + rb"\[[^\]\n]*\][ \t]*=(?!=)", data) is not None


def _read(data: bytes) -> Iterator[Registering]:
    # Only the statements spelling a container are parsed: the registry, what stores, what reads.
    named = {name.decode() for name in _empty_names(data)}
    statements = [statement for statement, _, _ in statements_spelling(data, named)]
    containers = {name for statement in statements for name in _empty_containers(statement)}
    if not containers:
        return
    functions = [statement for statement in statements if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))]
    stored = {function.name: found for function in functions if (found := _stored(function, containers))}
    for name, (container, parameters) in stored.items():
        readers = tuple(function.name for function in functions
                        if function.name not in stored and _reads(function, container))
        if readers:
            yield Registering(name, parameters, readers)


def _empty_containers(statement: ast.stmt) -> Iterator[str]:
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return
    empty = (isinstance(value, (ast.List, ast.Dict)) and not (value.elts if isinstance(value, ast.List) else value.keys)) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("list", "dict")
        and not value.args and not value.keywords)
    if empty:
        yield from (target.id for target in targets if isinstance(target, ast.Name))


def _stored(function: ast.FunctionDef | ast.AsyncFunctionDef,
            containers: set[str]) -> Optional[tuple[str, tuple[tuple[int, str], ...]]]:
    """(registry, its stored parameters by position) where `function` stores parameters of its own in a registry."""
    parameters = [arg.arg for arg in (*function.args.posonlyargs, *function.args.args)]
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORES:
            container, values = node.func.value, node.args[-1:]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            container, values = node.targets[0].value, [node.value]
        else:
            continue
        if not (isinstance(container, ast.Name) and container.id in containers):
            continue
        stored = {parameters.index(element.id): element.id for value in values
                  for element in (value.elts if isinstance(value, ast.Tuple) else [value])
                  if isinstance(element, ast.Name) and element.id in parameters}
        if stored:
            return container.id, tuple(sorted(stored.items()))
    return None


def _reads(function: ast.FunctionDef | ast.AsyncFunctionDef, container: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == container and isinstance(node.ctx, ast.Load)
               for node in ast.walk(function))
