"""Which file's class a name refers to, where the tree defines two classes of that name.

A monorepo holds subsystems that share class names: sglang's `multimodal_gen` defines an
`XPUAttentionBackend` of its own beside `srt`'s. The ties (`kvlint.learn.ties`) read every place
naming a class, so places building one would speak for the other. A file says which it means:
it defines the class itself, or binds the name by an import (`from
sglang.multimodal_gen.runtime.layers.attention.backends.xpu_backend import XPUAttentionBackend`,
at module level or inside a function, relative or absolute). Where every binding of the name in
the file agrees, the name refers to the class that module's file defines; anything else (the name
bound twice differently, reached as `module.Name`, imported from a file re-exporting it) says
nothing, and the place keeps speaking for every class of the name.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Mapping, Optional

from kvlint.learn.registry_read import dispatch_factories, registry_factories
from kvlint.learn.scope import Scope
from kvlint.learn.tree import class_headers, module_classes, names_spelled, parsed_tree

# A file's own top-level definition of the name.
OWN = "="


def bound_names(data: bytes, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`name_sources` of a file, for a survey."""
    wanted = names_spelled(data, names)
    tree = parsed_tree(data) if wanted else None
    return tuple(sorted(name_sources(tree, wanted).items())) if tree is not None else ()


def name_sources(tree: ast.Module, names: Iterable[str]) -> dict[str, str]:
    """For each of `names` the file binds one way only: `OWN`, or the module it imports the name
    from (leading dots for a relative import's level)."""
    wanted = set(names)
    found: dict[str, set[str]] = {}
    for klass in module_classes(tree.body):
        if klass.name in wanted:
            found.setdefault(klass.name, set()).add(OWN)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in wanted and alias.asname in (None, alias.name):
                    found.setdefault(alias.name, set()).add("." * node.level + (node.module or ""))
    return {name: next(iter(sources)) for name, sources in found.items() if len(sources) == 1}


class ModuleFiles:
    """The files of a scope, found by the module a source names."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self._by_last: dict[str, list[tuple[tuple[str, ...], Path]]] = {}
        for path in paths:
            parts = path.parent.parts if path.stem == "__init__" else path.with_suffix("").parts
            if parts:
                self._by_last.setdefault(parts[-1], []).append((parts, path))

    def file_of(self, importer: Path, source: str) -> Optional[Path]:
        """The one file of the scope the module `source` names, from `importer`; None where there is
        no such file, or more than one."""
        if source == OWN:
            return importer
        level = len(source) - len(source.lstrip("."))
        module = tuple(part for part in source[level:].split(".") if part)
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            wanted = (*base.parts, *module)
            matches = [path for parts, path in self._by_last.get(wanted[-1], []) if parts == wanted] if wanted else []
        else:
            # A module of the project's root is the shallowest file ending so (`backends` is not
            # `diffusion/backends.py` while a `backends.py` sits above it).
            candidates = self._by_last.get(module[-1], []) if module else []
            ending = [(len(parts), path) for parts, path in candidates if parts[-len(module):] == module]
            shallowest = min((depth for depth, _ in ending), default=0)
            matches = [path for depth, path in ending if depth == shallowest]
        return matches[0] if len(matches) == 1 else None


class OtherClasses:
    """Tells the places naming another class than the one asked about, for the names the tree
    defines twice; `asked`: the file defining the class each name is asked about."""

    def __init__(self, scope: Scope, asked: Mapping[str, Path]) -> None:
        self._scope, self._asked = scope, asked
        self._definers: dict[str, set[Path]] = {}
        self._files: Optional[ModuleFiles] = None
        self._bindings: dict[Path, dict[str, str]] = {}

    def names_another(self, name: str, importer: Path) -> bool:
        """Whether a place in `importer` naming `name` means another file's class of that name than
        the one asked about, by how `importer` binds the name."""
        meant = self._asked.get(name)
        if meant is None:
            return False
        if self._files is None:
            # Read once, and only of the few names asked about: most trees define each class once.
            names = tuple(sorted(self._asked))
            self._definers, self._files = definers(self._scope, names), ModuleFiles(self._scope.paths)
            self._bindings = {path: dict(bound) for path, bound in self._scope.survey(bound_names, names).items()}
        source = self._bindings.get(importer, {}).get(name, "")
        if not source or len(self._definers.get(name, ())) < 2:
            return False
        target = self._files.file_of(importer, source)
        return target is not None and target in self._definers[name] and target != meant

def definers(scope: Scope, names: Iterable[str]) -> dict[str, set[Path]]:
    """Each of `names` with the files defining a class of it (the class headers `class_bases` reads)."""
    wanted = set(names)
    found: dict[str, set[Path]] = {}
    for path, headers in scope.survey(class_headers).items():
        for name, _ in headers:
            if name in wanted:
                found.setdefault(name, set()).add(path)
    return found


def registry_classes(scope: Scope, functions: Iterable[str], names: Iterable[str]) -> dict[str, Path]:
    """For each of `names` the tree defines twice, the file of the class the backend registry's
    own file (the one defining its factories `functions`) imports or defines under that name: the
    class its factories build."""
    named = definers(scope, names)
    twice = tuple(sorted(name for name in named if len(named[name]) > 1))
    if not twice:
        return {}
    wanted = set(functions)
    registry_files: set[Path] = set()
    # As `kvlint.learn.pool_pairing.backend_registry` finds it: a decorated registry before a dispatching chain.
    for reader in (registry_factories, dispatch_factories):
        registry_files = {path for path, reads in scope.survey(reader).items() if any(read.function in wanted for read in reads)}
        if registry_files:
            break
    files = ModuleFiles(scope.paths)
    asked: dict[str, Path] = {}
    for path, bound in scope.survey(bound_names, twice).items():
        for name, source in bound if path in registry_files else ():
            target = files.file_of(path, source)
            if target is not None and target in named[name]:
                asked.setdefault(name, target)
    return asked
