"""KV301: the facts of all files, with names resolved across them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Optional, TypeVar

from kvlint.rules.tbo._facts import Assignment, BuilderFact, ClassFact, FieldFact, FileFacts

ENUM_BASES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})
_Item = TypeVar("_Item")


@dataclass
class Tree:
    """The facts of all files, with name resolution across them."""

    facts: dict[str, FileFacts]

    def named(self, name: str) -> list[tuple[str, ClassFact]]:
        return self._classes.get(name, [])

    @cached_property
    def _classes(self) -> dict[str, list[tuple[str, ClassFact]]]:
        return _by_name(self.facts, lambda file: file.classes, lambda klass: klass.name)

    def builders(self) -> list[tuple[str, BuilderFact]]:
        return [(path, builder) for path, file in sorted(self.facts.items()) for builder in file.builders]

    def resolve(self, name: str, near: str, origin: Optional[str]) -> Optional[tuple[str, ClassFact]]:
        """The class `name` as seen from file `near`: the same file, then the module
        its import names, then the closest directory."""
        candidates = self.named(name)
        if not candidates:
            return None

        def score(candidate: tuple[str, ClassFact]) -> tuple[bool, bool, int]:
            path = candidate[0]
            return (path == near, _module_matches(path, origin), _shared_prefix(path, near))

        return max(candidates, key=score)

    def fields(self, path: str, klass: ClassFact, seen: frozenset[str] = frozenset()) -> list[tuple[str, FieldFact]]:
        """Fields in `dataclasses.fields()` order: dataclass ancestors first, redefinitions in place."""
        merged: dict[str, tuple[str, FieldFact]] = {}
        for base in reversed(klass.bases):
            found = self.resolve(base.name, path, base.origin)
            if found is not None and found[1].name not in seen:
                merged.update((f.name, (p, f)) for p, f in self.fields(*found, seen | {klass.name}))
        merged.update((field.name, (path, field)) for field in klass.fields)
        return list(merged.values())

    def assignments(self, field: str) -> list[tuple[str, Assignment]]:
        """Every place giving `field` a value, by path and line."""
        return self._assignments.get(field, [])

    @cached_property
    def _assignments(self) -> dict[str, list[tuple[str, Assignment]]]:
        # Asked once per field of the batch class: one pass over every file's writes, not one per field.
        by_field = _by_name(self.facts, lambda file: file.assignments, lambda assignment: assignment.field)
        for sites in by_field.values():
            sites.sort(key=lambda site: (site[0], site[1].line))
        return by_field

    @cached_property
    def enums(self) -> set[str]:
        """Names of classes that derive, through classes in the tree, from an Enum."""
        bases = {klass.name: {b.name for b in klass.bases} for file in self.facts.values() for klass in file.classes}
        enums = set(ENUM_BASES)
        grew = True
        while grew:
            found = {name for name, parents in bases.items() if name not in enums and parents & enums}
            enums |= found
            grew = bool(found)
        return enums


def _by_name(
    facts: dict[str, FileFacts], items: Callable[[FileFacts], Iterable[_Item]], name: Callable[[_Item], str]
) -> dict[str, list[tuple[str, _Item]]]:
    """Every file's `items`, with their paths, by `name`, in file order."""
    found: dict[str, list[tuple[str, _Item]]] = {}
    for path, file in facts.items():
        for item in items(file):
            found.setdefault(name(item), []).append((path, item))
    return found


def _module_matches(path: str, origin: Optional[str]) -> bool:
    """Does `path` (a/b/mod.py) hold the module `origin` imports from (a.b.mod.Name, .mod.Name)?"""
    return origin is not None and holds_module(path, origin.lstrip(".").rsplit(".", 1)[0])


def holds_module(path: str, module: str) -> bool:
    """Does the file at `path` (relative to wherever the run started) hold the dotted `module`?

    The run's root may sit above the package root (`sglang/srt/layers/x.py`
    for `sglang.srt.layers.x`) or below it (`layers/x.py`, checked from inside
    `srt/`), and a relative import names only the tail (`.x`): the shorter of
    the two must end the longer.
    """
    stem = path.replace("\\", "/").removesuffix(".py").removesuffix("/__init__").split("/")
    parts = module.split(".")
    shorter = min(len(stem), len(parts))
    return shorter > 0 and stem[-shorter:] == parts[-shorter:]


def _shared_prefix(left: str, right: str) -> int:
    count = 0
    for a, b in zip(left.split("/"), right.split("/")):
        if a != b:
            break
        count += 1
    return count
