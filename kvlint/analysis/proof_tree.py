"""The tree a `--prove` run reads: functions, classes and imports of each file, and calls resolved across files.

Read with CPython's `ast`, lazily: a file is parsed when a proof first needs
it (it holds a door call, defines a helper a loc comes from, or calls a
function whose parameter is a loc). Resolution follows the project index's
rules (`kvlint.analysis.project_index`): `f(...)` in the same module or
through `from x import f`, `mod.f(...)` through `import`, `self.m(...)` /
`cls.m(...)` through the enclosing class and its bases across files (the
subclass's override first), `super().m(...)` through the bases. A call it
cannot resolve is no place, never a guess; for a proof that is where it stops.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Optional, Union

from kvlint.analysis._ast_imports import module_imports, imports_of
from kvlint.analysis.project_index import ModuleMap, module_parts

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Place:
    """A function of the tree: its file, its class ("" for a module function) and its node."""

    path: str
    klass: str
    function: FunctionNode = field(compare=False, hash=False)
    # Identity of the node, so two places of one function compare equal.
    line: int = 0

    @property
    def name(self) -> str:
        return f"{self.klass}.{self.function.name}" if self.klass else self.function.name

    def shown(self) -> str:
        return f"{self.path}:{self.function.lineno}"


@dataclass
class Module:
    tree: ast.Module
    functions: dict[str, FunctionNode]
    classes: dict[str, ast.ClassDef]
    # local name -> absolute dotted origin ("pkg.mod.f" or "pkg.mod").
    imports: dict[str, str]
    lines: list[bytes]


class ProofTree:
    def __init__(self, sources: Mapping[str, bytes]) -> None:
        self.sources = sources
        self._modules: dict[str, Optional[Module]] = {}
        self.modules = ModuleMap(sources)
        self._callers: dict[str, list[tuple[Place, ast.Call]]] = {}

    def replaced(self, path: str, data: bytes) -> "ProofTree":
        """The same tree with `path` holding `data`: the other files' parses are shared, not redone."""
        tree = ProofTree.__new__(ProofTree)
        tree.sources = {**self.sources, path: data}
        tree._modules = {known: module for known, module in self._modules.items() if known != path}
        tree.modules = self.modules
        tree._callers = {}
        return tree

    def module(self, path: str) -> Optional[Module]:
        if path not in self._modules:
            self._modules[path] = _read(path, self.sources.get(path))
        return self._modules[path]

    def places(self, path: str, words: tuple[bytes, ...]) -> Iterator[Place]:
        """The functions of `path` whose text holds one of `words`, nested ones included, with the
        class a method belongs to. Only those are walked: a pool file holds hundreds of methods."""
        module = self.module(path)
        if module is None:
            return
        stack: list[tuple[ast.AST, str]] = [(node, "") for node in module.tree.body]
        while stack:
            node, klass = stack.pop()
            if isinstance(node, ast.ClassDef):
                stack.extend((item, node.name) for item in node.body)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                text = b"".join(module.lines[node.lineno - 1: node.end_lineno])
                if not any(word in text for word in words):
                    continue
                yield Place(path, klass, node, node.lineno)
                # A nested function belongs to no class: `self` there is a closure, not its receiver.
                nested = (inner for inner in own_nodes(node) if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)))
                stack.extend((inner, "") for inner in nested)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                stack.extend((inner, klass) for inner in ast.iter_child_nodes(node) if isinstance(inner, ast.stmt))

    def resolve(self, where: Place, func: ast.expr) -> Optional[Place]:
        """The function a call of `func` made inside `where` runs."""
        if isinstance(func, ast.Name):
            return self._function(where.path, func.id)
        if not isinstance(func, ast.Attribute):
            return None
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls") and where.klass:
            return self._method(self.mro(where.path, where.klass), func.attr)
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super" and where.klass:
            return self._method(self.mro(where.path, where.klass)[1:], func.attr)
        if isinstance(owner, ast.Name):
            module = self.module(where.path)
            origin = module.imports.get(owner.id) if module is not None else None
            target = self.modules.path_of(origin) if origin is not None else None
            found = self.module(target) if target is not None else None
            function = found.functions.get(func.attr) if found is not None else None
            return Place(target, "", function, function.lineno) if target and function is not None else None
        return None

    def callers(self, place: Place) -> list[tuple[Place, ast.Call]]:
        """Every call in the tree that resolves to `place`, with the function it is made in."""
        name = place.function.name
        if name not in self._callers:
            self._callers[name] = list(self._calls_named(name))
        return [(where, call) for where, call in self._callers[name] if self.resolve(where, call.func) == place]

    def _calls_named(self, name: str) -> Iterator[tuple[Place, ast.Call]]:
        pattern = re.compile(rb"(?<![\w])" + re.escape(name.encode()) + rb"\s*\(")
        for path, data in self.sources.items():
            if name.encode() not in data or pattern.search(data) is None:
                continue
            for where in self.places(path, (name.encode(),)):
                for node in own_nodes(where.function):
                    if isinstance(node, ast.Call) and _trailing(node.func) == name:
                        yield where, node

    def _definition(self, path: str, name: str) -> Optional[tuple[str, str]]:
        return self.modules.definition(path, name, self.module)

    def _function(self, path: str, name: str) -> Optional[Place]:
        where = self._definition(path, name)
        module = self.module(where[0]) if where is not None else None
        function = module.functions.get(where[1]) if module is not None and where is not None else None
        return Place(where[0], "", function, function.lineno) if where is not None and function is not None else None

    def mro(self, path: str, class_name: str) -> list[tuple[str, ast.ClassDef]]:
        """The class and its bases, depth first, left to right, each once."""
        order: list[tuple[str, ast.ClassDef]] = []
        seen: set[tuple[str, str]] = set()
        module = self.module(path)
        start = module.classes.get(class_name) if module is not None else None
        stack = [(path, start)] if start is not None else []
        while stack and len(order) < 64:
            where, klass = stack.pop()
            assert klass is not None
            if (where, klass.name) in seen:
                continue
            seen.add((where, klass.name))
            order.append((where, klass))
            bases = [self._class(where, base) for base in klass.bases]
            stack.extend(reversed([base for base in bases if base is not None]))
        return order

    def _class(self, path: str, base: ast.expr) -> Optional[tuple[str, ast.ClassDef]]:
        where: Optional[tuple[str, str]] = None
        if isinstance(base, ast.Name):
            where = self._definition(path, base.id)
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            module = self.module(path)
            origin = module.imports.get(base.value.id) if module is not None else None
            target = self.modules.path_of(origin) if origin is not None else None
            where = self._definition(target, base.attr) if target is not None else None
        found = self.module(where[0]) if where is not None else None
        klass = found.classes.get(where[1]) if found is not None and where is not None else None
        return (where[0], klass) if where is not None and klass is not None else None

    @staticmethod
    def _method(classes: list[tuple[str, ast.ClassDef]], name: str) -> Optional[Place]:
        for path, klass in classes:
            for item in klass.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    return Place(path, klass.name, item, item.lineno)
        return None


def own_nodes(function: FunctionNode) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions, classes or lambdas nested in it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _read(path: str, data: Optional[bytes]) -> Optional[Module]:
    if data is None:
        return None
    try:
        tree = ast.parse(data, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # KV000's business where the file is checked; a proof through it stops there.
        return None
    imports: list[ast.stmt] = []
    module_imports(tree.body, imports)
    parts = module_parts(path)
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = imports_of(imports, ".".join(parts), path.endswith("__init__.py"))
    return Module(tree, functions, classes, imported, data.splitlines(keepends=True))


def _trailing(func: ast.expr) -> Optional[str]:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None
