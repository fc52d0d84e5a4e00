"""Pool classes, host caches, and which pools allocate page-split buffers, learned from the tree.

A *pool class* assigns a buffer attribute (`self.k_buffer = ...`) or indexes
one of its own (`self.k_buffer[layer_id]`: a pool that builds its buffers with
`setattr` from a table of names); with its subclasses it is `pool-classes`. A pool is *page-split* when one of its buffer
assignments allocates `(pages, page_size, ...)`: a page-size dim right after a
page count (`size // page_size + 1`, `num_pages`, `num_blocks`), per layer or
after a leading layer dim (`torch.zeros((layers, pages, page_size, 1, D))`),
directly or through another attribute of the class it aliases
(`self.k_buffer = self._stacked_k`). A pool allocating `(size + page_size, H, D)`
has dim 0 as slots, as does a placeholder `(page_size, H, D)`: a page size
first is a slot count. Such a pool and its subclasses are `page-split-pools`;
the classes they derive from are `page-split-bases` (a value typed as one of
those may be either kind of pool). Where a buffer's dim 0 holds pages, a paged
view helper, which assumes slots, would assert or build the wrong shape: the
layout rules decide by the pool class a buffer comes from, never by a folder.

A *host cache* keeps pages in CPU memory for a device pool: `HostKVCache` and its subclasses,
and a pool class whose every buffer is pinned host memory (allocated with `pin_memory=True`,
pinned, or registered with `cudaHostRegister`, where it assigns it or in the method it calls to
build it), with their subclasses: `host-cache-classes`. No attention backend reads one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Iterator, Optional

from kvlint.api.config import Config
from kvlint.api.contract import AUTO, Contract
from kvlint.learn.memo import remembered
from kvlint.learn.scope import Scope
from kvlint.api.hierarchy import subclasses, superclasses
from kvlint.learn.tree import Learned, class_bases, parsed_tree

# `self.k_buffer = ...`, or annotated: `self.k_buffer: list[mx.array] = [...]`.
_BUFFER_ASSIGN = re.compile(rb"self\.(\w+)[ \t]*(?::[^=\n]+)?=(?!=)")
_BUFFER_INDEX = re.compile(rb"self\.(\w+)\[")
_ALLOCATORS = frozenset({"zeros", "empty", "ones", "full", "randn"})


def learn_pool_classes(contract: Contract, config: Config, scope: Scope, learned: Learned) -> None:
    """Pool classes (own a buffer attribute), host caches, and the pools that allocate page-split buffers."""
    attributes = tuple(sorted({name for name in contract.buffer_accessors if not name.startswith("get_")}))
    owners: set[str] = set()
    split: dict[str, tuple[Path, int]] = {}
    # Each pool class, and whether every buffer it assigns is pinned host memory.
    pinned: dict[str, bool] = {}
    first: Optional[tuple[Path, int]] = None
    for path, assignments in scope.survey(buffer_assignments, attributes).items():
        for assignment in assignments:
            owners.add(assignment.klass)
            pinned[assignment.klass] = pinned.get(assignment.klass, True) and assignment.host
            first = first or (path, assignment.klass_line)
            if assignment.page_split:
                split.setdefault(assignment.klass, (path, assignment.line))
    bases = class_bases(scope)
    if config.contract_value("pool-classes") == AUTO and first is not None:
        learned.set("pool-classes", tuple(sorted(subclasses(owners, bases))), *first)
    configured_split = config.contract_value("page-split-pools")
    if configured_split == AUTO:
        roots = set(split)
        if split:
            learned.set("page-split-pools", tuple(sorted(subclasses(roots, bases))), *next(iter(split.values())))
    else:
        roots = set(configured_split)
    split_bases = superclasses(roots, bases) - subclasses(roots, bases)
    if split_bases:
        learned.values["page-split-bases"] = tuple(sorted(split_bases))
        learned.sources["page-split-bases"] = "learned: the classes the page-split pools derive from"
    configured_hosts = config.contract_value("host-cache-classes")
    hosts_roots = set(contract.host_cache_classes if configured_hosts == AUTO else configured_hosts)
    if configured_hosts == AUTO:
        hosts_roots |= {klass for klass, host in pinned.items() if host}
    hosts = subclasses(hosts_roots, bases)
    if hosts != set(contract.host_cache_classes):
        learned.values["host-cache-classes"] = tuple(sorted(hosts))
        learned.sources["host-cache-classes"] = f"learned: {', '.join(sorted(hosts_roots))} and their subclasses in the tree"


@dataclass(frozen=True)
class BufferAssignment:
    """A `self.<buffer> = ...` of a pool: its class, whether it allocates page-split buffers, and
    where (lines leave equality: `kvlint.learn.scope`)."""

    klass: str
    page_split: bool
    klass_line: int = field(compare=False)
    line: int = field(compare=False)
    # Allocated in pinned host memory: the class is a host cache, whatever it derives from.
    host: bool = False


def buffer_assignments(data: bytes, attributes: tuple[str, ...]) -> tuple[BufferAssignment, ...]:
    """What `_buffer_assignments_of` reads of a file assigning a buffer attribute, remembered by its content."""
    if not any(f"self.{name}".encode() in data for name in attributes):
        return ()
    if not any(m.group(1).decode() in attributes for pattern in (_BUFFER_ASSIGN, _BUFFER_INDEX)
               for m in pattern.finditer(data)):
        return ()
    return tuple(remembered("pool-buffers", data, attributes, partial(_buffer_assignments_of, data, set(attributes))))


def _buffer_assignments_of(data: bytes, attributes: set[str]) -> list[BufferAssignment]:
    """Each `self.<buffer> = ...` of a file, and the first `self.<buffer>[...]` of each class that
    indexes a buffer it never assigns."""
    lines = _lines(data, _BUFFER_ASSIGN, attributes)
    tree = parsed_tree(data)
    if tree is None:
        return []
    found = []
    aliased: dict[int, set[str]] = {}
    for klass, node in _buffer_assignments(tree, lines, attributes):
        value = node.value
        if value is not None and id(klass) not in aliased:
            aliased[id(klass)] = _page_split_attributes(klass)
        page_split = value is not None and (_allocates_page_split(value) or _self_attribute(value) in aliased[id(klass)])
        host = value is not None and _pinned_host(value, klass)
        found.append(BufferAssignment(klass.name, page_split, klass.lineno, node.lineno, host))
    assigned = {assignment.klass for assignment in found}
    for klass, index in _buffer_indexes(tree, _lines(data, _BUFFER_INDEX, attributes), attributes):
        if klass.name not in assigned:
            assigned.add(klass.name)
            found.append(BufferAssignment(klass.name, False, klass.lineno, index.lineno))
    return found


def _lines(data: bytes, pattern: re.Pattern[bytes], attributes: set[str]) -> set[int]:
    return {data.count(b"\n", 0, match.start()) + 1 for match in pattern.finditer(data)
            if match.group(1).decode() in attributes}


def _buffer_assignments(
    tree: ast.Module, lines: set[int], attributes: set[str]
) -> Iterator[tuple[ast.ClassDef, ast.Assign | ast.AnnAssign]]:
    """`self.<buffer> = ...` statements on `lines`, with their class."""
    for klass, statement in _class_statements(tree, lines):
        for node in ast.walk(statement):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno in lines:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_self_attribute(target) in attributes for target in targets):
                    yield klass, node


def _class_statements(tree: ast.Module, lines: set[int]) -> Iterator[tuple[ast.ClassDef, ast.stmt]]:
    """Each statement of a class body spanning one of `lines`, with its class: only those are walked
    (a pool file is long, its allocations few)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        klass = pending.pop()
        if not isinstance(klass, ast.ClassDef):
            continue
        for stmt in klass.body:
            if isinstance(stmt, ast.ClassDef):
                pending.append(stmt)
                continue
            end = getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno
            if any(stmt.lineno <= line <= end for line in lines):
                yield klass, stmt


def _buffer_indexes(tree: ast.Module, lines: set[int], attributes: set[str]) -> Iterator[tuple[ast.ClassDef, ast.Subscript]]:
    """`self.<buffer>[...]` reads on `lines`, with their class."""
    for klass, statement in _class_statements(tree, lines):
        for node in ast.walk(statement):
            if (isinstance(node, ast.Subscript) and node.lineno in lines and isinstance(node.ctx, ast.Load)
                    and _self_attribute(node.value) in attributes):
                yield klass, node


def _pinned_host(value: ast.expr, klass: ast.ClassDef) -> bool:
    """Whether the buffer `value` builds is pinned host memory: allocated with `pin_memory=True` or
    pinned (`.pin_memory()`), or built by a method of the class that returns a tensor so allocated,
    pinned, or registered with the driver (`cudaHostRegister(t.data_ptr(), ...)`)."""
    if _pinned(value):
        return True
    called = _self_attribute(value.func) if isinstance(value, ast.Call) else None
    method = next((stmt for stmt in klass.body
                   if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == called), None)
    if method is None:
        return False
    returned = {node.value.id for node in ast.walk(method)
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Name)}
    for node in ast.walk(method):
        if isinstance(node, ast.Return) and node.value is not None and _pinned(node.value):
            return True
        if (isinstance(node, ast.Assign) and _pinned(node.value)
                and any(isinstance(target, ast.Name) and target.id in returned for target in node.targets)):
            return True
        if (isinstance(node, ast.Call) and _name(node.func) == "cudaHostRegister" and node.args
                and _pointer_of(node.args[0]) in returned):
            return True
    return False


def _pinned(value: ast.expr) -> bool:
    """An allocation with `pin_memory=True`, or a `.pin_memory()`, in `value`."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and (
            _name(node.func) == "pin_memory"
            or any(keyword.arg == "pin_memory" and isinstance(keyword.value, ast.Constant) and keyword.value.value is True
                   for keyword in node.keywords)
        ):
            return True
    return False


def _pointer_of(node: ast.expr) -> Optional[str]:
    """`t` for `t.data_ptr()`."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr"
            and isinstance(node.func.value, ast.Name)):
        return node.func.value.id
    return None


def _page_split_attributes(klass: ast.ClassDef) -> set[str]:
    """The attributes the class assigns a page-split allocation (`self._stacked_k = torch.zeros(...)`),
    which a buffer attribute may alias."""
    found: set[str] = set()
    for node in ast.walk(klass):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _allocates_page_split(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(name for name in map(_self_attribute, targets) if name is not None)
    return found


def _self_attribute(target: ast.expr) -> Optional[str]:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return None


def _allocates_page_split(value: ast.expr) -> bool:
    """`torch.zeros((..., pages, page_size, row...))` (or `empty`, ..., a list of them): a page-size
    dim right after a page count, a row after it."""
    for node in ast.walk(value):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in _ALLOCATORS:
            continue
        dims: list[ast.expr] = []
        if node.args and isinstance(node.args[0], (ast.Tuple, ast.List)):
            dims = list(node.args[0].elts)
        elif node.args:
            dims = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        if any(_names_page_size(dims[i]) and _page_count(dims[i - 1]) for i in range(1, len(dims) - 1)):
            return True
    return False


def _page_count(node: ast.expr) -> bool:
    """`size // page_size`, `size // page_size + 1`, `cdiv(size, page_size)`, `num_pages`, `num_blocks`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        return _names_page_size(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _page_count(node.left) or _page_count(node.right)
    if isinstance(node, ast.Call):
        callee = _name(node.func)
        return callee is not None and "div" in callee and any(_names_page_size(arg) for arg in node.args)
    name = _name(node)
    return name is not None and ("pages" in name.lower() or "blocks" in name.lower())


def _names_page_size(node: ast.expr) -> bool:
    name = _name(node)
    return name is not None and ("page_size" in name or "PAGE_SIZE" in name)


def _name(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None
