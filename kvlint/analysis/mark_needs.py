"""Whether a door's definition may refuse a bare loc, by what the tree's doors check.

A pool whose own instances keep the tree's gate off lets a bare loc through its own check. A
composite may still hand the loc it was given, or a new one carrying that loc's mark
(`KVWriteLoc(swa_loc, physical=write_loc_is_physical(loc_info))`), on to a sub-pool it holds, and
a unified sub-pool refuses it there unmarked: such a definition needs the caller's mark wherever a
pool it can hand it to may refuse. Which classes those pools can exactly be is what the pool
classes' own code says (`kvlint.analysis.exact_receivers`); where it does not say, one may.
"""

from __future__ import annotations

import ast
from typing import Optional, Union

from kvlint.analysis.exact_receivers import ExactReceivers, door_runners
from kvlint.api.contract import Contract
from kvlint.api.door_kinds import MIXED, WRITE_LOC, DoorKind, ancestors
from kvlint.api.identity_memo import IdentityMemo

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def needs_mark(contract: Contract, kind: DoorKind) -> bool:
    """Where the tree's doors check the mark, a definition needs it where it reaches that check; where
    none does yet (a tree part-way through the migration), wherever it takes a write loc at all. A
    definition in a class that keeps the tree's gate off with every subclass needs it only where it
    hands the mark on to a pool that may refuse it."""
    if contract.mark_gate and kind.klass in contract.ungated_classes:
        return (kind.klass, kind.name) in mark_carriers(contract)
    return _checks(contract, kind)


def refusing_none(contract: Contract, klass: str, method: Optional[_Function], call: ast.Call,
                  door: str) -> Optional[frozenset[str]]:
    """The classes the receiver of `call` (a `door` call in `method` of `klass`) can exactly be, where
    none of them refuses a bare loc; None where one may, or where they cannot be read."""
    if not contract.class_facts or not isinstance(call.func, ast.Attribute):
        return None
    exact = ExactReceivers(contract, klass, method).of(call.func.value, call)
    return None if exact is None or exact_may_refuse(contract, door, exact) else exact


def exact_may_refuse(contract: Contract, door: str, classes: frozenset[str]) -> bool:
    """Whether the definition of `door` some class of `classes` runs may refuse a bare loc: its own
    gate on, or the mark handed on to a pool that may."""
    gate_off = set(contract.gate_off_classes) if contract.mark_gate else set()
    carriers = mark_carriers(contract)
    return any(needs_mark(contract, kind) and (klass not in gate_off or (kind.klass, kind.name) in carriers)
               for klass, kind in door_runners(contract, door, classes).items())


def mark_carriers(contract: Contract) -> frozenset[tuple[str, str]]:
    """(class, door) of each definition that hands the caller's mark on to a pool that may refuse it.
    Kept for the last few contracts asked: every door call asks."""
    return _CARRIERS.get(contract, lambda: _carriers(contract))


_CARRIERS: IdentityMemo[Contract, frozenset[tuple[str, str]]] = IdentityMemo(4)


def _checks(contract: Contract, kind: DoorKind) -> bool:
    if contract.door_checks_mark:
        return kind.needs_mark
    return kind.takes in (WRITE_LOC, MIXED)


def _carriers(contract: Contract) -> frozenset[tuple[str, str]]:
    # The least set closed under "hands the mark to a pool whose gate is on, or to a member": a
    # composite handing it only round a cycle of composites reaches no check.
    handing = [kind for kind in contract.door_kinds if kind.hands_mark_to] if contract.mark_gate else []
    gate_off = set(contract.gate_off_classes)
    found: set[tuple[str, str]] = set()
    grew = True
    while grew:
        grew = False
        for kind in handing:
            if (kind.klass, kind.name) not in found and _hands_to_refusing(contract, kind, gate_off, found):
                found.add((kind.klass, kind.name))
                grew = True
    return frozenset(found)


def _hands_to_refusing(contract: Contract, kind: DoorKind, gate_off: set[str], found: set[tuple[str, str]]) -> bool:
    exact = ExactReceivers(contract, kind.klass, None)
    instances = exact.runs_on(kind.name)
    for hand_over in kind.hands_mark_to:
        if not hand_over.attributes or instances is None:
            return True
        for instance in instances:
            if any(_defined_again(contract, instance, helper, kind.klass) for helper in hand_over.through):
                return True
            for attribute in hand_over.attributes:
                held = exact.held_by(instance, attribute)
                if held is None:
                    return True
                if any(_checks(contract, target) and (klass not in gate_off or (target.klass, target.name) in found)
                       for klass, target in door_runners(contract, hand_over.door, frozenset(held)).items()):
                    return True
    return False


def _defined_again(contract: Contract, instance: str, method: str, klass: str) -> bool:
    """Whether an instance of exactly `instance` runs a definition of `method` other than `klass`'s (the
    class facts keep only the names two classes define)."""
    facts = contract.facts_by_class
    runs = next((owner for owner in ancestors(instance, contract.door_hierarchy)
                 if owner in facts and method in facts[owner].methods), klass)
    return runs != klass
