"""Which page-split pools a class can never meet, by the guards the tree builds each under.

A page-split pool's buffers hold pages in dim 0, where the paged-view helpers assume slots, so
a view of a buffer whose pool kvlint cannot type stays unsafe to rewrite while the tree has such a
pool. But the tree says where it builds one: every place naming the class so that it may be built
(a call, a class handed on as a value, an import under another name) sits under some guard, or in
a function or class that does. A guard ties the place:

* to backends: `<...>attention_backend == "ascend"` (or `in (...)`), the name of the registry
  factory it is in (`@register("fa3")`), its key in a dict keyed by the registry's names (two of
  them at least: `{"fa3": self._create_fa3_backend, ...}`, a draft factory's map, whose key is the
  draft's backend, the main one unless another is named; kvlint reads it as the backend run);
* to a platform: `_is_npu`, `is_musa()`, `platform.is_npu` (one device per process, so two
  platforms never meet).

A place with no guard of its own takes those of the places naming its function or class, a few
links up. A class built anywhere untied (or spelled in a string, or built nowhere kvlint sees) can
be met anywhere. A backend class never meets a page-split pool when every place building it (or
a subclass of it) and every place building the pool are tied apart: to disjoint backends or to
different platforms. The musa FlashAttention backend (fa3, on `_is_musa`) and the NPU pools
(built for `ascend`, or on `_is_npu`) are: `page-split-apart` lists such pairs for the layout rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Optional

from kvlint.api.contract import Contract
from kvlint.api.reach import Admission
from kvlint.learn.memo import remembered
from kvlint.learn.registry_read import building_nothing, may_spell, registry_factories, statements_spelling
from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned, class_bases, names_spelled
from kvlint.api.hierarchy import subclasses

# The devices a platform predicate names: a process runs on one of them.
_DEVICES = frozenset({"npu", "musa", "hip", "xpu", "cuda", "cpu", "mps", "hpu"})
# Running these runs the class's own code: a place in one is reached wherever the class is built.
_CONSTRUCTORS = frozenset({"", "__init__", "__new__", "__post_init__"})
# How many links up (function to its callers, class to its builders) an untied place looks.
_LINKS = 4


@dataclass(frozen=True)
class Tie:
    """What a place is tied to: the backends and platforms it runs under (None: any)."""

    backends: Optional[frozenset[str]] = None
    platforms: Optional[frozenset[str]] = None

    @property
    def tied(self) -> bool:
        return self.backends is not None or self.platforms is not None

    def narrowed(self, other: Tie) -> Tie:
        return Tie(_meet(self.backends, other.backends), _meet(self.platforms, other.platforms))

    def apart(self, other: Tie) -> bool:
        """Whether no run can be under both."""
        return any(mine is not None and theirs is not None and not mine & theirs
                   for mine, theirs in ((self.backends, other.backends), (self.platforms, other.platforms)))


def _meet(one: Optional[frozenset[str]], other: Optional[frozenset[str]]) -> Optional[frozenset[str]]:
    return other if one is None else one if other is None else one & other


@dataclass(frozen=True)
class Site:
    """A place naming `name` so that it may be built: in which class and function (top level
    first), and the tie its own guards give it (`spelled`: in a string, never tied). No line: an
    edit moving it changes no answer, so learning is not redone for it."""

    name: str
    owner: str
    function: str
    tie: Tie
    spelled: bool = False


def learn_pool_pairing(contract: Contract, scope: Scope, learned: Learned) -> None:
    """`page-split-apart`, for the page-split pools learned or configured."""
    split = learned.values.get("page-split-pools", contract.page_split_pools)
    if not isinstance(split, tuple) or not split:
        return
    registry = _registry(scope, learned, split)
    if not registry:
        return
    bases = class_bases(scope)
    built = {name for _, _, classes in registry for name in classes}
    # What a factory returns may be another factory: only classes are consumers.
    consumers = sorted(subclasses(built, bases) - {function for _, function, _ in registry})
    ties = _Ties(scope, {function: name for name, function, _ in registry})
    ties.fetch([*split, *consumers])
    pools = {pool: ties.of(pool) or None for pool in split}
    if all(tie is None for tie in pools.values()):
        return
    apart: list[tuple[str, tuple[str, ...]]] = []
    for klass in consumers:
        consumer = [ties.of(name) or None for name in sorted(subclasses({klass}, bases))]
        if any(tie is None for tie in consumer):
            continue
        never = tuple(pool for pool, tied in pools.items() if tied is not None and all(
            mine.apart(theirs) for some in consumer for mine in some or () for theirs in tied))
        if never:
            apart.append((klass, never))
    if apart:
        learned.values["page-split-apart"] = tuple(apart)
        learned.sources["page-split-apart"] = "learned: the guards each backend class and page-split pool is built under"


def _registry(scope: Scope, learned: Learned, split: tuple[str, ...]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The backend registry as (name, factory, classes returned): the admission's, else the one
    whose names the page-split pools' guards compare the attention backend with most."""
    admission = learned.values.get("admission")
    if isinstance(admission, Admission) and admission.registry:
        return [(factory.name, factory.function, factory.classes) for factory in admission.registry]
    unnamed = _Ties(scope, {})
    named = {backend for pool in split for backend in unnamed.backends_compared(pool)}
    best: list[tuple[str, str, tuple[str, ...]]] = []
    overlap = 0
    for reads in scope.survey(registry_factories).values():
        shared = len(named & {read.name for read in reads})
        if shared > overlap:
            overlap, best = shared, [(read.name, read.function, read.returned) for read in reads]
    return best


class _Ties:
    """The ties of every place building a name, resolved up through untied places."""

    def __init__(self, scope: Scope, factories: Mapping[str, str]) -> None:
        self._scope = scope
        self._factories = factories
        self._backends = frozenset(factories.values())
        self._known: dict[tuple[str, int], Optional[tuple[Tie, ...]]] = {}
        self._sites: dict[str, list[Site]] = {}

    def fetch(self, names: Iterable[str]) -> None:
        """The sites of `names` and of the code holding them, a few links up: one survey of the
        tree per link, not one per name."""
        pending = set(names) - set(self._sites)
        for _ in range(_LINKS + 1):
            if not pending:
                return
            for name in pending:
                self._sites[name] = []
            above: set[str] = set()
            for answer in self._scope.survey(guarded_sites, tuple(sorted(pending)), self._backends).values():
                for site in answer:
                    self._sites[site.name].append(site)
                    above.add(self._container(site))
            pending = above - set(self._sites) - {""}

    def of(self, name: str, links: int = _LINKS) -> Optional[tuple[Tie, ...]]:
        """Each way `name` is built, as a tie; None where some way is untied, () where none is seen."""
        key = (name, links)
        if key not in self._known:
            self._known[key] = None  # a name reached again through itself is untied
            self._known[key] = self._resolve(name, links)
        return self._known[key]

    def _resolve(self, name: str, links: int) -> Optional[tuple[Tie, ...]]:
        self.fetch([name])
        found: list[Tie] = []
        for site in self._sites[name]:
            if site.spelled:
                return None
            above = self._above(site, name, links)
            if above is None:
                if not site.tie.tied:
                    return None
                found.append(site.tie)
            else:
                found.extend(site.tie.narrowed(up) for up in above)
        return tuple(found)

    def backends_compared(self, name: str, links: int = _LINKS) -> set[str]:
        """The backend names the guards over the places building `name` compare, a few links up."""
        self.fetch([name])
        found: set[str] = set()
        for site in self._sites[name]:
            found |= site.tie.backends or set()
            container = self._container(site)
            if container and container != name and links > 0:
                found |= self.backends_compared(container, links - 1)
        return found

    def _container(self, site: Site) -> str:
        """The code whose being run runs `site`: a constructor's class, else its function."""
        return site.owner if site.owner and site.function in _CONSTRUCTORS else site.function

    def _above(self, site: Site, name: str, links: int) -> Optional[tuple[Tie, ...]]:
        """The ways the code holding `site` runs: a registry factory under its backend name (and
        wherever else it is called), a constructor wherever its class is built, any other function
        wherever it is called; None where some way is untied or none is seen."""
        container = self._container(site)
        if not container or container == name or links <= 0:
            return None
        callers = self.of(container, links - 1)
        backend = self._factories.get(site.function) if not site.owner else None
        if backend is not None and callers is not None:
            return (Tie(backends=frozenset({backend})), *callers)
        return callers or None


def guarded_sites(data: bytes, names: tuple[str, ...], backends: frozenset[str]) -> tuple[Site, ...]:
    """Where this file names any of `names` so that it may be built, each with its guards' tie
    (`backends`: the registry's names, the only dict keys read as the backend that runs)."""
    wanted = names_spelled(data, names)
    if not wanted:
        return ()
    return tuple(remembered("guarded-sites", data, (*wanted, *sorted(backends)),
                            lambda: list(_sites(data, set(wanted), backends))))


def _sites(data: bytes, wanted: set[str], backends: frozenset[str]) -> Iterator[Site]:
    for statement, _offset, hits in statements_spelling(data, wanted):
        walk = _Walk(wanted, building_nothing(statement, hits), hits, backends)
        yield from walk.sites(statement, Tie(), "", "")


@dataclass(frozen=True)
class _Walk:
    """A walk of one statement down to the places naming a wanted name, carrying the guards'
    tie; `hits` (sorted lines of the statement spelling one) prune what holds none."""

    wanted: set[str]
    quiet: set[int]
    hits: list[int]
    backends: frozenset[str]

    def sites(self, node: ast.AST, tie: Tie, owner: str, function: str) -> Iterator[Site]:
        if isinstance(node, ast.ClassDef):
            owner = owner or node.name
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = function or node.name
        if isinstance(node, (ast.If, ast.IfExp)):
            yield from self.below([node.test], tie, owner, function)
            for part, holds in ((node.body, True), (node.orelse, False)):
                branches = part if isinstance(part, list) else [part]
                yield from self.below(list(branches), tie.narrowed(_guard(node.test, holds)), owner, function)
            return
        if isinstance(node, ast.Dict):
            # A dict keyed by the registry's names (two at least) dispatches on the backend, each key
            # one; a dict keyed otherwise (a device, a model) says nothing of it.
            keys = [key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                    for key in node.keys]
            dispatch = len(self.backends.intersection(keys)) >= 2
            for key, name, value in zip(node.keys, keys, node.values):
                inner = tie.narrowed(Tie(backends=frozenset({name}))) if dispatch and name is not None else tie
                yield from self.below([key] if key is not None else [], tie, owner, function)
                yield from self.below([value], inner, owner, function)
            return
        site = _site(node, self.wanted, self.quiet)
        if site is not None:
            name, spelled = site
            yield Site(name, owner, function, tie, spelled)
        if not _exports(node):
            yield from self.below(list(ast.iter_child_nodes(node)), tie, owner, function)

    def below(self, nodes: list[ast.AST], tie: Tie, owner: str, function: str) -> Iterator[Site]:
        for node in nodes:
            if may_spell(node, self.hits):
                yield from self.sites(node, tie, owner, function)


def _site(node: ast.AST, wanted: set[str], quiet: set[int]) -> Optional[tuple[str, bool]]:
    """(name, spelled in a string) where `node` names a wanted name so that it may be built."""
    if id(node) in quiet:
        return None
    if isinstance(node, ast.ImportFrom):
        renamed = [alias.name for alias in node.names if alias.name in wanted and alias.asname not in (None, alias.name)]
        return (renamed[0], False) if renamed else None
    if isinstance(node, ast.Name) and node.id in wanted:
        return node.id, False
    if isinstance(node, ast.Attribute) and node.attr in wanted:
        return node.attr, False
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in wanted:
        return node.value, True
    return None


def _exports(node: ast.AST) -> bool:
    """`__all__ = [...]`: the names it spells are exported, not looked up."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    return any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets)


def _guard(test: ast.expr, holds: bool) -> Tie:
    """The tie a branch taken when `test` is `holds` gives: a backend compared or a platform tested."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _guard(test.operand, not holds)
    if isinstance(test, ast.BoolOp):
        # Both parts hold under `and`, and neither under a failed `or`: each narrows.
        if isinstance(test.op, ast.And) == holds:
            tie = Tie()
            for value in test.values:
                tie = tie.narrowed(_guard(value, holds))
            return tie
        return Tie()
    platform = _platform(test)
    if platform is not None:
        return Tie(platforms=frozenset({platform})) if holds else Tie()
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _names_backend(test.left):
        names = _strings(test.comparators[0])
        op = test.ops[0]
        positive = isinstance(op, (ast.Eq, ast.In)) if holds else isinstance(op, (ast.NotEq, ast.NotIn))
        if names is not None and positive:
            return Tie(backends=names)
    return Tie()


def _platform(test: ast.expr) -> Optional[str]:
    """`npu` for `_is_npu`, `is_npu()`, `platform.is_npu`, `platform.is_npu()`; None otherwise."""
    node = test.func if isinstance(test, ast.Call) and not test.args else test
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    device = name.lstrip("_")[3:] if name.lstrip("_").startswith("is_") else ""
    return device if device in _DEVICES else None


def _names_backend(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("attention_backend")


def _strings(node: ast.expr) -> Optional[frozenset[str]]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return frozenset({node.value})
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [element.value for element in node.elts if isinstance(element, ast.Constant)]
        if len(values) == len(node.elts) and all(isinstance(value, str) for value in values):
            return frozenset(str(value) for value in values)
    return None

