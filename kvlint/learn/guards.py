"""The tie a guard gives the branch it opens: the backends, platforms and speculative algorithms
the branch runs under (`kvlint.learn.ties` carries them down to the places building a name)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, TypeVar

from kvlint.learn.gates_read import algorithms_tested

# The devices a platform predicate names: a process runs on one of them.
_DEVICES = frozenset({"npu", "musa", "hip", "xpu", "cuda", "cpu", "mps", "hpu"})
# The engine's page-size field, and what a page-size guard compares.
PAGE_SIZE = "page_size"


@dataclass(frozen=True)
class Tie:
    """What a place is tied to: the backends, platforms and speculative algorithms it runs under, and
    the page sizes an `assert` on the way allows (None: any)."""

    backends: Optional[frozenset[str]] = None
    platforms: Optional[frozenset[str]] = None
    algorithms: Optional[frozenset[str]] = None
    pages: Optional[frozenset[int]] = None
    # The file (once known) and line of the assert that allows `pages`, to name where; no part of the tie.
    asserted_at: Optional[tuple[Optional[Path], int]] = field(default=None, compare=False)

    @property
    def tied(self) -> bool:
        return (self.backends is not None or self.platforms is not None or self.algorithms is not None
                or self.pages is not None)

    @property
    def whole_pages(self) -> bool:
        """Whether every run under it has a page size above 1."""
        return self.pages is not None and all(size > 1 for size in self.pages)

    def narrowed(self, other: Tie) -> Tie:
        backends = _meet(self.backends, other.backends)
        if not backends and self.backends and other.backends:
            # A run chooses a backend for each role (prefill, decode, draft): tests naming no backend
            # in common are of two roles' fields (`decode == "b"` in the factory of "a"), and the run
            # chose one of each. Their union stands for both: apart only from what neither meets,
            # pinned only where both are.
            backends = self.backends | other.backends
        return Tie(backends, _meet(self.platforms, other.platforms),
                   _meet(self.algorithms, other.algorithms), _meet(self.pages, other.pages),
                   self.asserted_at or other.asserted_at)

    def apart(self, other: Tie) -> bool:
        """Whether no run can be under both (a run has one page size)."""
        return any(mine is not None and theirs is not None and not mine & theirs
                   for mine, theirs in ((self.backends, other.backends), (self.platforms, other.platforms),
                                        (self.algorithms, other.algorithms), (self.pages, other.pages)))


_Set = TypeVar("_Set", frozenset[str], frozenset[int])


def _meet(one: Optional[_Set], other: Optional[_Set]) -> Optional[_Set]:
    return other if one is None else one if other is None else one & other


def guard_tie(test: ast.expr, holds: bool, predicates: Mapping[str, frozenset[str]], backends: frozenset[str],
              holders: frozenset[str] = frozenset()) -> Tie:
    """The tie a branch taken when `test` is `holds` gives: a backend compared (the registry's
    other names, `backends`, where the comparison fails), a platform tested, or a speculative
    algorithm compared or tested by a predicate of its enum. `holders`: the names bound in the
    function the test sits in that hold a backend name (`dispatch_names`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return guard_tie(test.operand, not holds, predicates, backends, holders)
    if isinstance(test, ast.BoolOp):
        # Both parts hold under `and`, and neither under a failed `or`: each narrows.
        if isinstance(test.op, ast.And) == holds:
            tie = Tie()
            for value in test.values:
                tie = tie.narrowed(guard_tie(value, holds, predicates, backends, holders))
            return tie
        return Tie()
    platform = _platform(test)
    if platform is not None:
        return Tie(platforms=frozenset({platform})) if holds else Tie()
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and not test.args and test.func.attr in predicates:
        return Tie(algorithms=predicates[test.func.attr]) if holds else Tie()
    algorithms = algorithms_tested(test)
    if algorithms is not None:
        return Tie(algorithms=frozenset(algorithms)) if holds else Tie()
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _names_backend(test.left, holders):
        names = _strings(test.comparators[0])
        op = test.ops[0]
        positive = isinstance(op, (ast.Eq, ast.In)) if holds else isinstance(op, (ast.NotEq, ast.NotIn))
        if names is not None and positive:
            return Tie(backends=names)
        if names is not None and backends and isinstance(op, (ast.Eq, ast.In, ast.NotEq, ast.NotIn)):
            # The `else` of `backend == "ascend"` runs under every other backend the registry names.
            return Tie(backends=backends - names)
    return Tie()


def asserted_pages(test: ast.expr, aliases: frozenset[str]) -> Optional[frozenset[int]]:
    """The page sizes `assert <page size> == N` (or `in (N, M)`, maybe `and`-ed with other tests)
    lets past; the page size is a `page_size` attribute or name, or a local bound to one (`aliases`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        found: Optional[frozenset[int]] = None
        for value in test.values:
            pages = asserted_pages(value, aliases)
            if pages is not None:
                found = pages if found is None else found & pages
        return found
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))
            and is_page_size(test.left, aliases)):
        return literal_ints(test.comparators[0])
    return None


def is_page_size(node: ast.expr, aliases: frozenset[str] = frozenset()) -> bool:
    """`<...>.page_size`, `page_size`, or a local in `aliases`."""
    if isinstance(node, ast.Name):
        return node.id == PAGE_SIZE or node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr == PAGE_SIZE


def literal_ints(node: ast.expr) -> Optional[frozenset[int]]:
    """`N`, or a list, tuple or set of such: the integers it spells; None for anything else."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    values = [value for value in map(literal_int, elements) if value is not None]
    return frozenset(values) if values and len(values) == len(elements) else None


def literal_int(node: ast.expr) -> Optional[int]:
    """The integer a literal spells (not a bool); None for anything else."""
    value = node.value if isinstance(node, ast.Constant) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _platform(test: ast.expr) -> Optional[str]:
    """`npu` for `_is_npu`, `is_npu()`, `platform.is_npu`, `platform.is_npu()`; None otherwise."""
    node = test.func if isinstance(test, ast.Call) and not test.args else test
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    device = name.lstrip("_")[3:] if name.lstrip("_").startswith("is_") else ""
    return device if device in _DEVICES else None


def _names_backend(node: ast.expr, holders: frozenset[str]) -> bool:
    if isinstance(node, ast.Name) and node.id in holders:
        return True
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("attention_backend")


def dispatch_names(function: ast.FunctionDef | ast.AsyncFunctionDef, backends: frozenset[str]) -> frozenset[str]:
    """The names `function` binds (a parameter, a local) that it compares with two of the registry's
    names at least: it picks the backend by them (`if backend_str == "ascend": ... elif backend_str
    == "triton": ...`; `kind = self._draft_backend(); if kind == "triton": ... if kind == "trtllm_mha": ...`)."""
    args = function.args
    bound = {arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)} | {
        node.id for node in ast.walk(function) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    compared: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
                and isinstance(node.left, ast.Name) and node.left.id in bound):
            names = _strings(node.comparators[0])
            if names is not None:
                compared.setdefault(node.left.id, set()).update(names & backends)
    return frozenset(name for name, backend_names in compared.items() if len(backend_names) >= 2)


def _strings(node: ast.expr) -> Optional[frozenset[str]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [element.value for element in node.elts if isinstance(element, ast.Constant)]
        if len(values) == len(node.elts) and all(isinstance(value, str) for value in values):
            return frozenset(str(value) for value in values)
    return None

