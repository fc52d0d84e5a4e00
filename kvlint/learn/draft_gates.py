"""The speculative side of the admission: which draft classes the unified-memory gates refuse.

A refused backend's class may be built by a draft too: a multi-step draft class, or a draft
factory's entry (`{"aiter": self._create_aiter_decode_backend, ...}`, keyed by the draft's
backend). The tree gates that path as well: an allow-set of speculative algorithms
(`assert cfg.speculative_algorithm in (None, "EAGLE", ...)`), and under some of them the backends
a draft may run on (`kvlint.learn.gates_read`). A place is refused where every way the tree
builds or calls it (`kvlint.learn.ties`) runs only under algorithms the gates refuse, or under
admitted ones only for draft backends the draft allow-set under each refuses (read as the main
backend too: a draft map's key is the main backend when no draft backend is named).
"""

from __future__ import annotations

from typing import Mapping, Optional

from kvlint.api.reach import Factory
from kvlint.learn.algorithm_predicates import learn_algorithm_predicates
from kvlint.learn.gates_read import AlgorithmSet, DraftAllowSet
from kvlint.learn.scope import Scope
from kvlint.learn.guards import Tie
from kvlint.learn.ties import CONSTRUCTORS, Ties


def admitted_algorithms(algorithm_sets: list[tuple[AlgorithmSet, str]]) -> Optional[frozenset[str]]:
    """The speculative algorithms every algorithm allow-set admits; None where the tree states none."""
    if not algorithm_sets:
        return None
    return frozenset.intersection(*(frozenset(item.names) for item, _ in algorithm_sets))


def draft_backends(draft_sets: list[tuple[DraftAllowSet, str]]) -> dict[str, tuple[frozenset[str], str]]:
    """Per algorithm, the backends every draft allow-set under it admits, and where the first is."""
    drafts: dict[str, tuple[frozenset[str], str]] = {}
    for item, at in draft_sets:
        for algorithm in item.under:
            held = drafts.get(algorithm)
            drafts[algorithm] = (frozenset(item.names), at) if held is None else (held[0] & frozenset(item.names), held[1])
    return drafts


# A draft class is built a few links below the worker its algorithm picks: the factory's entry, the
# factory, the draft worker, the worker, and a helper between any two of them.
_DRAFT_LINKS = 6


class DraftGates:
    """What the gates admit of speculation under unified memory: the algorithms, and under some of
    them the backends a draft may run on; and the ties of the places building or calling a name."""

    def __init__(self, scope: Scope, factories: list[Factory], bases: Mapping[str, set[str]], backends: set[str],
                 algorithms: frozenset[str], algorithms_at: str, drafts: Mapping[str, tuple[frozenset[str], str]]) -> None:
        self._backends = backends
        self._algorithms = algorithms
        self._algorithms_at = algorithms_at
        self._drafts = drafts
        predicates = learn_algorithm_predicates(scope, algorithms)
        # A way already refused stays refused however the code above it narrows it: not resolved further.
        self._ties = Ties(scope, {factory.function: factory.name for factory in factories}, bases, predicates,
                          enough=self._refused, links=_DRAFT_LINKS)

    def refusal(self, place: str) -> Optional[str]:
        """Why the gates refuse every way the tree builds or calls `place` (and its subclasses); None
        where some way is untied, or tied to what the gates admit."""
        ties = self._ways(place)
        if not ties or not all(self._refused(tie) for tie in ties):
            return None
        drafted = sorted({backend for tie in ties for backend in tie.backends or ()})
        algorithms = sorted({algorithm for tie in ties for algorithm in tie.algorithms or ()} & self._algorithms)
        gated = sorted({self._drafts[algorithm][1] for algorithm in algorithms})
        ran = sorted({algorithm for tie in ties for algorithm in tie.algorithms or ()})
        admits = ", ".join("no speculation" if name == "None" else name for name in sorted(self._algorithms))
        why = (f"`{place}` runs only for the speculative algorithms {', '.join(ran)}"
               f" (the unified-memory gates admit {admits}, {self._algorithms_at})")
        if algorithms:
            why += (f", and only for a draft on {', '.join(f'`{name}`' for name in drafted)}, which the draft allow-set "
                    f"{', '.join(gated)} refuses under {', '.join(algorithms)}")
        return why

    def _ways(self, place: str) -> Optional[tuple[Tie, ...]]:
        """The ways `place` runs: a class or function by the places naming it; a method by those
        calling it, else by its class's builds (it runs on an instance); a constructor by its class's.
        Only where a draft dispatch (a place tied to backends) lies within two links: a gate refuses
        a draft by its backend, and resolving every way of the rest reads the runners and servers
        above them whole, to end untied."""
        klass, _, method = place.rpartition(".")
        if not klass:
            return self._ties.of(place) if self._ties.dispatched(place, 2) else None
        called = self._ties.of(method) if method not in CONSTRUCTORS and self._ties.dispatched(method, 2) else None
        return called or (self._ties.of(klass) if self._ties.dispatched(klass, 2) else None)

    def _refused(self, tie: Tie) -> bool:
        """Whether no admitted configuration runs a place under `tie`: every algorithm it runs under
        is refused, or under each admitted one a draft allow-set refuses its backends (as the main
        backend too: a draft map's key is the main backend when no draft backend is named)."""
        if tie.algorithms is None:
            return False
        admitted = tie.algorithms & self._algorithms
        if not admitted:
            return True
        if tie.backends is None:
            return False
        for algorithm in admitted:
            draft = self._drafts.get(algorithm)
            if draft is None or tie.backends & (draft[0] | self._backends):
                return False
        return True
