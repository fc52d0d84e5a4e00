"""Which page-split pools a class can never meet, by the guards the tree builds each under.

A page-split pool's buffers hold pages in dim 0, where the paged-view helpers assume slots, so
a view of a buffer whose pool kvlint cannot type stays unsafe to rewrite while the tree has such a
pool. But the tree says where it builds one, under which guards (`kvlint.learn.ties`: compared
backend names, registry factories and their dispatch dicts, platform predicates). A backend
class never meets a page-split pool when every place building it (or a subclass of it) and every
place building the pool are tied apart: to disjoint backends or to different platforms. The musa
FlashAttention backend (fa3, on `_is_musa`) and the NPU pools (built for `ascend`, or on
`_is_npu`) are: `page-split-apart` lists such pairs for the layout rules.

The other way round, a backend class meets *only* page-split pools when it can meet one and every
place building any other device pool is tied apart from it: a fork building its NPU pools under
`if attention_backend == "ascend":` and every other pool in the `elif`/`else` branches (tied to
every other backend name) gives its Ascend backend nothing else. `page-split-only` lists such
classes: a buffer of a pool they cannot type holds pages in dim 0.

Where the other pools it can meet are all built past an `assert` on the page size allowing only
sizes above 1 (a branch for one model family, `assert page_size == 256`, before the backend's own
branch), its views of a buffer that is not page-split run on whole pages: it is
`page-pinned-classes` (`kvlint.learn.page_pins` adds the classes the engine's argument handling
pins).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from kvlint.api.contract import Contract
from kvlint.api.hierarchy import subclasses
from kvlint.api.reach import Admission
from kvlint.learn.registry_read import dispatch_factories, registry_factories
from kvlint.learn.scope import Scope
from kvlint.learn.guards import Tie
from kvlint.learn.name_sources import registry_classes
from kvlint.learn.ties import Ties
from kvlint.learn.tree import Learned, class_bases


def learn_pool_pairing(contract: Contract, scope: Scope, learned: Learned) -> None:
    """`page-split-apart`, for the page-split pools learned or configured."""
    split = learned.values.get("page-split-pools", contract.page_split_pools)
    if not isinstance(split, tuple) or not split:
        return
    registry = backend_registry(scope, learned, lambda: _compared(scope, split))
    if not registry:
        return
    consumers, ties = registry_consumers(scope, registry)
    ties.fetch([*split, *consumers])
    pools = {pool: ties.of(pool) or None for pool in split}
    if all(tie is None for tie in pools.values()):
        return
    apart: list[tuple[str, tuple[str, ...]]] = []
    only: list[str] = []
    pinned: list[tuple[str, str]] = []
    others: Optional[list[Tie]] = None
    for klass in consumers:
        # Its ways include its subclasses' builds: its code runs on their instances.
        consumer = ties.of(klass)
        if not consumer:
            continue
        never = tuple(pool for pool, tied in pools.items() if tied is not None and all(
            mine.apart(theirs) for mine in consumer for theirs in tied))
        if never:
            apart.append((klass, never))
        if len(never) < len(split):
            # Read once, and only where a backend meets a page-split pool.
            others = _other_builds(_other_pools(contract, learned, split), ties) if others is None else others
            met = [theirs for theirs in others if not all(mine.apart(theirs) for mine in consumer)]
            if others and not met:
                only.append(klass)
            elif met and all(theirs.whole_pages for theirs in met):
                pinned.append((klass, _asserted(met, scope, learned)))
    if apart:
        learned.values["page-split-apart"] = tuple(apart)
        learned.sources["page-split-apart"] = "learned: the guards each backend class and page-split pool is built under"
    if only:
        learned.values["page-split-only"] = tuple(only)
        learned.sources["page-split-only"] = (
            "learned: backend classes every pool they can meet allocates page-split buffers, by the guards each is built under"
        )
    if pinned:
        learned.values["page-pinned-classes"] = tuple(pinned)
        learned.sources["page-pinned-classes"] = (
            "learned: backend classes that meet pools other than page-split ones only at a page size the tree asserts"
        )


def _asserted(met: list[Tie], scope: Scope, learned: Learned) -> str:
    """Why a backend meeting the ties `met` runs on whole pages: the sizes the asserts allow, and
    where each assert is (pinned: an edit moving one is learned again)."""
    places: set[tuple[Path, int]] = set()
    for tie in met:
        if tie.asserted_at is not None and tie.asserted_at[0] is not None:
            places.add((tie.asserted_at[0], tie.asserted_at[1]))
    for path, line in places:
        learned.pin(path, line)
    sizes = "/".join(map(str, sorted({size for tie in met for size in tie.pages or ()})))
    where = ", ".join(f"{scope.shown(path)}:{line}" for path, line in sorted(places))
    return (f"every pool it can meet but page-split ones is built past an `assert` on the page size ({sizes}"
            + (f" at {where})" if where else ")"))


def _other_pools(contract: Contract, learned: Learned, split: tuple[str, ...]) -> tuple[str, ...]:
    """The pool classes that do not allocate page-split buffers (host caches are no device pool)."""
    pools = learned.values.get("pool-classes", contract.pool_classes)
    hosts = learned.values.get("host-cache-classes", contract.host_cache_classes)
    if not isinstance(pools, tuple) or not isinstance(hosts, tuple):
        return ()
    return tuple(sorted(set(pools) - set(split) - set(hosts)))


def _other_builds(others: tuple[str, ...], ties: Ties) -> list[Tie]:
    """Every way a pool of `others` (exactly that class) is built; [] where one is built untied, or
    looked up by a string: it can then be met anywhere, and no backend meets page-split pools only
    (nor only at a page size asserted)."""
    found: list[Tie] = []
    for pool in others:
        built = ties.built(pool)
        if built is None:
            return []
        found.extend(built)
    return found


def backend_registry(
    scope: Scope, learned: Learned, compared: Callable[[], set[str]]
) -> list[tuple[str, str, tuple[str, ...]]]:
    """The backend registry as (name, factory, classes returned): the admission's, else the one
    sharing most names with those the question at hand compares (`compared`, asked only then),
    a decorated registry before a dispatching `if`/`elif` chain."""
    admission = learned.values.get("admission")
    if isinstance(admission, Admission) and admission.registry:
        return [(factory.name, factory.function, factory.classes) for factory in admission.registry]
    named = compared()
    best: list[tuple[str, str, tuple[str, ...]]] = []
    overlap = 0
    for reader in (registry_factories, dispatch_factories):
        for reads in scope.survey(reader).values():
            shared = len(named & {read.name for read in reads})
            if shared > overlap:
                overlap, best = shared, [(read.name, read.function, read.returned) for read in reads]
        if best:
            return best
    return best


def registry_consumers(scope: Scope, registry: list[tuple[str, str, tuple[str, ...]]]) -> tuple[list[str], Ties]:
    """The classes the registry's factories build, with their subclasses, and the ties of the
    places building them, read against that registry (nothing fetched yet)."""
    bases = class_bases(scope)
    built = {name for _, _, classes in registry for name in classes}
    # What a factory returns may be another factory: only classes are consumers.
    consumers = sorted(subclasses(built, bases) - {function for _, function, _ in registry})
    names: dict[str, set[str]] = {}
    for name, function, _ in registry:
        names.setdefault(function, set()).add(name)
    # A function dispatching on several names is tied by its own guards, not as one name's factory.
    factories = {function: next(iter(held)) for function, held in names.items() if len(held) == 1}
    return consumers, Ties(scope, factories, bases, names=frozenset(name for name, _, _ in registry),
                           asked=registry_classes(scope, names, consumers))


def _compared(scope: Scope, split: tuple[str, ...]) -> set[str]:
    """The backend names the page-split pools' guards compare the attention backend with."""
    unnamed = Ties(scope, {}, class_bases(scope))
    return {backend for pool in split for backend in unnamed.backends_compared(pool)}
