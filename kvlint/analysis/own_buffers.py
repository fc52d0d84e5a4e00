"""Pools whose buffers are their own, never views of the unified buffer.

In a tree that has moved to the unified pool, a pool whose doors refuse an unmarked loc (its
`mark-gate` on) is a unified pool, and its per-layer buffers are token-major views of the one
buffer every layer shares. A pool whose own instances keep the gate off (`gate-off-classes`)
allocates its buffers itself, or hands the question to pools it holds (`kvlint.learn.accessor_reads`):
MiniMax's sparse pool reads `get_kv_buffer` from `self._pool_for(layer_id)`, the dense or main pool
it builds by size from a class it was handed, and a class built by size is never a unified pool,
whose constructor takes the unified buffer instead (`kvlint.analysis.exact_receivers`). Such a pool's
buffer is contiguous per layer: no layout rule concerns it.

A value typed as a class (an annotation, an `isinstance` assert) may be any subclass too: it holds
own buffers only when every subclass does. A tree with no mark gate has not moved yet: every pool
it has may become token-major, and none counts.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kvlint.analysis.exact_receivers import ExactReceivers
from kvlint.api.contract import Contract
from kvlint.api.door_kinds import ancestors
from kvlint.api.hierarchy import subclasses


class OwnBuffers:
    """Which pool classes hand out only buffers of their own, for one contract."""

    def __init__(self, contract: Contract) -> None:
        self.contract = contract
        self.facts = contract.facts_by_class
        self.pools = frozenset(contract.pool_classes)
        self.accessors = frozenset(contract.buffer_accessors)
        self.receivers = ExactReceivers(contract, "", None)
        gate_off = frozenset(contract.gate_off_classes) if contract.mark_gate else frozenset()
        # The largest set every member of which hands over only to members: a pool holding a pool of
        # its own kind (a composite built from a class it was handed) brings in no other buffer.
        own = {klass for klass in gate_off if klass in self.facts}
        while True:
            kept = {klass for klass in own if self._hands_over_within(klass, own)}
            if kept == own:
                break
            own = kept
        self.own = frozenset(own)

    def of(self, classes: Iterable[tuple[str, bool]]) -> bool:
        """Whether a value of `classes` (each a name and whether exactly it) holds only own buffers."""
        named = list(classes)
        hierarchy, children = self.contract.door_hierarchy, self.contract.door_children
        return bool(named) and all(
            name in self.own if exact else subclasses({name}, hierarchy, children) <= self.own for name, exact in named
        )

    def _hands_over_within(self, klass: str, own: set[str]) -> bool:
        order = ancestors(klass, self.contract.door_hierarchy)
        return all(self._runs_within(klass, order, 0, accessor, own, frozenset()) is not False for accessor in self.accessors)

    def _runs_within(self, klass: str, order: list[str], start: int, method: str, own: set[str],
                     running: frozenset[tuple[int, str]]) -> Optional[bool]:
        """Whether `method`, as an instance of exactly `klass` runs it (the first definition in `order`
        from `start`), hands over only to pools of `own`: those its attributes hold, and those the
        methods it uses and the definitions it extends hand over to. None where no class of the tree
        on that way defines it (an accessor: an attribute of its own, or a call that fails)."""
        for position in range(start, len(order)):
            facts = self.facts.get(order[position])
            read = next((read for read in facts.accessors if read.name == method), None) if facts else None
            if read is None:
                continue
            if read.unknown:
                return False
            if (position, method) in running:
                return True  # a method using itself again hands over nothing new
            running = running | {(position, method)}
            # The pools were named by this class's own methods: one defined again below reads otherwise.
            if any(self._definer(order, helper) != position for helper in read.through):
                return False
            for attribute in read.pools:
                held = self.receivers.held_by(klass, attribute)
                if held is None or not all(pool in own for pool in held if self._is_pool(pool)):
                    return False
            # A method of its own whose result it uses, undefined in the tree: a base kvlint cannot read.
            return all(self._runs_within(klass, order, 0, helper, own, running) for helper in read.helpers) and all(
                self._runs_within(klass, order, position + 1, name, own, running) is not False for name in read.inherited)
        return None

    def _definer(self, order: list[str], method: str) -> Optional[int]:
        """Where in `order` the first class with a read of `method` is."""
        return next((position for position, owner in enumerate(order) if owner in self.facts
                     and any(read.name == method for read in self.facts[owner].accessors)), None)

    def _is_pool(self, klass: str) -> bool:
        """A class some accessor call could reach: a pool class, or one defining an accessor."""
        if klass in self.pools:
            return True
        return any(read.name in self.accessors for owner in ancestors(klass, self.contract.door_hierarchy)
                   for read in (self.facts[owner].accessors if owner in self.facts else ()))
