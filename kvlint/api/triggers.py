"""Decide from a file's bytes alone which rules could flag anything in it.

A rule declares word groups; the file must contain one word of every group.
`word in data` on bytes is the cheapest test there is (two to three times
faster than one regex alternation), and most files fail it, so most files
are never parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

Groups = tuple[tuple[bytes, ...], ...]


def encode_groups(groups: Sequence[Sequence[str]]) -> Groups:
    return tuple(tuple(word.encode() for word in group) for group in groups)


def passes(data: bytes, groups: Groups) -> bool:
    return all(any(word in data for word in group) for group in groups)


@dataclass(frozen=True)
class Triggers:
    """Everything the selected rules look for in a file's bytes, without the rules themselves.

    The result cache keeps it, so a run that only meets files without these
    words never imports the rules (nor, through them, LibCST).
    """

    # One entry per selected rule, per-file and project rules alike.
    groups: tuple[Groups, ...]
    # Words that make a file worth reading for its suppression comments alone.
    comment_words: tuple[bytes, ...]
    project_codes: tuple[str, ...]

    def wanted(self, data: bytes) -> bool:
        return any(passes(data, groups) for groups in self.groups) or any(word in data for word in self.comment_words)
