"""What contract learning reads of the definitions it looks for: the write-loc class, the batch
class and its bases, the paged helpers.

Each reading is a question `kvlint.learn.scope.Scope` asks of a file: a pure function
of its bytes and the names sought, returning plain data (None: the file has none). A file
holding the word but not parsing is KV000's business, not learning's: it has no answer.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from kvlint.api.contract import MARK_SPELLINGS, NOT_FIELD_ANNOTATIONS, PAGED_HELPERS
from kvlint.learn.tree import mark_predicate, parsed_tree


@dataclass(frozen=True)
class WriteLocClass:
    line: int
    # Its annotated fields in order, the mark (`id_space` or `physical`) among them.
    fields: tuple[str, ...]
    mark: Optional[str]
    has_layer_factory: bool
    # The line of the batch factory (`for_batch`), if the class has one.
    factory_line: Optional[int]
    # (batch attribute, line) of each place the factory passes the mark from the batch.
    factory_marks: tuple[tuple[str, int], ...]
    # (name, line) of the module function testing the mark (`write_loc_is_physical`).
    predicate: Optional[tuple[str, int]]
    # (batch attribute, line) of each loc the class's own factories wrap without the mark: a loc
    # the engine leaves unmarked by design (upstream: `for_layer`'s `encoder_out_cache_loc`).
    unmarked_locs: tuple[tuple[str, int], ...] = ()


def write_loc_class(data: bytes, cls: str, batch_factory: str) -> Optional[WriteLocClass]:
    """The first class named `cls` of a file."""
    tree = parsed_tree(data) if f"class {cls}".encode() in data else None
    node = _first_class(tree, cls) if tree is not None else None
    if tree is None or node is None:
        return None
    fields = tuple(
        stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    )
    mark = next((name for name in fields if name in MARK_SPELLINGS), None)
    methods = {stmt.name for stmt in node.body if isinstance(stmt, ast.FunctionDef)}
    factory = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == batch_factory), None)
    return WriteLocClass(
        line=node.lineno,
        fields=fields,
        mark=mark,
        has_layer_factory="for_layer" in methods,
        factory_line=None if factory is None else factory.lineno,
        factory_marks=() if factory is None or mark is None else _marks_read_by_factory(factory, mark),
        predicate=None if mark is None else mark_predicate(cls, mark, tree),
        unmarked_locs=() if mark is None else _unmarked_locs(node, cls, mark),
    )


def _unmarked_locs(klass: ast.ClassDef, cls: str, mark: str) -> tuple[tuple[str, int], ...]:
    """The batch attributes the class's methods build it from without `mark`: `cls(batch.ATTR, ...)`
    or `<cls>(batch.ATTR, ...)`, the loc first or as `loc=`."""
    found: dict[str, int] = {}
    for method in klass.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for node in ast.walk(method):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("cls", cls)):
                continue
            if any(keyword.arg in (mark, None) for keyword in node.keywords):
                continue
            loc = next((k.value for k in node.keywords if k.arg == "loc"), node.args[0] if node.args else None)
            if isinstance(loc, ast.Attribute):
                found.setdefault(loc.attr, node.lineno)
    return tuple(found.items())


def _marks_read_by_factory(factory: ast.FunctionDef, mark: str) -> tuple[tuple[str, int], ...]:
    """The batch attributes `for_batch` passes as the mark: `mark=batch.ATTR` or `getattr(batch, "ATTR", ...)`."""
    found = []
    for node in ast.walk(factory):
        if not isinstance(node, ast.keyword) or node.arg != mark:
            continue
        value = node.value
        if isinstance(value, ast.Attribute):
            found.append((value.attr, node.lineno))
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "getattr"
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
            and isinstance(value.args[1].value, str)
        ):
            found.append((value.args[1].value, node.lineno))
    return tuple(found)


def batch_mark_field(
    data: bytes, batch_class: str, mark: str, loc_attributes: tuple[str, ...]
) -> Optional[tuple[str, int]]:
    """The first field of a class named `batch_class` spelled `<loc attribute>_...<mark>`, and its line."""
    tree = parsed_tree(data) if f"class {batch_class}".encode() in data else None
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.ClassDef) and node.name == batch_class):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            if name.endswith(mark) and any(name.startswith(f"{loc}_") for loc in loc_attributes):
                return name, stmt.lineno
    return None


@dataclass(frozen=True)
class DataClass:
    line: int
    # Its dataclass fields (`ClassVar`s and `InitVar`s left out, as KV301 reads them).
    fields: tuple[str, ...]
    # Its bases' trailing names.
    bases: tuple[str, ...]


def data_class(data: bytes, name: str) -> Optional[DataClass]:
    """The first class named `name` of a file."""
    tree = parsed_tree(data) if f"class {name}".encode() in data else None
    node = _first_class(tree, name) if tree is not None else None
    if node is None:
        return None
    bases = (base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None) for base in node.bases)
    return DataClass(node.lineno, tuple(_field_names(node)), tuple(base for base in bases if base is not None))


def _field_names(klass: ast.ClassDef) -> list[str]:
    names = []
    for stmt in klass.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        annotation = stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation
        spelled = annotation.attr if isinstance(annotation, ast.Attribute) else getattr(annotation, "id", None)
        if spelled not in NOT_FIELD_ANNOTATIONS:
            names.append(stmt.target.id)
    return names


def _first_class(tree: ast.Module, name: str) -> Optional[ast.ClassDef]:
    return next((node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == name), None)


def paged_helpers_defined(data: bytes) -> tuple[tuple[str, int], ...]:
    """(name, line) of each paged helper (`paged_view`, ...) the file defines at module level."""
    tree = parsed_tree(data) if b"def paged_" in data else None
    defined = {
        node.name: node.lineno
        for node in (tree.body if tree is not None else ())
        if isinstance(node, ast.FunctionDef) and node.name in PAGED_HELPERS
    }
    return tuple(defined.items())
