"""Fill the contract's "auto" values from the scanned tree.

What is learned, and from where:

- `mark`, `layer-factory`, `write-loc-module` (and the field order fixes use):
  the write-loc class's own definition. A field named `id_space` or `physical`
  is the mark; a `for_layer` classmethod means there is a layer factory; the
  defining file's module path is where fixes import the class from.
- `batch-mark`: the batch class's field named `<loc attribute>_...<mark>`
  (`out_cache_loc_id_space`, `out_cache_loc_is_physical`), else the attribute
  the class's `for_batch` reads its mark from.
- `write-doors` (when not configured): in a tree with the mark, every method whose
  loc reaches the tree's mark check or unwrap, or forwards it to another door
  (`kvlint.running.learn_doors`); else the defaults plus every method named like
  `set_*kv_buffer` taking a `loc`/`loc_info` parameter. `add-write-doors` and
  `remove-write-doors` adjust either; each door keeps why it is one.
- `paged-helpers-module` and `Contract.paged_helpers`: the module that defines
  `paged_view` / `paged_row_view` / `paged_kv_view`, and which of them.

Learning is cheap: a plain bytes test picks the few files that could define
any of these, and only those are parsed, with the stdlib `ast` (learning needs
names and line numbers, not LibCST's round-trip tree). Whatever is not found
keeps the seed's spelling. Each learned value's source reads "learned from
PATH:LINE".

What fixes may call, and where they import it from:

- `write-loc-module` and `paged-helpers-module` are spelled the way the tree's
  own files import the defining file (the most common absolute `from M import`
  that resolves to it); failing that, relative to a package root the tree's
  imports reveal (namespace packages, without `__init__.py`, included); only
  then from `__init__.py` files, and last the seed's spelling.
- `Contract.missing` lists the keys whose API was looked for and not found
  (`mark`, `batch-factory`, `write-loc-module`, `paged-helpers-module`): a fix
  that would call it is unsafe there, and the message names the key that pins it.
- `mark-predicate` (a module function of the write-loc class's file testing the
  mark, `write_loc_is_physical`), and whether a write door checks the mark.
- `pool-classes`: classes that assign a buffer attribute (`self.k_buffer = ...`)
  and their subclasses; `host-cache-classes`: `HostKVCache` (configurable) and
  its subclasses; `page-split-paths`: the directories of pools whose allocation
  states a page-size dim (`torch.zeros((layers, pages, page_size, ...))`).
  Class hierarchies are read from `class X(Base):` headers across the tree.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from kvlint.api.config import Config, configured_contract
from kvlint.api.contract import AUTO, DEFAULT_WRITE_DOORS, NOT_FIELD_ANNOTATIONS, PAGED_HELPERS, Contract
from kvlint.running.learn_doors import doors_by_mark, doors_by_name
from kvlint.running.learn_gate import learn_mark_gate
from kvlint.running.learn_tree import (
    Learned as _Learned,
    learn_door_checks as _learn_door_checks,
    learn_import_spellings as _learn_import_spellings,
    learn_mark_predicate as _learn_mark_predicate,
    learn_pool_classes as _learn_pool_classes,
    parsed_tree as _tree,
)

MARK_FIELDS = ("id_space", "physical")
# Markers of a project root: a package path never climbs past one.
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def learn_contract(config: Config, sources: Mapping[Path, bytes]) -> Contract:
    """The configured contract with its "auto" values learned from `sources`."""
    contract = configured_contract(config)
    learned = _Learned()
    ordered = sorted(sources.items())
    if _auto(config, "mark", "batch-mark", "layer-factory", "write-loc-module"):
        _learn_write_loc(contract, ordered, learned)
    if _auto(config, "batch-mark"):
        _learn_batch_mark(contract, config, ordered, learned)
    _learn_batch_fields(config, ordered, learned)
    if "write-doors" not in dict(config.contract):
        _learn_doors(contract, config, ordered, learned)
    if _auto(config, "paged-helpers-module"):
        _learn_paged_helpers(ordered, learned)
    _learn_import_spellings(config, ordered, learned)
    _learn_pool_classes(contract, config, ordered, learned)
    _learn_door_checks(contract, learned, ordered)
    learn_mark_gate(contract, learned, ordered)
    values = {key: value for key, value in learned.values.items() if key in _keys_to_fill(config)}
    changes: dict[str, Any] = {key.replace("-", "_"): value for key, value in values.items()}
    found = {key: learned.sources[key] for key in values}
    missing = tuple(
        key
        for key in _LOOKED_FOR
        if config.contract_value(key) == AUTO and key not in learned.values and not _pinned_elsewhere(config, key, learned)
    )
    return replace(contract, **changes, missing=missing, sources=(*contract.sources, *found.items()))


def _pinned_elsewhere(config: Config, key: str, learned: _Learned) -> bool:
    """A write-loc class the configuration places outside the scanned tree (`write-loc-module`
    pinned, no class found): kvlint cannot read it, so its API is taken as the contract states it."""
    return (
        key in ("mark", "batch-mark", "batch-factory")
        and config.contract_value("write-loc-module") != AUTO
        and "write-loc-class" not in learned.values
    )


# The keys naming an API a fix calls or imports: learning looks each up in the tree.
_LOOKED_FOR = ("mark", "batch-mark", "batch-factory", "write-loc-module", "paged-helpers-module")


def _auto(config: Config, *keys: str) -> bool:
    return any(config.contract_value(key) == AUTO for key in keys)


def _keys_to_fill(config: Config) -> set[str]:
    auto = {key for key in ("mark", "batch-mark", "layer-factory", "write-loc-module", "paged-helpers-module",
                            "batch-factory", "mark-predicate", "pool-classes", "page-split-paths")
            if config.contract_value(key) == AUTO}
    # Learned alongside the values they belong to, never configured on their own.
    auto |= {"write-loc-fields", "paged-helpers", "batch-fields", "door-checks-mark", "host-cache-classes",
             "door-reasons", "mark-gate", "ungated-classes"}
    if config.contract_value("write-loc-class") == AUTO:
        auto.add("write-loc-class")
    if "write-doors" not in dict(config.contract):
        auto.add("write-doors")
    return auto


def _parsed(files: list[tuple[Path, bytes]], needle: bytes) -> Iterator[tuple[Path, ast.Module]]:
    """The files holding `needle` that parse; the others are KV000's business, not learning's."""
    for path, data in files:
        if needle not in data:
            continue
        tree = _tree(data)
        if tree is not None:
            yield path, tree


def _learn_write_loc(contract: Contract, files: list[tuple[Path, bytes]], learned: _Learned) -> None:
    cls = contract.write_loc_class
    for path, tree in _parsed(files, f"class {cls}".encode()):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                fields = [
                    stmt.target.id
                    for stmt in node.body
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                ]
                marks = [name for name in fields if name in MARK_FIELDS]
                mark = marks[0] if marks else None
                learned.set("write-loc-class", cls, path, node.lineno)
                if mark is not None:
                    learned.set("mark", mark, path, node.lineno)
                learned.set("write-loc-fields", tuple(f for f in fields if f != mark), path, node.lineno)
                methods = {stmt.name for stmt in node.body if isinstance(stmt, ast.FunctionDef)}
                layer_factory = "for_layer" if "for_layer" in methods else ""
                learned.set("layer-factory", layer_factory, path, node.lineno)
                # Refined by `_learn_import_spellings` from how the tree imports this file.
                learned.set("write-loc-module", module_path(path), path, node.lineno)
                learned.defining["write-loc-module"] = path
                factory = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == contract.batch_factory), None)
                if factory is not None:
                    learned.set("batch-factory", contract.batch_factory, path, factory.lineno)
                    if mark is not None:
                        _mark_read_by_factory(factory, mark, path, learned)
                if mark is not None:
                    _learn_mark_predicate(cls, mark, tree, path, learned)
                return


def _mark_read_by_factory(factory: ast.FunctionDef, mark: str, path: Path, learned: _Learned) -> None:
    """The batch attribute `for_batch` passes as the mark: `mark=batch.ATTR` or `getattr(batch, "ATTR", ...)`."""
    for node in ast.walk(factory):
        if not isinstance(node, ast.keyword) or node.arg != mark:
            continue
        value = node.value
        if isinstance(value, ast.Attribute):
            learned.set("batch-mark", value.attr, path, node.lineno)
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "getattr"
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
            and isinstance(value.args[1].value, str)
        ):
            learned.set("batch-mark", value.args[1].value, path, node.lineno)


def _learn_batch_mark(contract: Contract, config: Config, files: list[tuple[Path, bytes]], learned: _Learned) -> None:
    mark = str(learned.values.get("mark", contract.mark))
    batch_class = config.tbo.batch_class
    for path, tree in _parsed(files, f"class {batch_class}".encode()):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ClassDef) and node.name == batch_class):
                continue
            for stmt in node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                name = stmt.target.id
                if name.endswith(mark) and any(name.startswith(f"{loc}_") for loc in contract.loc_attributes):
                    learned.set("batch-mark", name, path, stmt.lineno)
                    return


def _learn_batch_fields(config: Config, files: list[tuple[Path, bytes]], learned: _Learned) -> None:
    """The batch class's dataclass fields, its bases' included, `ClassVar`s and `InitVar`s left out (as KV301 reads them)."""
    found = _class_def(config.tbo.batch_class, files)
    if found is None:
        return
    path, batch = found
    names: dict[str, None] = {}
    pending, seen = [batch], {batch.name}
    while pending:
        klass = pending.pop(0)
        names.update(dict.fromkeys(_field_names(klass)))
        for base in klass.bases:
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if base_name is None or base_name in seen:
                continue
            seen.add(base_name)
            base_found = _class_def(base_name, files)
            if base_found is not None:
                pending.append(base_found[1])
    learned.set("batch-fields", tuple(names), path, batch.lineno)


def _class_def(name: str, files: list[tuple[Path, bytes]]) -> Optional[tuple[Path, ast.ClassDef]]:
    for path, tree in _parsed(files, f"class {name}".encode()):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
    return None


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


def _learn_doors(contract: Contract, config: Config, files: list[tuple[Path, bytes]], learned: _Learned) -> None:
    """By what a pool does with its loc where the tree has the mark, else by name; then the
    configuration's `add-write-doors` / `remove-write-doors`."""
    mark = learned.values.get("mark") or (contract.mark if config.contract_value("mark") != AUTO else None)
    if "write-loc-class" not in learned.values:
        mark = None
    cls = str(learned.values.get("write-loc-class", contract.write_loc_class))
    found = doors_by_mark(files, cls, str(mark)) if mark else doors_by_name(files)
    doors = {} if mark and found else dict(DEFAULT_WRITE_DOORS)
    reasons = {} if mark and found else {name: "default" for name in doors}
    for door in found:
        doors[door.name] = door.index
        reasons[door.name] = door.reason()
    for name, index in contract.add_write_doors:
        doors[name] = index
        reasons[name] = f"config {config.path}: add-write-doors"
    for name in contract.remove_write_doors:
        doors.pop(name, None)
        reasons.pop(name, None)
    learned.values["door-reasons"] = tuple(reasons.items())
    learned.sources["door-reasons"] = "learned with write-doors"
    if found:
        learned.set("write-doors", tuple(doors.items()), found[0].path, found[0].line)
        how = "what each pool does with its loc" if mark else "the set_..._kv_buffer name pattern"
        learned.sources["write-doors"] += f" ({len(found)} doors, by {how})"
    elif contract.add_write_doors or contract.remove_write_doors:
        learned.values["write-doors"] = tuple(doors.items())
        learned.sources["write-doors"] = f"config {config.path}"


def _learn_paged_helpers(files: list[tuple[Path, bytes]], learned: _Learned) -> None:
    best: Optional[tuple[int, str, Path, int, tuple[str, ...]]] = None
    for path, tree in _parsed(files, b"def paged_"):
        defined = {
            node.name: node.lineno for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in PAGED_HELPERS
        }
        if not defined:
            continue
        helpers = tuple(name for name in PAGED_HELPERS if name in defined)
        line = min(defined.values())
        # The module defining the most helpers wins; then the shortest path, for a stable answer.
        candidate = (-len(helpers), str(path), path, line, helpers)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    if best is not None:
        _, _, path, line, helpers = best
        learned.set("paged-helpers-module", module_path(path), path, line)
        learned.set("paged-helpers", helpers, path, line)
        learned.defining["paged-helpers-module"] = path


def module_path(path: Path) -> str:
    """The dotted module a file is imported as.

    Climbs while the directory names are identifiers, up to the topmost one
    holding an `__init__.py` (wheels such as sglang's leave `__init__.py` out of
    some subpackages, so the nearest one is not enough), never past a project
    root. A file in no package is its own top-level module.
    """
    path = path.resolve()
    parts = [] if path.stem == "__init__" else [path.stem]
    chain: list[str] = []
    top = 0
    directory = path.parent
    while directory.name.isidentifier() and not any((directory / marker).exists() for marker in ROOT_MARKERS):
        chain.append(directory.name)
        if (directory / "__init__.py").exists():
            top = len(chain)
        directory = directory.parent
    return ".".join([*reversed(chain[:top]), *parts]) or path.parent.name
