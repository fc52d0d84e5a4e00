"""Reach: whether the engine can run a finding's code on the unified pool today.

`Admission` is what learning read of the tree's gates (`kvlint.learn.admission`): the backend
names an allow-set admits under the unified-memory flag, the registry's factories and the
classes each returns, the other refusals the tree states, and a verdict for each class it could
tie to them. `kvlint.running.reach` reads it to give every finding its reach after checking, so
the result cache (keyed without the admission) stays valid when only a gate moves.

A verdict is `latent` only where a gate the tree states refuses every path to the code; its
reason names that gate's file:line. Where kvlint cannot tell, `unknown`: a wrong `latent` would
hide a live bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

LIVE = "live"
LATENT = "latent"
UNKNOWN = "unknown"

# `--reach` / `reach =`: which findings a run reports and fails on.
REACH_SCOPES = ("all", "live", "live-only")


def reported(reach: str, scope: str) -> bool:
    """Whether a finding of `reach` is reported under `--reach scope`."""
    if scope == "live":
        return reach != LATENT
    if scope == "live-only":
        return reach == LIVE
    return True


@dataclass(frozen=True)
class Verdict:
    reach: str
    reason: str
    # For a class live as the base of live classes: its methods each of them overrides, with
    # those classes named. Such a method never runs there, so the base's verdict is not its.
    overridden: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Factory:
    """A registry entry: the backend name, its factory function and where, and the classes it
    returns on any branch (`opaque`: some branch returns what kvlint cannot name)."""

    name: str
    function: str
    where: str
    classes: tuple[str, ...]
    opaque: bool = False


@dataclass(frozen=True)
class Admission:
    """The admission learned from a tree; empty where it states none."""

    # The backend names every allow-set gate admits, and where each gate is ("PATH:LINE").
    admitted: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    # Why no allow-set could be read (a computed set, a conditional gate): then no backend is latent.
    unreadable: str = ""
    registry: tuple[Factory, ...] = ()
    # Other refusals under the flag: (flag refused, "PATH:LINE").
    refusals: tuple[tuple[str, str], ...] = ()
    # The speculative algorithms admitted ("None": no speculation) and where; and per algorithm,
    # the backends a draft may run on under it and where: (algorithm, backends, "PATH:LINE").
    algorithms: tuple[str, ...] = ()
    algorithms_at: str = ""
    drafts: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # A verdict per class kvlint tied to the registry or the pool gate.
    classes: tuple[tuple[str, Verdict], ...] = ()
    # The tree defines no write mark and no door checks one: it has not moved to the unified pool.
    unmigrated: bool = False

    def no_gate(self) -> str:
        """Why every finding's reach is unknown, where the tree states no gate."""
        if self.unmigrated:
            return ("the tree has no write mark and no door that checks one: it has not moved to the unified "
                    "pool, so no finding runs on one today; each is a change that move needs")
        return "the tree states no unified-memory gate"

    def class_verdict(self, name: str) -> Optional[Verdict]:
        return dict(self.classes).get(name)

    def refusal(self, flag: str) -> Optional[str]:
        """Where the tree refuses `flag` under unified memory, or None."""
        return dict(self.refusals).get(flag)
