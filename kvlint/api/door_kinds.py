"""What each class's definition of a write door takes, and which definitions a call can reach.

A door is a method *of a class*: two pools may define a method of one name,
one taking a write loc (it tests or unwraps it, or hands it to a door that
does) and one taking a plain tensor (it indexes a buffer with it, calls
`loc.numel()`, hands it to a kernel). A call reaches the definitions of the
classes its receiver can be: the nearest definition up the class's bases and
every override below it; where the receiver's class is unknown, every class
defining the name. `kvlint.learn.door_kinds` learns the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from kvlint.api.hierarchy import subclasses

# What a definition does with its loc.
WRITE_LOC = "write-loc"  # tests, unwraps or forwards it as a write loc: a `KVWriteLoc` is what it takes
TENSOR = "tensor"  # uses it as a tensor without testing it: a `KVWriteLoc` breaks it
MIXED = "mixed"  # forwards it to doors some of which take a write loc and some a tensor
OPEN = "open"  # abstract, always raising, or never using it: it constrains nothing


@dataclass(frozen=True)
class MarkHandOver:
    """A door call on another pool (not `self` or `super()`) handed the loc a definition was given,
    or a new one carrying that loc's mark (`KVWriteLoc(swa_loc, physical=write_loc_is_physical(loc))`)."""

    door: str
    # The `self.<attribute>`s the receiver can be; () where the code does not say.
    attributes: tuple[str, ...]
    # The class's methods whose returns named them (`self._pool_for(layer_id)`): a subclass defining
    # one again reads otherwise.
    through: tuple[str, ...] = ()


@dataclass(frozen=True)
class DoorKind:
    """One class's definition of a door name."""

    name: str
    klass: str
    takes: str
    # Whether it refuses an unmarked loc on some path: it reads the mark or reaches the tree's mark check.
    needs_mark: bool
    # Where it hands the caller's mark on to another pool: an instance whose own gate is off still
    # refuses there where such a pool does (`kvlint.analysis.mark_needs`).
    hands_mark_to: tuple[MarkHandOver, ...] = ()
    # "PATH:LINE: passes `loc` to `store_kv_index`": what a message quotes (lines leave equality).
    why: str = field(default="", compare=False)

    @property
    def takes_write_loc(self) -> bool:
        return self.takes == WRITE_LOC

    def shown(self) -> str:
        return f"`{self.klass}.{self.name}` ({self.why})"


def ancestors(klass: str, bases: Mapping[str, Sequence[str]]) -> list[str]:
    """`klass` and its bases, depth first, left to right, each once."""
    order: list[str] = []
    pending = [klass]
    while pending and len(order) < 64:
        current = pending.pop(0)
        if current in order:
            continue
        order.append(current)
        pending[0:0] = list(bases.get(current, ()))
    return order


def reachable(
    kinds: Iterable[DoorKind], bases: Mapping[str, Sequence[str]], name: str, classes: Optional[Iterable[str]]
) -> tuple[DoorKind, ...]:
    """The definitions of `name` a call on a receiver of one of `classes` can run (None: unknown
    receiver, every definition). A class the tree defines no `name` for, above or below, leaves the
    call unknown too."""
    defined = {kind.klass: kind for kind in kinds if kind.name == name}
    if classes is None:
        return tuple(defined[klass] for klass in sorted(defined))
    found: dict[str, DoorKind] = {}
    for klass in classes:
        above = next((defined[c] for c in ancestors(klass, bases) if c in defined), None)
        if above is not None:
            found[above.klass] = above
        for below in subclasses({klass}, bases) - {klass}:
            if below in defined:
                found[below] = defined[below]
    if not found:
        return tuple(defined[klass] for klass in sorted(defined))
    return tuple(found[klass] for klass in sorted(found))


def takes_of(kinds: Sequence[DoorKind]) -> str:
    """What a set of definitions takes together (`OPEN` ones constrain nothing)."""
    seen = {kind.takes for kind in kinds} - {OPEN}
    if not seen:
        return OPEN
    if len(seen) == 1:
        return next(iter(seen))
    return MIXED


def not_a_write_loc(kinds: Sequence[DoorKind]) -> Optional[DoorKind]:
    """The first definition that does not take a write loc (a tensor taker, or a mixed forwarder)."""
    return next((kind for kind in kinds if kind.takes in (TENSOR, MIXED)), None)
