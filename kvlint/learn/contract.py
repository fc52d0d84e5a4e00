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
  (`kvlint.learn.doors`); else the defaults plus every method named like
  `set_*kv_buffer` taking a `loc`/`loc_info` parameter. `add-write-doors` and
  `remove-write-doors` adjust either; each door keeps why it is one.
- `paged-helpers-module` and `Contract.paged_helpers`: the module that defines
  `paged_view` / `paged_row_view` / `paged_kv_view`, and which of them.
- `binding-methods`: the functions that set the batch mark on a parameter,
  directly or through one another (`kvlint.learn.binding`), for KV105.

A tree that imports the engine's package (`sglang`) without defining the write-loc class
(a plugin, a downstream serving layer) learns all of the above from the installed engine's
source too (`kvlint.learn.installed_engine`: located, never imported): its runtime package
joins the scope after the tree's files, so the tree's own definitions come first, and each
value learned there reads "learned from engine sglang/srt/PATH:LINE".

Learning is cheap: a plain bytes test picks the few files that could define
any of these, and only those are parsed, with the stdlib `ast` (learning needs
names and line numbers, not LibCST's round-trip tree). Whatever is not found
keeps the seed's spelling. Each learned value's source reads "learned from
PATH:LINE". A learner reads a file only through the questions of
`kvlint.learn.scope.Scope` (`kvlint.learn.classes` holds those about
the definitions above), which records them: after an edit, the contract cache asks
the edited files alone whether they answer as before.

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
  its subclasses; `page-split-pools`: the pools whose allocation is page-split,
  `(pages, page_size, ...)` (`torch.zeros((layers, pages, page_size, ...))`), and
  their subclasses (`kvlint.learn.pools`).
  Class hierarchies are read from `class X(Base):` headers across the tree.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional

from kvlint.api.config import Config, configured_contract
from kvlint.api.contract import AUTO, DEFAULT_WRITE_DOORS, PAGED_HELPERS, Contract
from kvlint.api.paths import ROOT_MARKERS
from kvlint.learn.admission import learn_admission
from kvlint.learn.page_pins import learn_page_pins
from kvlint.learn.pool_pairing import learn_pool_pairing
from kvlint.learn.statements import forget_pieces
from kvlint.learn.binding import learn_binding_methods
from kvlint.processes.collector import collector_paused
from kvlint.learn.classes import batch_mark_field, data_class, paged_helpers_defined, write_loc_class
from kvlint.learn.class_facts import learn_class_facts
from kvlint.learn.door_kinds import forwarded_checks, learn_door_kinds
from kvlint.learn.doors import doors_by_mark, doors_by_name, mark_checks
from kvlint.api.hierarchy import subclasses
from kvlint.learn.fork_doors import doors_by_forwarding, doors_by_write
from kvlint.learn.gate import learn_mark_gate
from kvlint.learn.installed_engine import Search, engine_package, locate_engine
from kvlint.learn.pools import learn_pool_classes as _learn_pool_classes
from kvlint.learn.scope import Asked, Scope
from kvlint.analysis.project_index import module_parts
from kvlint.learn.tree import (
    Learned as _Learned,
    class_bases,
    import_counts,
    imports_package,
    learn_door_checks as _learn_door_checks,
    parsed_tree,
    spelled_words,
    learn_import_spellings as _learn_import_spellings,
)

def learn_contract(config: Config, sources: Mapping[Path, bytes]) -> Contract:
    """The configured contract with its "auto" values learned from `sources` (and the installed
    engine's source, where the tree builds on one: `kvlint.learn.installed_engine`)."""
    with collector_paused():
        return _learn(config, sources)[0]


def learn_asking(config: Config, sources: Mapping[Path, bytes]) -> tuple[Contract, Asked]:
    """The contract `learn_contract` learns, and what learning asked of each file to learn it
    (what the contract cache keeps; a run without the cache does not digest it)."""
    with collector_paused():
        contract, scope, learned, search = _learn(config, sources)
        return contract, scope.asked(learned.pinned, search.identity() if search is not None else "")


def _learn(config: Config, sources: Mapping[Path, bytes]) -> tuple[Contract, Scope, _Learned, Optional[Search]]:
    # Called with the collector paused: learning parses hundreds of methods and some whole files, and
    # makes no cycles; with the collector on, sglang/srt took 1.8-2.0 s to learn, 1.45-1.5 s without.
    contract = configured_contract(config)
    scope = Scope(sources)
    search = _read_engine(config, contract, scope)
    learned = _Learned(shown=scope.shown)
    if _auto(config, "mark", "batch-mark", "layer-factory", "write-loc-module"):
        _learn_write_loc(contract, scope, learned)
    if _auto(config, "batch-mark"):
        _learn_batch_mark(contract, config, scope, learned)
    _learn_batch_fields(config, scope, learned)
    learn_binding_methods(str(learned.values.get("batch-mark", contract.batch_mark)), scope, learned)
    if "write-doors" not in dict(config.contract):
        _learn_doors(contract, config, scope, learned)
    if _auto(config, "paged-helpers-module"):
        _learn_paged_helpers(scope, learned)
    _learn_import_spellings(config, scope, learned)
    _learn_pool_classes(contract, config, scope, learned)
    _learn_door_checks(contract, learned, scope)
    learn_mark_gate(contract, learned, scope)
    # An engine tree (its own pool classes, no installed engine read) with no write mark, pinned or
    # learned, and no door checking one has not moved to the unified pool: a fork or an older release.
    pools = learned.values.get("pool-classes", contract.pool_classes)
    unmigrated = (search is None and bool(pools) and _auto(config, "mark") and "mark" not in learned.values
                  and not learned.values.get("door-checks-mark"))
    learn_admission(scope, learned, unmigrated)
    learn_pool_pairing(contract, scope, learned)
    learn_page_pins(scope, learned)
    # The trees, pieces and word sets kept for learning's many questions: over sglang/srt they held
    # more memory than the rest of a run, and the next learning reads anew what changed.
    parsed_tree.cache_clear()
    spelled_words.cache_clear()
    forget_pieces()
    values = {key: value for key, value in learned.values.items() if key in _keys_to_fill(config)}
    changes: dict[str, Any] = {key.replace("-", "_"): value for key, value in values.items()}
    found = {key: learned.sources[key] for key in values}
    missing = tuple(
        key
        for key in _LOOKED_FOR
        if config.contract_value(key) == AUTO and key not in learned.values and not _pinned_elsewhere(config, key, learned)
    )
    if search is not None:
        changes.update(
            engine_package=search.package,
            engine=search.engine.describe() if search.engine is not None else "",
            engine_search=search.describe(),
        )
    learned_contract = replace(contract, **changes, missing=missing, sources=(*contract.sources, *found.items()))
    return learned_contract, scope, learned, search


def _read_engine(config: Config, contract: Contract, scope: Scope) -> Optional[Search]:
    """Where the tree imports the engine (or `engine-path` names it) without defining the write-loc
    class, the installed engine's source joins the scope as context; what was looked for and found."""
    if scope.first(write_loc_class, contract.write_loc_class, contract.batch_factory) is not None:
        return None
    package = engine_package(config, contract)
    if not config.engine_path and (scope.first(imports_package, package) is None or _is_the_engine(scope, package)):
        return None
    search = locate_engine(package, config, contract, scope.paths)
    if search.engine is not None:
        scope.add_context(search.engine.sources(), search.engine.shown)
    return search


def _is_the_engine(scope: Scope, package: str) -> bool:
    """Whether the scanned tree is the engine package itself (a fork, an older release): most of
    its imports from the package are of its own files, so no installed copy has anything to add.
    A module is the tree's own where a file's path ends with its last parts, two at least
    (`sglang.srt.mem_cache.memory_pool`: `.../mem_cache/memory_pool.py`), wherever the tree sits
    and whatever its folder is called. A project vendoring a few stand-in modules under the
    package's name (`vendor/sglang/utils.py`) still imports the engine for the rest."""
    files = {module_parts(path.resolve().as_posix()) for path in scope.paths}
    tails = {parts[-length:] for parts in files for length in range(2, len(parts) + 1)}
    imported = {module: count for module, count in import_counts(scope, f"from {package}.".encode()).items()
                if module.startswith(f"{package}.")}
    inside = sum(count for module, count in imported.items()
                 if any(tuple(module.split("."))[-length:] in tails for length in range(2, module.count(".") + 2)))
    return bool(imported) and inside * 2 > sum(imported.values())


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
                            "batch-factory", "mark-predicate", "pool-classes", "page-split-pools")
            if config.contract_value(key) == AUTO}
    # Learned alongside the values they belong to, never configured on their own.
    auto |= {"write-loc-fields", "paged-helpers", "batch-fields", "door-checks-mark", "host-cache-classes",
             "door-reasons", "door-kinds", "door-bases", "class-facts", "mark-gate", "ungated-classes",
             "gate-off-classes", "binding-methods",
             "page-split-bases", "page-split-apart", "page-split-only", "page-pinned-classes", "unmarked-loc-attributes",
             "admission"}
    if config.contract_value("write-loc-class") == AUTO:
        auto.add("write-loc-class")
    if "write-doors" not in dict(config.contract):
        auto.add("write-doors")
    return auto


def _learn_write_loc(contract: Contract, scope: Scope, learned: _Learned) -> None:
    found = scope.first(write_loc_class, contract.write_loc_class, contract.batch_factory)
    if found is None:
        return
    path, klass = found
    learned.set("write-loc-class", contract.write_loc_class, path, klass.line)
    if klass.mark is not None:
        learned.set("mark", klass.mark, path, klass.line)
    learned.set("write-loc-fields", tuple(f for f in klass.fields if f != klass.mark), path, klass.line)
    learned.set("layer-factory", "for_layer" if klass.has_layer_factory else "", path, klass.line)
    # Refined by `_learn_import_spellings` from how the tree imports this file.
    learned.set("write-loc-module", module_path(path), path, klass.line)
    learned.defining["write-loc-module"] = path
    if klass.factory_line is not None:
        learned.set("batch-factory", contract.batch_factory, path, klass.factory_line)
    for attribute, line in klass.factory_marks:
        learned.set("batch-mark", attribute, path, line)
    if klass.predicate is not None:
        learned.set("mark-predicate", klass.predicate[0], path, klass.predicate[1])
    if klass.unmarked_locs:
        learned.set("unmarked-loc-attributes", tuple(a for a, _ in klass.unmarked_locs), path, klass.unmarked_locs[0][1])


def _learn_batch_mark(contract: Contract, config: Config, scope: Scope, learned: _Learned) -> None:
    mark = str(learned.values.get("mark", contract.mark))
    found = scope.first(batch_mark_field, config.tbo.batch_class, mark, contract.loc_attributes)
    if found is not None:
        path, (name, line) = found
        learned.set("batch-mark", name, path, line)


def _learn_batch_fields(config: Config, scope: Scope, learned: _Learned) -> None:
    """The batch class's dataclass fields, its bases' included, `ClassVar`s and `InitVar`s left out (as KV301 reads them)."""
    found = scope.first(data_class, config.tbo.batch_class)
    if found is None:
        return
    path, batch = found
    names: dict[str, None] = {}
    pending, seen = [batch], {config.tbo.batch_class}
    while pending:
        klass = pending.pop(0)
        names.update(dict.fromkeys(klass.fields))
        for base_name in klass.bases:
            if base_name in seen:
                continue
            seen.add(base_name)
            base_found = scope.first(data_class, base_name)
            if base_found is not None:
                pending.append(base_found[1])
    learned.set("batch-fields", tuple(names), path, batch.line)


def _learn_doors(contract: Contract, config: Config, scope: Scope, learned: _Learned) -> None:
    """By what a pool does with its loc where the tree has the mark, else by name; then the
    configuration's `add-write-doors` / `remove-write-doors`."""
    mark = learned.values.get("mark") or (contract.mark if config.contract_value("mark") != AUTO else None)
    if "write-loc-class" not in learned.values:
        mark = None
    cls = str(learned.values.get("write-loc-class", contract.write_loc_class))
    if mark:
        found = doors_by_mark(scope, cls, str(mark))
    else:
        attributes = tuple(sorted(name for name in contract.buffer_accessors if not name.startswith("get_")))
        hosts = tuple(sorted(subclasses(set(contract.host_cache_classes), class_bases(scope))))
        by_name = {door.name: door for door in (*doors_by_write(scope, attributes, hosts), *doors_by_name(scope))}
        # The defaults keep their loc index; a pool's own write may still say why one is a door.
        found = [replace(door, index=DEFAULT_WRITE_DOORS.get(door.name, door.index))
                 for door in doors_by_forwarding(scope, by_name, hosts)]
    doors = {} if mark and found else dict(DEFAULT_WRITE_DOORS)
    reasons = {} if mark and found else {name: "default" for name in doors}
    for door in found:
        doors[door.name] = door.index
        reasons[door.name] = door.reason(scope.shown(door.path))
        # Its line is in the reason.
        learned.pin(door.path, door.line)
    for name, index in contract.add_write_doors:
        doors[name] = index
        reasons[name] = f"config {config.path}: add-write-doors"
    for name in contract.remove_write_doors:
        doors.pop(name, None)
        reasons.pop(name, None)
    learned.values["door-reasons"] = tuple(reasons.items())
    learned.sources["door-reasons"] = "learned with write-doors"
    if mark and found:
        _learn_door_kinds(doors, cls, str(mark), contract.buffer_accessors, scope, learned)
    if found:
        learned.set("write-doors", tuple(doors.items()), found[0].path, found[0].line)
        how = "what each pool does with its loc" if mark else "the set_..._kv_buffer name pattern and the pools' own writes"
        learned.sources["write-doors"] += f" ({len(found)} doors, by {how})"
    elif contract.add_write_doors or contract.remove_write_doors:
        learned.values["write-doors"] = tuple(doors.items())
        learned.sources["write-doors"] = f"config {config.path}"


def _learn_door_kinds(doors: Mapping[str, int], cls: str, mark: str, accessors: tuple[str, ...], scope: Scope,
                      learned: _Learned) -> None:
    checks = forwarded_checks(scope, {name for found in scope.survey(mark_checks, cls, mark).values() for name, _ in found})
    fields: Any = learned.values.get("write-loc-fields", ())
    kinds, bases, lines = learn_door_kinds(scope, doors, cls, mark, str(learned.values.get("mark-predicate", "")), sorted(checks),
                                    tuple(fields))
    learned.values["door-kinds"] = kinds
    for path, line in lines:
        learned.pin(path, line)
    learned.values["door-bases"] = bases
    learned.sources["door-kinds"] = learned.sources["door-bases"] = "learned with write-doors"
    learned.values["class-facts"] = learn_class_facts(scope, tuple(klass for klass, _ in bases), accessors)
    learned.sources["class-facts"] = "learned with write-doors"


def _learn_paged_helpers(scope: Scope, learned: _Learned) -> None:
    best: Optional[tuple[int, str, Path, int, tuple[str, ...]]] = None
    for path, pairs in scope.survey(paged_helpers_defined).items():
        defined = dict(pairs)
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
