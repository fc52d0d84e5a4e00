"""The project index: facts about functions across files, resolved from per-file summaries.

Each file's `FileSummary` (`kvlint.analysis.helper_summary`, CPython `ast`)
keeps calls as spellings. Here they are resolved:

* `f(...)`: a function of the same module, else `from x import f` (across
  files, following one re-export per hop);
* `mod.f(...)`: `import pkg.mod as mod` / `from pkg import mod`;
* `self.m(...)` / `cls.m(...)`: the enclosing class, then its bases left to
  right, depth first, across files (an override in the subclass wins);
* `super().m(...)`: the bases only.

A module name is matched to a file of the tree by its trailing dotted parts
(`sglang.srt.layers.x` finds `layers/x.py` under a checkout of `sglang/srt`);
a name two files could be is unresolved. An unresolved callee gives no fact,
never a guess. Facts are computed on demand and memoised; a function met again
while its own facts are being computed (recursion, a cycle) contributes
nothing on that path, so every chain terminates.

Summaries come from a loader (the engine's: the result cache first, else an
`ast` parse of the file), so a file not in the run's scope, such as an
unchanged base class under `--changed`, is read when a resolution needs it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional, Protocol

from kvlint.analysis.summaries import ClassSummary, FileSummary, FunctionSummary, Spelling
from kvlint.analysis.summaries import ParamUse
from kvlint.api.helpers import HelperFact, HelperFacts, ParamDoor, ParamLayout, Where

# (path, class name or "", function summary)
Target = tuple[str, str, FunctionSummary]
_MAX_HOPS = 8


def module_parts(path: str) -> tuple[str, ...]:
    """The dotted parts a path stands for: `a/b/c.py` -> (a, b, c); `a/b/__init__.py` -> (a, b)."""
    parts = [part for part in path.replace("\\", "/").split("/") if part and part not in (".", "..")]
    if not parts:
        return ()
    last = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
    return tuple(parts[:-1]) if last == "__init__" else (*parts[:-1], last)


class ModuleNames(Protocol):
    """What a file defines and imports, as the project index and the proof tree each read it."""

    @property
    def functions(self) -> Mapping[str, object]: ...

    @property
    def classes(self) -> Mapping[str, object]: ...

    @property
    def imports(self) -> Mapping[str, str]: ...


class ModuleMap:
    """Which file of the tree a dotted module name is, whatever directory the run started in."""

    def __init__(self, paths: Iterable[str]) -> None:
        # By the last part only: a run asks for a few dozen modules, and every trailing part of
        # every path of a large tree (sglang/srt: 2,141) cost more than those lookups.
        self._by_last: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for path in paths:
            parts = module_parts(path)
            if parts:
                self._by_last.setdefault(parts[-1], []).append((path, parts))

    def path_of(self, dotted: str) -> Optional[str]:
        """The one file the module `dotted` is, matched by its longest trailing parts."""
        parts = tuple(part for part in dotted.split(".") if part)
        if not parts:
            return None
        candidates = self._by_last.get(parts[-1], [])
        # A dotted name is matched on two parts at least: `torch.nn` is not some `nn.py` of the tree.
        for start in range(max(len(parts) - 1, 1)):
            tail = parts[start:]
            found = [path for path, own in candidates if own[-len(tail):] == tail]
            if found:
                return found[0] if len(found) == 1 else None
        return None

    def definition(self, path: str, name: str, names_of: Callable[[str], Optional[ModuleNames]]) -> Optional[tuple[str, str]]:
        """(path, name) of what `name` means in `path`'s module: defined there, or imported (followed across files)."""
        for _hop in range(_MAX_HOPS + 1):
            names = names_of(path)
            if names is None:
                return None
            if name in names.functions or name in names.classes:
                return path, name
            origin = names.imports.get(name)
            if origin is None or "." not in origin:
                return None
            dotted, _, name = origin.rpartition(".")
            target = self.path_of(dotted)
            if target is None or target == path:
                return None
            path = target
        return None


class ProjectIndex:
    def __init__(self, paths: Iterable[str], load: Callable[[str], Optional[FileSummary]]) -> None:
        self._load = load
        self._summaries: dict[str, Optional[FileSummary]] = {}
        self.modules = ModuleMap(paths)
        self._facts: dict[tuple[str, str, str], Optional[HelperFact]] = {}
        self._busy: set[tuple[str, str, str]] = set()
        self._mro: dict[tuple[str, str], list[tuple[str, ClassSummary]]] = {}
        # Names a function with a fact may have (None: any): a call of another name is not resolved,
        # so resolution never reads files that cannot matter.
        self.names: Optional[set[str]] = None

    def summary(self, path: str) -> Optional[FileSummary]:
        if path not in self._summaries:
            self._summaries[path] = self._load(path)
        return self._summaries[path]

    # -- names -----------------------------------------------------------

    def _definition(self, path: str, name: str) -> Optional[tuple[str, str]]:
        """(path, name) of what `name` means in `path`'s module: defined there or imported."""
        return self.modules.definition(path, name, self.summary)

    def _module_alias(self, path: str, alias: str) -> Optional[str]:
        summary = self.summary(path)
        origin = summary.imports.get(alias) if summary is not None else None
        return self.modules.path_of(origin) if origin is not None else None

    def _class(self, path: str, written: str) -> Optional[tuple[str, ClassSummary]]:
        """The class a base written as `Base` or `mod.Base` in `path` resolves to."""
        owner, _, name = written.rpartition(".")
        where: Optional[tuple[str, str]]
        if owner:
            module = self._module_alias(path, owner.split(".")[0]) if "." not in owner else self.modules.path_of(owner)
            where = self._definition(module, name) if module is not None else None
        else:
            where = self._definition(path, name)
        if where is None:
            return None
        summary = self.summary(where[0])
        klass = summary.classes.get(where[1]) if summary is not None else None
        return (where[0], klass) if klass is not None else None

    def mro(self, path: str, class_name: str) -> list[tuple[str, ClassSummary]]:
        """The class and its bases, depth first, left to right; each class once."""
        if (path, class_name) not in self._mro:
            self._mro[(path, class_name)] = self._linearize(path, class_name)
        return self._mro[(path, class_name)]

    def _linearize(self, path: str, class_name: str) -> list[tuple[str, ClassSummary]]:
        summary = self.summary(path)
        start = summary.classes.get(class_name) if summary is not None else None
        order: list[tuple[str, ClassSummary]] = []
        seen: set[tuple[str, str]] = set()
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

    def resolve(self, path: str, class_name: str, spelling: Spelling) -> Optional[Target]:
        """The function a call spelt `spelling` inside `class_name` ("" outside a class) of `path` runs."""
        kind = spelling[0]
        if kind == "name":
            where = self._definition(path, spelling[1])
            if where is None:
                return None
            summary = self.summary(where[0])
            function = summary.functions.get(where[1]) if summary is not None else None
            return (where[0], "", function) if function is not None else None
        if kind == "attr":
            module = self._module_alias(path, spelling[1])
            if module is None:
                return None
            summary = self.summary(module)
            function = summary.functions.get(spelling[2]) if summary is not None else None
            return (module, "", function) if function is not None else None
        if not class_name:
            return None
        classes = self.mro(path, class_name)
        if kind == "super":
            classes = classes[1:]
        for owner, klass in classes:
            method = klass.methods.get(spelling[1])
            if method is not None:
                return owner, klass.name, method
        return None

    # -- facts -----------------------------------------------------------

    def fact(self, target: Target) -> Optional[HelperFact]:
        path, class_name, function = target
        key = (path, class_name, function.name)
        if key in self._facts:
            return self._facts[key]
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            fact = self._compute(path, class_name, function)
        finally:
            self._busy.discard(key)
        self._facts[key] = fact
        return fact

    def _callee_fact(self, path: str, class_name: str, spelling: Optional[Spelling]) -> Optional[HelperFact]:
        if spelling is None or (self.names is not None and spelling[-1] not in self.names):
            return None
        target = self.resolve(path, class_name, spelling)
        return self.fact(target) if target is not None else None

    def _compute(self, path: str, class_name: str, function: FunctionSummary) -> Optional[HelperFact]:
        returns_raw: Optional[Where] = None
        returns_paged: Optional[Where] = None
        only_raw_or_marked = bool(function.returns)
        accessor = True
        for ret in function.returns:
            accessor = accessor and (ret.kind != "call" and (ret.kind != "paged" or ret.direct))
            if ret.kind == "raw":
                returns_raw = returns_raw or Where(path, ret.line, f"returns `{ret.detail}`")
            elif ret.kind == "paged":
                returns_paged = returns_paged or Where(path, ret.line, f"returns paged KV from `{ret.detail}`")
            elif ret.kind == "call":
                callee = self._callee_fact(path, class_name, ret.callee)
                if callee is not None:
                    returns_raw = returns_raw or callee.returns_raw
                    returns_paged = returns_paged or callee.returns_paged
            if ret.kind not in ("raw", "marked"):
                only_raw_or_marked = False
        params = self._param_doors(path, class_name, function)
        layout = self._param_layouts(path, class_name, function)
        if returns_raw is None and returns_paged is None and not params and not layout:
            return None
        name = f"{class_name}.{function.name}" if class_name else function.name
        callers_ok = only_raw_or_marked and returns_raw is not None and self._callers_only_doors(
            (path, class_name, function)
        )
        return HelperFact(
            callers_only_doors=callers_ok,
            helper=name,
            defined=Where(path, function.line, name),
            returns_raw=returns_raw,
            returns_only_raw_or_marked=only_raw_or_marked and returns_raw is not None,
            returns_paged=returns_paged,
            returns_accessor=accessor and returns_paged is not None,
            params=params,
            layout=layout,
        )

    def _param_doors(self, path: str, class_name: str, function: FunctionSummary) -> tuple[ParamDoor, ...]:
        reached: dict[str, list[Optional[ParamDoor]]] = {}
        for use in function.uses:
            position = function.params.index(use.param) if use.param in function.params else -1
            if use.door:
                found: Optional[ParamDoor] = ParamDoor(
                    use.param, position, use.door, Where(path, use.line, f"`{use.door}`"), True
                )
            else:
                callee = self._callee_fact(path, class_name, use.callee)
                inner = callee.door_param(use.position, use.keyword or None) if callee is not None else None
                found = None if inner is None else ParamDoor(use.param, position, inner.door, inner.where, inner.only_doors)
            reached.setdefault(use.param, []).append(found)
        doors = []
        for param, found_all in reached.items():
            hits = [hit for hit in found_all if hit is not None]
            if not hits:
                continue
            only = param in function.only_passed and len(hits) == len(found_all) and all(h.only_doors for h in hits)
            first = hits[0]
            doors.append(ParamDoor(param, first.position, first.door, first.where, only))
        return tuple(doors)

    def _param_layouts(self, path: str, class_name: str, function: FunctionSummary) -> tuple[ParamLayout, ...]:
        """The parameters the helper (or a helper it passes them to, unchanged) uses in a layout-sensitive call."""

        def position(param: str) -> int:
            return function.params.index(param) if param in function.params else -1

        found = [
            ParamLayout(use.param, position(use.param), use.kind, Where(path, use.line, f"`{use.call}`"),
                        use.page_param, position(use.page_param) if use.page_param else -1, use.unit_page)
            for use in function.layout
        ]
        for use in function.uses:
            callee = self._callee_fact(path, class_name, use.callee) if use.callee is not None else None
            for inner in callee.layout if callee is not None else ():
                if not _passes(use, inner.param, inner.position):
                    continue
                page_param = ""
                if inner.page_param:
                    # The page size the callee takes from its caller: a parameter passed on, or spelt here.
                    passed = [other.param for other in function.uses if other.line == use.line
                              and other.callee == use.callee and _passes(other, inner.page_param, inner.page_position)]
                    if passed:
                        page_param = passed[0]
                    elif (use.line, inner.page_position) not in function.page_args:
                        continue
                found.append(ParamLayout(use.param, position(use.param), inner.kind, inner.where, page_param,
                                         position(page_param) if page_param else -1, inner.unit_page))
        first: dict[tuple[str, str], ParamLayout] = {}
        for layout in found:
            first.setdefault((layout.param, layout.kind), layout)
        return tuple(first.values())

    def _callers_only_doors(self, target: Target) -> bool:
        """Every call of `target` in the files read so far passes its result straight to a door (one call at least).

        The engine reads every file calling a helper's name before it asks (`kvlint.running.project_facts`).
        """
        name = target[2].name
        seen = False
        for path, summary in list(self._summaries.items()):
            for (klass, spelling), only in (summary.call_uses.items() if summary is not None else ()):
                if spelling[-1] != name or self.resolve(path, klass, spelling) != target:
                    continue
                if not only:
                    return False
                seen = True
        return seen

    def functions_read(self) -> list[FunctionSummary]:
        """Every function and method of the files read so far."""
        return [function for summary in self._summaries.values() if summary is not None for function in summary.all_functions()]

    def tensor_args_read(self) -> set[tuple[str, object, str]]:
        """`FileSummary.tensor_args` of the files read so far."""
        return {entry for summary in self._summaries.values() if summary is not None for entry in summary.tensor_args}

    def tensor_callers(self, names: set[str]) -> set[str]:
        """The files read so far that hand a tensor argument to a call of one of `names`."""
        return {
            path for path, summary in self._summaries.items()
            if summary is not None and any(callee in names for callee, _slot, _origin in summary.tensor_args)
        }

    def definers(self, names: set[str]) -> set[str]:
        """The files read so far that define a function or method named in `names`."""
        return {
            path for path, summary in self._summaries.items()
            if summary is not None and any(function.name in names for function in summary.all_functions())
        }

    def helpers_with_facts(self, path: str) -> set[str]:
        """The names of `path`'s functions and methods that have a fact."""
        summary = self.summary(path)
        if summary is None:
            return set()
        names = {name for name, function in summary.functions.items() if self.fact((path, "", function))}
        for klass in summary.classes.values():
            names.update(name for name, method in klass.methods.items() if self.fact((path, klass.name, method)))
        return names

    def view(self, path: str) -> HelperFacts:
        """The facts of every helper `path` calls that the index resolves and knows something of."""
        summary = self.summary(path)
        by_call: dict[tuple[str, Spelling], HelperFact] = {}
        if summary is None:
            return HelperFacts()
        for class_name, spellings in summary.calls.items():
            for spelling in sorted(spellings):
                fact = self._callee_fact(path, class_name, spelling)
                if fact is not None:
                    # Only `self`/`cls`/`super()` calls depend on the class they are made in.
                    by_call[(class_name if spelling[0] in ("self", "cls", "super") else "", spelling)] = fact
        defined: dict[tuple[str, str], HelperFact] = {}
        owners = [("", summary.functions)] + [(k.name, k.methods) for k in summary.classes.values()]
        for class_name, functions in owners:
            for function in functions.values():
                if self.names is not None and function.name not in self.names:
                    continue
                fact = self.fact((path, class_name, function))
                if fact is not None and fact.callers_only_doors:
                    defined[(class_name, function.name)] = fact
        return HelperFacts(by_call, defined)


def _passes(use: ParamUse, param: str, position: int) -> bool:
    """Whether `use` passes its parameter on as the callee's `param` (at `position`)."""
    return use.keyword == param if use.keyword else use.position == position >= 0
