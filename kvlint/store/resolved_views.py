"""The helper views a resolution gave, and everything it read to give them.

A resolution (`kvlint.running.project_facts`) reads three things: the scope's paths (which file
a module name is), every file's answers to its name rounds (`kvlint.store.file_words`: does
it hold a seed word, call or define one of these names), and the summaries of the files it was
led to. The views are a function of those alone, so they still answer after an edit that
leaves all three as they were: a file that answers each name asked about as before, and whose
summary was not read, or read and the same. A model file edited before a commit is usually
such a file (sglang/srt: 308 summaries of 2,141 files are read), and the run need not load 308
summaries and resolve again (0.2 s).

A round looking for a name that is not an ASCII word searches the files' bytes; views resolved
so answer only for the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from kvlint.api.helpers import HelperFacts


@dataclass(frozen=True)
class ResolvedViews:
    views: dict[str, HelperFacts]
    # Every file of the scope resolved in, by path: the digest of its bytes.
    contents: dict[str, bytes]
    # The files whose summaries the resolution read.
    summarised: frozenset[str]
    # False: a round searched the files' bytes, not only their names.
    by_names: bool
    # The names the rounds asked which files call, and which define.
    asked_called: frozenset[bytes]
    asked_defined: frozenset[bytes]

    def changed(self, digests: Mapping[str, bytes]) -> Optional[list[str]]:
        """The files whose bytes differ from those resolved in; None when the scope's paths differ."""
        if self.contents.keys() != digests.keys():
            return None
        return [path for path, content in digests.items() if self.contents[path] != content]


@dataclass(frozen=True)
class Reread:
    """A changed file as the resolution would read it now, and as it was read then."""

    # Whether its names answer each question the rounds asked as they did then.
    names_alike: bool
    # Only for a file whose summary was read: (now, then).
    summaries: Optional[tuple[Any, Any]] = None

    def same(self) -> bool:
        if not self.names_alike:
            return False
        # An unread summary (None) is never the same: a file that did not parse gives none to compare.
        return self.summaries is None or (self.summaries[1] is not None and self.summaries[0] == self.summaries[1])


def still_answers(
    known: Optional[ResolvedViews], digests: Mapping[str, bytes], reread: Callable[[str, bytes, bool], Reread]
) -> Optional[list[str]]:
    """The changed files, each read again (`reread(path, digest then, summary read)`), when `known`'s
    views hold for the scope at `digests`, else None."""
    if known is None:
        return None
    changed = known.changed(digests)
    if changed is None or (changed and not known.by_names):
        return None
    for path in changed:
        if not reread(path, known.contents[path], path in known.summarised).same():
            return None
    return changed
