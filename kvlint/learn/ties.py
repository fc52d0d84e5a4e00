"""Where a class or function may be built or run, as the guards over those places tie it.

Every place naming a name so that it may be built (a call, a class handed on as a value, an
import under another name) sits under some guard, or in a function or class that does. A guard
ties the place:

* to backends: `<...>attention_backend == "ascend"` (or `in (...)`, or `!=` on the other branch;
  the branch where such a comparison fails, to every other name of the registry),
  the name of the registry factory it is in (`@register("fa3")`), its key in a dict keyed by the
  registry's names (two of them at least: `{"fa3": self._create_fa3_backend, ...}`, a draft
  factory's map, whose key is the draft's backend, the main one unless another is named);
* to a platform: `_is_npu`, `is_musa()`, `platform.is_npu` (one device per process, so two
  platforms never meet);
* to speculative algorithms: `cfg.speculative_algorithm in ("EAGLE", ...)`, or a predicate of the
  algorithm enum, read from its body (`kvlint.learn.algorithm_predicates`): `self.is_eagle()`;
* to page sizes: an `assert` on the page size earlier in the block (`ps = self.page_size;
  assert ps == 256`) ties what follows it.

A class handed to a registering function (`register_kv_pool_factory("v4", pred, V4Pool)`,
`kvlint.learn.registries`) is built wherever a function handing out that registry is called.

A place with no guard of its own takes those of the places naming its function or class, a few
links up. A class built anywhere untied (or spelled in a string, or built nowhere kvlint sees) can
be met anywhere. Pool pairing (`kvlint.learn.pool_pairing`) and the admission's draft refusals
(`kvlint.learn.admission`) read these ties.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Optional

from kvlint.learn.algorithm_predicates import Predicates
from kvlint.learn.guards import Tie, asserted_pages, dispatch_names, guard_tie, is_page_size
from kvlint.learn.memo import remembered
from kvlint.learn.registries import registerings_of
from kvlint.learn.statements import building_nothing, may_spell, statements_spelling
from kvlint.learn.scope import Scope
from kvlint.api.hierarchy import children_of, subclasses
from kvlint.learn.name_sources import OtherClasses
from kvlint.learn.tree import names_spelled

# Running these runs the class's own code: a place in one is reached wherever the class is built.
CONSTRUCTORS = frozenset({"", "__init__", "__new__", "__post_init__"})
# Methods run without an instance: their class need not be built for them to run.
_UNBOUND = frozenset({"staticmethod", "classmethod"})
# How many links up (function to its callers, class to its builders) an untied place looks.
_LINKS = 4


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
    # In a method that runs on an instance (not a static or class method): its class must be built first.
    bound: bool = False
    # Its class is decorated: a decorator may register the class, building it where no place names it.
    decorated: bool = False
    # An argument of a module-level call (`register_kv_pool_factory("v4", pred, V4Pool)`): the
    # function called, and the argument's position or keyword. Where that function registers it
    # (`kvlint.learn.registries`), it is built where the registry hands it out.
    handed_to: str = ""
    handed_as: int | str = -1


class Ties:
    """The ties of every place building a name, resolved up through untied places; `predicates`
    the algorithm enum's (`kvlint.learn.algorithm_predicates`)."""

    def __init__(self, scope: Scope, factories: Mapping[str, str], bases: Mapping[str, set[str]],
                 predicates: Predicates = (), enough: Optional[Callable[[Tie], bool]] = None,
                 links: int = _LINKS, names: Optional[frozenset[str]] = None, asked: Mapping[str, Path] = {}) -> None:
        self._scope = scope
        self._others = OtherClasses(scope, asked)
        self._links = links
        self._question = enough
        self._factories = factories
        self._bases = bases
        # The registry's names: those of its factories, unless a dispatching function holds several.
        self._backends = frozenset(factories.values()) if names is None else names
        self._predicates = predicates
        self._known: dict[tuple[str, int, Tie], Optional[tuple[Tie, ...]]] = {}
        self._registries: dict[tuple[str, int | str], tuple[str, ...]] = {}
        self._sites: dict[str, list[Site]] = {}
        # Each class asked with its subclasses, each function alone.
        self._family: dict[str, list[str]] = {}
        self._children = children_of(bases)

    def fetch(self, names: Iterable[str]) -> None:
        """The sites of `names`, in one survey of the tree. The code holding them is fetched only
        when asked: resolving stops at the first way that is untied, and a way through a model
        runner or a server would otherwise be read whole for nothing."""
        pending = tuple(sorted(set(names) - set(self._sites)))
        if not pending:
            return
        for name in pending:
            self._sites[name] = []
        for path, answer in self._scope.survey(guarded_sites, pending, self._backends, self._predicates).items():
            for site in answer:
                if site.tie.asserted_at is not None:
                    site = replace(site, tie=replace(site.tie, asserted_at=(path, site.tie.asserted_at[1])))
                if not self._others.names_another(site.name, path):
                    self._sites[site.name].append(site)

    def of(self, name: str, links: Optional[int] = None, below: Tie = Tie()) -> Optional[tuple[Tie, ...]]:
        """Each way `name` is built, as a tie; None where some way is untied, () where none is seen.
        `below`: the tie of the place asking, already narrowed from where it is built; a way
        whose tie with it is `enough` is not resolved further up (narrowing keeps it enough)."""
        links = self._links if links is None else links
        key = (name, links, below)
        if key not in self._known:
            self._known[key] = None  # a name reached again through itself is untied
            self._known[key] = self._resolve(name, links, below)
        return self._known[key]

    def built(self, name: str) -> Optional[tuple[Tie, ...]]:
        """Each way the class `name` itself is built, its subclasses' builds left out: where an
        instance of exactly that class can be met."""
        self.fetch([name])
        return self._resolve(name, self._links, Tie(), own=True)

    def _resolve(self, name: str, links: int, below: Tie, own: bool = False) -> Optional[tuple[Tie, ...]]:
        # A class's code runs on its subclasses' instances too: their builds are its ways.
        if name not in self._family:
            self._family[name] = sorted(subclasses({name}, self._bases, self._children)) if name in self._bases else [name]
        names = [name] if own else self._family[name]
        self.fetch(names)
        found: list[Tie] = []
        for site in (site for each in names for site in self._sites[each]):
            if site.spelled:
                return None
            here = below.narrowed(site.tie)
            if self._settled(here):
                found.append(site.tie)
                continue
            above = self._above(site, name, links, here)
            if above is None:
                if not site.tie.tied:
                    return None
                found.append(site.tie)
            else:
                found.extend(site.tie.narrowed(up) for up in above)
        return tuple(found)

    def dispatched(self, name: str, links: int) -> bool:
        """Whether a place at most `links` calls up from where `name` is built is tied to backends:
        a cheap look before resolving every way, which reads the code above whole. Only callers are
        followed: a dispatch on the backend calls what it picks."""
        self.fetch([name])
        sites = self._sites[name]
        return any(site.tie.backends is not None for site in sites) or links > 1 and any(
            self.dispatched(site.function, links - 1) for site in sites
            if site.function and site.function != name and not (site.owner and site.function in CONSTRUCTORS))

    def backends_compared(self, name: str, links: int = _LINKS) -> set[str]:
        """The backend names the guards over the places building `name` compare, a few links up:
        each place holding one read once, a link at a time."""
        found: set[str] = set()
        seen, level = {name}, [name]
        for _ in range(links + 1):
            self.fetch(level)
            above = []
            for site in (site for each in level for site in self._sites[each]):
                found |= site.tie.backends or set()
                for container in _containers(site):
                    if container and container not in seen:
                        seen.add(container)
                        above.append(container)
            level = above
        return found

    def _above(self, site: Site, name: str, links: int, here: Tie) -> Optional[tuple[Tie, ...]]:
        """The ways the code holding `site` runs: a registry factory under its backend name (and
        wherever else it is called), a constructor or instance method wherever its class (or a
        subclass) is built, any other function wherever it is called; None where some way is
        untied or none is seen."""
        if links <= 0:
            return None
        readers = self._handing_out(site)
        if readers:
            handed = [self.of(reader, links - 1, here) for reader in readers]
            return None if not all(handed) else tuple(tie for ways in handed if ways for tie in ways)
        if site.owner and (site.function in CONSTRUCTORS or _implicit(site)):
            return self._ways(site.owner, name, links, here)
        if not (site.owner and site.bound):
            backend = self._factories.get(site.function) if not site.owner else None
            if backend is not None and site.function != name:
                # A registry factory runs under its backend name, and wherever else it is called (if anywhere).
                callers = self.of(site.function, links - 1, here)
                return None if callers is None else (Tie(backends=frozenset({backend})), *callers)
            return self._ways(site.function, name, links, here)
        # A method runs where it is called, and on an instance of its class, built first: both tie
        # it. Without a question to settle (`enough`), its callers alone are read, which settle
        # most: its class's builds lead up through a scheduler or a model runner, read whole to end
        # untied. With one, its class's builds are read where its callers do not settle it; and
        # first, where the place is already tied to backends: a draft class's builds reach the
        # worker its algorithm picks in a few links, its callers through many helpers.
        if not site.tie.tied and self._never_runs(site):
            # An unguarded place no code runs makes nothing untied; a guarded one keeps its guards' tie.
            return ()
        if self._question is None:
            return self._ways(site.function, name, links, here)
        built = self._ways(site.owner, name, links, here) if here.backends is not None else None
        if built and all(self._settled(here.narrowed(build)) for build in built):
            return built
        callers = self._ways(site.function, name, links, here)
        if callers and all(self._settled(here.narrowed(call)) for call in callers):
            return callers
        built = built or self._ways(site.owner, name, links, here)
        if callers and built:
            return tuple(dict.fromkeys(call.narrowed(build) for call in callers for build in built))
        return callers or built

    def _handing_out(self, site: Site) -> tuple[str, ...]:
        """The functions handing out the registry the call holding `site` stores it in; () where it
        stores it in none (read only for a module-level call's argument: plugins register at import)."""
        if not site.handed_to:
            return ()
        key = (site.handed_to, site.handed_as)
        if key not in self._registries:
            self._registries[key] = tuple(sorted({
                reader for found in self._scope.survey(registerings_of, site.handed_to).values()
                for registering in found if registering.stores(site.handed_as) for reader in registering.readers}))
        return self._registries[key]

    def _never_runs(self, site: Site) -> bool:
        """A method of a class the tree never builds (no place names it so, no subclass, no decorator
        to register it) that no place calls: a test class's method, run only by a test runner."""
        if site.decorated or self._children.get(site.owner):
            return False
        # Whether any place names them is enough: how those places are tied is not asked.
        self.fetch([site.owner])
        if self._sites[site.owner]:
            return False
        self.fetch([site.function])
        return not self._sites[site.function]

    def _settled(self, tie: Tie) -> bool:
        """Whether the question asked (`enough`) is settled for a place under `tie`."""
        return self._question is not None and self._question(tie)

    def _ways(self, container: str, name: str, links: int, here: Tie) -> Optional[tuple[Tie, ...]]:
        """The ways `container` runs, for a site of `name` in it; None where some is untied or none is seen."""
        if not container or container == name:
            return None
        return self.of(container, links - 1, here) or None


def _containers(site: Site) -> tuple[str, ...]:
    """The code whose being run runs `site`: a constructor's class (or the class body's), else its
    function, and the class of a method run on an instance (built before any such method runs)."""
    if site.owner and (site.function in CONSTRUCTORS or _implicit(site)):
        return (site.owner,)
    return (site.function, site.owner) if site.owner and site.bound else (site.function,)


def _implicit(site: Site) -> bool:
    """A method Python calls by syntax (`__enter__`, `__setattr__`): no place names it to call it,
    so what ties it is its class's builds alone."""
    return site.bound and site.function.startswith("__") and site.function.endswith("__")


def guarded_sites(data: bytes, names: tuple[str, ...], backends: frozenset[str],
                  predicates: Predicates = ()) -> tuple[Site, ...]:
    """Where this file names any of `names` so that it may be built, each with its guards' tie
    (`backends`: the registry's names, the only dict keys read as the backend that runs;
    `predicates`: the algorithm enum's)."""
    wanted = names_spelled(data, names)
    if not wanted:
        return ()
    return tuple(remembered("guarded-sites", data, (*wanted, *sorted(backends), predicates),
                            lambda: list(_sites(data, set(wanted), backends, dict(predicates)))))


def _sites(data: bytes, wanted: set[str], backends: frozenset[str], predicates: Mapping[str, frozenset[str]]) -> Iterator[Site]:
    for statement, offset, hits in statements_spelling(data, wanted):
        walk = _Walk(wanted, building_nothing(statement, hits, data), hits, backends, predicates, offset)
        decorated = isinstance(statement, ast.ClassDef) and bool(statement.decorator_list)
        for site in walk.sites(statement, Tie(), "", "", False):
            yield replace(site, decorated=True) if decorated and site.owner else site


@dataclass(frozen=True)
class _Walk:
    """A walk of one statement down to the places naming a wanted name, carrying the guards'
    tie; `hits` (sorted lines of the statement spelling one) prune what holds none."""

    wanted: set[str]
    quiet: set[int]
    hits: list[int]
    backends: frozenset[str]
    predicates: Mapping[str, frozenset[str]]
    # What the statement's line numbers lack: its first line in the file.
    offset: int

    def sites(self, node: ast.AST, tie: Tie, owner: str, function: str, bound: bool = False,
              holders: frozenset[str] = frozenset()) -> Iterator[Site]:
        if isinstance(node, ast.ClassDef):
            owner = owner or node.name
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not function:
            function = node.name
            bound = bool(owner) and not {_trailing(item) for item in node.decorator_list} & _UNBOUND
            holders = dispatch_names(node, self.backends)
        if isinstance(node, (ast.If, ast.IfExp)):
            yield from self.below([node.test], tie, owner, function, bound, holders)
            for part, holds in ((node.body, True), (node.orelse, False)):
                branches = part if isinstance(part, list) else [part]
                narrowed = tie.narrowed(guard_tie(node.test, holds, self.predicates, self.backends, holders))
                yield from self.below(list(branches), narrowed, owner, function, bound, holders)
            return
        if isinstance(node, ast.Dict):
            # A dict keyed by the registry's names (two at least) dispatches on the backend, each key
            # one; a dict keyed otherwise (a device, a model) says nothing of it.
            keys = [key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                    for key in node.keys]
            dispatch = len(self.backends.intersection(keys)) >= 2
            for key, name, value in zip(node.keys, keys, node.values):
                inner = tie.narrowed(Tie(backends=frozenset({name}))) if dispatch and name is not None else tie
                yield from self.below([key] if key is not None else [], tie, owner, function, bound, holders)
                yield from self.below([value], inner, owner, function, bound, holders)
            return
        site = _site(node, self.wanted, self.quiet)
        if site is not None:
            name, spelled = site
            yield Site(name, owner, function, tie, spelled, bound)
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.Call) and not owner and not function:
            handed_to = _trailing(node.func)
            for argument, handed_as in _arguments(node):
                handed = _site(argument, self.wanted, self.quiet)
                if handed_to and handed is not None and not handed[1]:
                    yield Site(handed[0], owner, function, tie, handed_to=handed_to, handed_as=handed_as)
                    children = [child for child in children if child is not argument
                                and not (isinstance(child, ast.keyword) and child.value is argument)]
        if not _exports(node):
            yield from self.below(children, tie, owner, function, bound, holders)

    def below(self, nodes: list[ast.AST], tie: Tie, owner: str, function: str, bound: bool,
              holders: frozenset[str]) -> Iterator[Site]:
        # An `assert` on the page size ties what follows it in the block: `ps = self.page_size;
        # assert ps == 256` makes every pool built after it one of whole pages.
        aliases: frozenset[str] = frozenset()
        for node in nodes:
            if may_spell(node, self.hits):
                yield from self.sites(node, tie, owner, function, bound, holders)
            if isinstance(node, ast.Assign) and is_page_size(node.value, aliases):
                aliases |= {target.id for target in node.targets if isinstance(target, ast.Name)}
            elif isinstance(node, ast.Assert):
                pages = asserted_pages(node.test, aliases)
                if pages is not None:
                    tie = tie.narrowed(Tie(pages=pages, asserted_at=(None, node.lineno + self.offset)))


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


def _arguments(call: ast.Call) -> Iterator[tuple[ast.expr, int | str]]:
    """Each argument of `call` with its position, or its keyword."""
    for position, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred):
            return
        yield argument, position
    for keyword in call.keywords:
        if keyword.arg is not None:
            yield keyword.value, keyword.arg


def _trailing(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _exports(node: ast.AST) -> bool:
    """`__all__ = [...]`: the names it spells are exported, not looked up."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    return any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets)
