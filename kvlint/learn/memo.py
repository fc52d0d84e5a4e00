"""What contract learning read of a piece of a file, remembered by the piece's digest.

Learning parses the pieces of a few hundred files (a pool's methods, the files assigning a
buffer attribute); what it takes from each is a pure function of the piece's bytes and a few
learned names. So each reading is kept under those, across runs too: the contract cache saves
what the last learning used (`used`) and hands it to the next (`recall`), and a tree with one
file edited parses only that file's pieces again.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Hashable, TypeVar

Read = TypeVar("Read")

_READ: dict[tuple[Hashable, ...], Any] = {}
_USED: dict[tuple[Hashable, ...], Any] = {}


def remembered(kind: str, text: bytes, names: tuple[Hashable, ...], read: Callable[[], Read]) -> Read:
    """`read()` of `text` (a pure function of it and `names`), or what an earlier reading gave."""
    key = (kind, hashlib.sha256(text).digest(), *names)
    if key not in _READ:
        _READ[key] = read()
    value: Read = _READ[key]
    _USED[key] = value
    return value


def used() -> dict[tuple[Hashable, ...], Any]:
    """The readings the last learning used, for the contract cache to keep."""
    return dict(_USED)


def recall(readings: dict[tuple[Hashable, ...], Any]) -> None:
    """The readings an earlier run used (the contract cache's), in place of those this process made."""
    _READ.clear()
    _READ.update(readings)
    _USED.clear()
