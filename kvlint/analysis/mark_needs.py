"""Whether a door's definition may refuse a bare loc, by what the tree's doors check."""

from __future__ import annotations

from kvlint.api.contract import Contract
from kvlint.api.door_kinds import MIXED, WRITE_LOC, DoorKind


def needs_mark(contract: Contract, kind: DoorKind) -> bool:
    """Where the tree's doors check the mark, a definition needs it where it reaches that check; where
    none does yet (a tree part-way through the migration), wherever it takes a write loc at all. A
    definition in a class that keeps the tree's gate off with every subclass needs it nowhere: it only
    ever runs with the gate off, where the check lets a bare loc through."""
    if contract.mark_gate and kind.klass in contract.ungated_classes:
        return False
    if contract.door_checks_mark:
        return kind.needs_mark
    return kind.takes in (WRITE_LOC, MIXED)
