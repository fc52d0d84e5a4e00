"""Decide from a file's bytes alone which rules could flag anything in it.

A rule declares word groups; the file must contain one word of every group.
`word in data` on bytes is the cheapest test there is (two to three times
faster than one regex alternation), and most files fail it, so most files
are never parsed.
"""

from __future__ import annotations

from typing import Sequence

Groups = tuple[tuple[bytes, ...], ...]


def encode_groups(groups: Sequence[Sequence[str]]) -> Groups:
    return tuple(tuple(word.encode() for word in group) for group in groups)


def passes(data: bytes, groups: Groups) -> bool:
    return all(any(word in data for word in group) for group in groups)
