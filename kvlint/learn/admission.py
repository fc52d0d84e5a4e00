"""Learn which code the engine can run on the unified pool today: the admission.

Read from what the tree states, never guessed:

- the gates under the unified-memory flag (`kvlint.learn.gates_read`): the allow-sets of resolved
  backend names (`assert backends <= allowed_full`), and other refusals (`assert not
  cfg.enable_two_batch_overlap`);
- the backend registry (`kvlint.learn.registry_read`): each `@register("name")` factory and the
  classes it returns on every branch;
- the speculative algorithms admitted, and the backends a draft may run on under some of them
  (`assert draft_backends <= ...` under `if cfg.speculative_algorithm in ("EAGLE", ...)`);
- the class hierarchy (`kvlint.learn.tree.class_bases`) and the pool gate (`kvlint.learn.gate`):
  a pool whose doors refuse an unmarked loc is a unified pool.

A class is `live` when an admitted factory returns it (a hardware-specific subclass on one branch
included), when it is a base of such a class (its methods run there), or when it is a unified pool
or a base of one. It is `latent` only when a factory the allow-set refuses builds it, and nothing
else can: every place naming it as a value lies in a refused factory or in another latent class,
no string spells it (a class looked up by name), no import renames it, and every subclass of it is
latent too; its reason names the allow-set's file:line. A place naming it counts as refused code
too where every way the tree builds or calls that place is tied (`kvlint.learn.ties`) to draft
backends the gates refuse under every admitted algorithm it runs under, or to no admitted algorithm
at all: a multi-step draft class built only from a draft factory's `"aiter"` entry, by workers
built only for EAGLE, where a draft must run on the draft allow-set. Every other class is
`unknown`, and so is every backend while some allow-set cannot be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

from kvlint.api.reach import LATENT, LIVE, UNKNOWN, Admission, Factory, Verdict
from kvlint.learn.gate import class_settings
from kvlint.learn.draft_gates import DraftGates, admitted_algorithms, draft_backends
from kvlint.learn.ties import CONSTRUCTORS
from kvlint.learn.gates_read import UNIFIED_FLAG, AlgorithmSet, AllowSet, DraftAllowSet, Refusal, unified_gates
from kvlint.learn.name_sources import OtherClasses, definers, registry_classes
from kvlint.learn.registry_read import FactoryRead, Reference, references, registry_factories
from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned, class_bases, class_methods
from kvlint.api.hierarchy import children_of, subclasses


def learn_admission(scope: Scope, learned: Learned, unmigrated: bool = False) -> None:
    """The tree's unified-memory gates and what they admit; `unmigrated`: the tree has no write mark
    and no door checking one, which the admission says where it states no gate."""
    where: Callable[[Path, int], str] = lambda path, line: f"{scope.shown(path)}:{line}"
    refusals: dict[str, str] = {}
    allow_sets: list[tuple[AllowSet, str]] = []
    algorithm_sets: list[tuple[AlgorithmSet, str]] = []
    draft_sets: list[tuple[DraftAllowSet, str]] = []
    for path, stated in scope.survey(unified_gates, UNIFIED_FLAG).items():
        for item in stated:
            if isinstance(item, Refusal):
                refusals.setdefault(item.flag, where(path, item.line))
            elif isinstance(item, AllowSet):
                allow_sets.append((item, where(path, item.line)))
            elif isinstance(item, AlgorithmSet):
                algorithm_sets.append((item, where(path, item.line)))
            else:
                draft_sets.append((item, where(path, item.line)))
            learned.pin(path, item.line)
    if not (allow_sets or refusals):
        if unmigrated:
            learned.values["admission"] = Admission(unmigrated=True)
            learned.sources["admission"] = "learned: no write mark, no door checking one, no unified-memory gate"
        return
    unreadable = "; ".join(f"{at}: {item.why}" for item, at in allow_sets if item.names is None)
    readable = [set(item.names) for item, _ in allow_sets if item.names is not None]
    admitted = set.intersection(*readable) if readable else set()
    named = set().union(*readable) if readable else set()
    factories = _factories(scope, learned, named, where)
    bases = class_bases(scope)
    verdicts = _pool_verdicts(scope, learned, bases)
    algorithms = admitted_algorithms(algorithm_sets)
    algorithms_at = algorithm_sets[0][1] if algorithm_sets else ""
    drafts = draft_backends(draft_sets)
    if readable and not unreadable:
        gate = allow_sets[0][1]
        speculation = None if algorithms is None else DraftGates(
            scope, factories, bases, admitted, algorithms, algorithms_at, drafts)
        verdicts.update(_backend_verdicts(scope, factories, admitted, bases, gate, where, speculation))
    verdicts.update(_named_twice(scope, verdicts))
    learned.values["admission"] = Admission(
        admitted=tuple(sorted(admitted)),
        gates=tuple(at for _, at in allow_sets),
        unreadable=unreadable,
        registry=tuple(factories),
        refusals=tuple(sorted(refusals.items())),
        classes=tuple(sorted(verdicts.items())),
        algorithms=tuple(sorted(algorithms or ())),
        algorithms_at=algorithms_at,
        drafts=tuple((algorithm, tuple(sorted(names)), at) for algorithm, (names, at) in sorted(drafts.items())),
    )
    learned.sources["admission"] = f"learned: {len(allow_sets)} allow-sets, {len(refusals)} refusals, {len(factories)} factories"


def _factories(scope: Scope, learned: Learned, named: set[str], where: Callable[[Path, int], str]) -> list[Factory]:
    """The registry whose names the allow-sets name most (a LoRA registry may share a name or two)."""
    best: tuple[int, Path, tuple[FactoryRead, ...]] | None = None
    for path, reads in scope.survey(registry_factories).items():
        overlap = len(named & {read.name for read in reads})
        if overlap and (best is None or overlap > best[0]):
            best = (overlap, path, reads)
    if best is None:
        return []
    _, path, reads = best
    for read in reads:
        learned.pin(path, read.line)
    return [Factory(read.name, read.function, where(path, read.line), read.returned, read.opaque) for read in reads]


def _classes_of(factory: Factory, by_function: Mapping[str, Factory], bases: Mapping[str, set[str]],
                seen: frozenset[str] = frozenset()) -> set[str]:
    """The tree's classes a factory returns, through the factories it returns a call of."""
    found: set[str] = set()
    for name in factory.classes:
        if name in by_function and name not in seen:
            found |= _classes_of(by_function[name], by_function, bases, seen | {factory.function})
        elif name in bases:
            found.add(name)
    return found


def _ancestors(names: Iterable[str], bases: Mapping[str, set[str]]) -> dict[str, str]:
    """Each ancestor of `names` in the tree, with the class it is an ancestor of."""
    found: dict[str, str] = {}
    for name in names:
        pending = list(bases.get(name, ()))
        while pending:
            base = pending.pop()
            if base not in found and base != name:
                found[base] = name
                pending.extend(bases.get(base, ()))
    return found


def _pool_verdicts(scope: Scope, learned: Learned, bases: Mapping[str, set[str]]) -> dict[str, Verdict]:
    """Unified pools (the mark gate on) and their bases: the admitted path writes through them."""
    gate = str(learned.values.get("mark-gate", ""))
    if not gate:
        return {}
    on: set[str] = set()
    off: set[str] = set()
    for answer in scope.survey(class_settings, gate).values():
        if isinstance(answer, str):
            return {}
        for klass, value in answer:
            (on if value else off).add(klass)
    gated = {name for name in subclasses(on, bases) if name not in off or name in on}
    source = learned.sources.get("mark-gate", "")
    verdicts = {name: Verdict(LIVE, f"a unified pool: `{gate}` is on ({source})") for name in sorted(gated)}
    verdicts.update(_base_verdicts(scope, verdicts, bases, lambda pool: f"a base of the unified pool {pool}"))
    return verdicts


def _backend_verdicts(scope: Scope, factories: list[Factory], admitted: set[str], bases: Mapping[str, set[str]],
                      gate: str, where: Callable[[Path, int], str], drafts: Optional[DraftGates]) -> dict[str, Verdict]:
    by_function = {factory.function: factory for factory in factories}
    verdicts: dict[str, Verdict] = {}
    reached: set[str] = set()
    for factory in factories:
        if factory.name in admitted:
            reached |= _delegates(factory, by_function)
            for klass in sorted(_classes_of(factory, by_function, bases)):
                verdicts.setdefault(klass, Verdict(LIVE, f"built by the admitted backend `{factory.name}` "
                                                         f"({factory.function}, {factory.where}; allow-set {gate})"))
    for base, verdict in _base_verdicts(scope, verdicts, bases, lambda klass: f"a base of {klass}, built by an admitted backend").items():
        verdicts.setdefault(base, verdict)
    refused = {factory.function: factory for factory in factories
               if factory.name not in admitted and factory.function not in reached}
    candidates: dict[str, Factory] = {}
    for factory in refused.values():
        for klass in sorted(_classes_of(factory, by_function, bases)):
            candidates.setdefault(klass, factory)
    # The places a candidate would escape through, each asked once whether the draft gates refuse
    # every way to it (then it is refused code too), and why.
    asked: dict[str, Optional[str]] = {}

    def refused_place(place: str) -> bool:
        if drafts is None or not place:
            return False
        if place not in asked:
            asked[place] = drafts.refusal(place)
        return asked[place] is not None

    # Where the tree defines a candidate's name twice, the registry's class is the one asked about.
    others = OtherClasses(scope, registry_classes(scope, by_function, candidates))
    latent, escapes, refs = _latent(scope, set(candidates), set(refused), verdicts, bases, where, refused_place, others)
    proven = {place: why for place, why in asked.items() if why is not None}
    for klass, (place, escape) in sorted(escapes.items()):
        refusing = candidates.get(klass)
        if refusing is not None and klass not in verdicts:
            # Built by a refused backend, yet reachable another way: not latent, and the reason says which way;
            # through a refused factory that escapes itself, that factory's way too.
            further = escapes.get(place, ("", ""))[1] if place in refused else ""
            via = f", itself {further}" if further else ""
            verdicts[klass] = Verdict(UNKNOWN, f"built by the refused backend `{refusing.name}` ({refusing.where}), "
                                               f"but also {escape}{via}, which no unified-memory gate refuses")
    for klass in sorted(latent - set(refused)):
        refusing = candidates.get(klass)
        if refusing is not None:
            why = f"backend `{refusing.name}` ({refusing.function}, {refusing.where}) is not in the unified-memory allow-set {gate}"
        else:
            why = f"a subclass built only by refused backends; the unified-memory allow-set {gate} refuses them"
        drafting = sorted({_at(ref) for _path, ref in refs.get(klass, []) if _at(ref) in proven})
        if drafting:
            why += f"; also built by {', '.join(f'`{place}`' for place in drafting)}, which the draft gates refuse"
        verdicts[klass] = Verdict(LATENT, why)
    for place, why in sorted(proven.items()):
        # A refused constructor refuses its class: no method of it runs before one is built.
        klass, _, method = place.rpartition(".")
        if not klass or method in CONSTRUCTORS:
            verdicts.setdefault(klass or place, Verdict(LATENT, why))
    return verdicts


def _at(ref: Reference) -> str:
    """The place holding a reference: its top-level definition, or `Class.method`."""
    return f"{ref.place}.{ref.method}" if ref.method else ref.place


def _base_verdicts(scope: Scope, live: Mapping[str, Verdict], bases: Mapping[str, set[str]],
                   reason: Callable[[str], str]) -> dict[str, Verdict]:
    """A live verdict for each base of the `live` classes (not themselves live), naming the methods
    of it that every live class below it overrides: those never run there."""
    below = _ancestors(sorted(live), bases)
    wanted = tuple(sorted(set(below) | set(live)))
    methods: dict[str, frozenset[str]] = {}
    for answer in scope.survey(class_methods, wanted).values():
        for klass, defined in answer:
            # A name defined twice keeps only what both define: an override is claimed only where sure.
            methods[klass] = methods[klass] & defined if klass in methods else defined
    verdicts = {}
    for base, first in below.items():
        if base in live:
            continue
        under = sorted(name for name in live if base in _ancestors([name], bases))
        overridden = []
        for method in sorted(methods.get(base, ())):
            if not any(_inherits(name, base, method, methods, bases) for name in under):
                shown = ", ".join(under[:3]) + (f" and {len(under) - 3} more" if len(under) > 3 else "")
                overridden.append((method, shown))
        verdicts[base] = Verdict(LIVE, reason(first), tuple(overridden))
    return verdicts


def _inherits(klass: str, base: str, method: str, methods: Mapping[str, frozenset[str]],
              bases: Mapping[str, set[str]]) -> bool:
    """Whether some line of bases leads from `klass` up to `base` through no class defining `method`."""
    pending, seen = [klass], set()
    while pending:
        current = pending.pop()
        if current == base:
            return True
        if current in seen or method in methods.get(current, ()):
            continue
        seen.add(current)
        pending.extend(bases.get(current, ()))
    return False


def _named_twice(scope: Scope, verdicts: Mapping[str, Verdict]) -> dict[str, Verdict]:
    """A finding's reach goes by the name of its class: where the tree defines two classes of a latent
    one's name, the other may run today, and neither is claimed latent."""
    latent = [name for name, verdict in verdicts.items() if verdict.reach == LATENT]
    return {name: Verdict(UNKNOWN, f"the tree defines two classes `{name}` "
                                   f"({', '.join(scope.shown(path) for path in sorted(files))}); "
                                   f"the registry's is latent ({verdicts[name].reason})")
            for name, files in definers(scope, latent).items() if len(files) > 1}


def _delegates(factory: Factory, by_function: Mapping[str, Factory]) -> set[str]:
    found, pending = {factory.function}, [factory]
    while pending:
        for name in pending.pop().classes:
            if name in by_function and name not in found:
                found.add(name)
                pending.append(by_function[name])
    return found


def _latent(scope: Scope, candidates: set[str], refused: set[str], live: Mapping[str, Verdict],
            bases: Mapping[str, set[str]], where: Callable[[Path, int], str], refused_place: Callable[[str], bool],
            others: OtherClasses) -> tuple[set[str], dict[str, tuple[str, str]], dict[str, list[tuple[Path, Reference]]]]:
    """The candidates (and refused factories) nothing but refused code can build: a fixed point
    from all of them, dropping any that some other place names, until none is dropped; and, for
    each one dropped, the place it escapes through and how. A place `refused_place` answers for
    is refused code too (the draft gates refuse every way to it). With the references read, by name."""
    children = children_of(bases)
    classes = subclasses(candidates, bases, children) - set(live)
    names = tuple(sorted(classes | refused))
    refs: dict[str, list[tuple[Path, Reference]]] = {}
    for path, answer in scope.survey(references, names).items():
        for ref in answer:
            if not others.names_another(ref.name, path):
                refs.setdefault(ref.name, []).append((path, ref))
    latent = set(names)
    escapes: dict[str, tuple[str, str]] = {}
    changed = True
    while changed:
        changed = False
        for name in sorted(latent):
            escape = _escape(name, refs.get(name, []), latent, refused_place, name in classes, children, where)
            if escape is not None:
                latent.discard(name)
                escapes[name] = escape
                changed = True
    return latent, escapes, refs


def _escape(name: str, refs: list[tuple[Path, Reference]], latent: set[str], refused_place: Callable[[str], bool],
            is_class: bool, children: Mapping[str, set[str]], where: Callable[[Path, int], str]) -> Optional[tuple[str, str]]:
    """How `name` escapes the refused code, and through which place ("" where none names it): a
    place outside it naming it, a subclass that is not latent, or no refused place building it;
    None where only refused code can build it."""
    for path, ref in refs:
        at = _at(ref)
        if ref.kind != "value" or (ref.place not in latent and ref.place != name and not refused_place(at)):
            spelled = {"string": "spelled in a string", "alias": "imported under another name"}.get(ref.kind, "named")
            return at if ref.kind == "value" else "", f"{spelled} at {where(path, ref.line)} (in {at or 'module level'})"
    if not is_class:
        return None
    others = sorted(subclasses({name}, {}, children) - latent - {name})
    if others:
        return "", f"the base of `{others[0]}`, which is not refused"
    if not any((ref.place in latent or refused_place(_at(ref))) and ref.place != name for _path, ref in refs):
        return "", "built by no refused code kvlint can see"
    return None
