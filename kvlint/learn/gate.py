"""Learn which pools take a bare loc by design: the gate on the tree's mark check.

A tree part-way through the migration keeps both kinds of pool: the unified
ones, whose doors refuse an unmarked loc, and the older ones, whose doors take
a bare one. The tree says which in one place, its mark check:

    if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
        raise ValueError(...)

`mark-gate` is that attribute (found as `if self.<attr> and not <mark
predicate>(`); each pool class sets it in its body (`requires_physical_write_loc
= True`) or inherits it. `ungated-classes` are the classes whose gate is off,
for the class and every subclass in the tree: a door called on `self` or
`super()` inside one of them may be handed a bare loc (a hi-sparse pool
translating ids for its base pool). Anything that could turn the gate on
elsewhere (an assignment that is not a literal in a class body, `setattr`)
leaves no class ungated: a wrong exemption would hide a raw loc from `--prove`.
"""

from __future__ import annotations

import re
from typing import Optional, Union

from kvlint.api.contract import Contract
from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned, class_bases
from kvlint.api.hierarchy import subclasses

# What a file says of the gate when something besides a class body's literal assigns it.
_ASSIGNED_ELSEWHERE = "assigned elsewhere"


def learn_mark_gate(contract: Contract, learned: Learned, scope: Scope) -> None:
    predicate = str(learned.values.get("mark-predicate", "") or contract.mark_predicate)
    if not predicate:
        return
    found = scope.first(gate_checked, predicate)
    if found is None:
        return
    path, (gate, line) = found
    learned.set("mark-gate", gate, path, line)
    settings: dict[str, set[bool]] = {}
    for answer in scope.survey(class_settings, gate).values():
        if answer == _ASSIGNED_ELSEWHERE:
            return
        for klass, value in answer:
            settings.setdefault(klass, set()).add(value)
    bases = class_bases(scope)
    ungated = _ungated(bases, settings)
    if ungated:
        learned.values["ungated-classes"] = tuple(ungated)
        learned.sources["ungated-classes"] = f"learned: classes keeping `{gate}` off, with their subclasses"
    known: dict[str, Optional[bool]] = {}
    off = tuple(name for name in sorted({*bases, *settings}) if _resolved(name, bases, settings, known) is False)
    if off:
        learned.values["gate-off-classes"] = off
        learned.sources["gate-off-classes"] = f"learned: classes whose own instances keep `{gate}` off"


def gate_checked(data: bytes, predicate: str) -> Optional[tuple[str, int]]:
    """The gate attribute of a file's `if self.<gate> and not <predicate>(`, and its line."""
    if predicate.encode() not in data:
        return None
    pattern = re.compile(rb"\bif[ \t]+self\.(\w+)[ \t]+and[ \t]+not[ \t]+" + re.escape(predicate.encode()) + rb"\(")
    match = pattern.search(data)
    if match is None:
        return None
    return match.group(1).decode(), data.count(b"\n", 0, match.start()) + 1


def class_settings(data: bytes, gate: str) -> Union[tuple[tuple[str, bool], ...], str]:
    """(class, value) of each literal a class body of the file gives `gate`, in order;
    `_ASSIGNED_ELSEWHERE` when something else assigns it."""
    if gate.encode() not in data:
        return ()
    name = re.escape(gate.encode())
    in_body = re.compile(rb"^([ \t]+)" + name + rb"[ \t]*(?::[^=\n]*)?=[ \t]*(True|False)[ \t]*(?:#.*)?$")
    assigned = re.compile(rb"\b" + name + rb"\b[ \t]*(?::[^=\n]*)?=(?!=)|setattr\([^)]*['\"]" + name + rb"['\"]")
    settings = []
    lines = data.splitlines()
    for number, text in enumerate(lines):
        if gate.encode() not in text or text.lstrip().startswith(b"#"):
            continue
        literal = in_body.match(text)
        klass = _enclosing_class(lines, number, len(literal.group(1))) if literal else None
        if literal is not None and klass is not None:
            settings.append((klass, literal.group(2) == b"True"))
        elif assigned.search(text):
            return _ASSIGNED_ELSEWHERE
    return tuple(settings)


_BLOCK = re.compile(rb"^([ \t]*)(?:(class)[ \t]+(\w+)|\S)")


def _enclosing_class(lines: list[bytes], number: int, indent: int) -> Optional[str]:
    """The class whose body holds line `number` directly (indented `indent`), or None (inside a function)."""
    for above in range(number - 1, -1, -1):
        match = _BLOCK.match(lines[above])
        if match is None or lines[above].lstrip().startswith(b"#") or len(match.group(1)) >= indent:
            continue
        return match.group(3).decode() if match.group(2) else None
    return None


def _ungated(bases: dict[str, set[str]], settings: dict[str, set[bool]]) -> list[str]:
    """The classes whose gate is off, and off for every subclass of theirs in the tree."""
    known: dict[str, Optional[bool]] = {}
    names = {*bases, *settings}
    for name in names:
        _resolved(name, bases, settings, known)
    return [
        name for name in sorted(names)
        if known[name] is False and all(known.get(member) is False for member in subclasses({name}, bases))
    ]


def _resolved(
    name: str, bases: dict[str, set[str]], settings: dict[str, set[bool]], known: dict[str, Optional[bool]]
) -> Optional[bool]:
    """The gate a class has, own or inherited; None when unknown or when its definitions or bases disagree."""
    if name in known:
        return known[name]
    known[name] = None  # a cycle of headers resolves to unknown
    if name in settings:
        own = settings[name]
        value = next(iter(own)) if len(own) == 1 else None
    else:
        # A base setting the gate nowhere up its own bases (a mixin, `class M:`) gives no value.
        inherited = {_resolved(base, bases, settings, known) for base in bases.get(name, ())
                     if _sets_gate(base, bases, settings, set())}
        value = next(iter(inherited)) if len(inherited) == 1 else None
    known[name] = value
    return value


def _sets_gate(name: str, bases: dict[str, set[str]], settings: dict[str, set[bool]], seen: set[str]) -> bool:
    """Whether `name` or a class up its bases sets the gate in its body."""
    if name in settings:
        return True
    seen.add(name)
    return any(base not in seen and _sets_gate(base, bases, settings, seen) for base in bases.get(name, ()))
