"""Which names each file calls and defines, read once per content.

The project index finds the names a helper with a fact can have round by round, and each
round asks which files call (`name(`, `.name(`, not `other_name(`) or define (`def name(`)
one of the names found in the round before. Searching every file's bytes for that, round
after round, cost about 2 s over sglang/srt whenever one file changed; instead each file's
called and defined names are read once, kept in the result cache by content, and a round
is a set intersection per file.

Names are read with bytes patterns, whose `\\w` is ASCII: a name with any other character is
looked for in the bytes, as every name was before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable, Mapping, Optional

from kvlint.store.result_cache import ResultCache
from kvlint.processes.pool import map_shared

# A call: a word not preceded by a word character, then `(`; a definition: `def name(`. The
# word is matched possessively: a shorter part of a word is never followed by `(`, and not trying
# each one takes a third off reading sglang/srt's words (0.62 -> 0.43 s).
_CALLED = re.compile(rb"\b(\w++)\(")
_DEFINED = re.compile(rb"def (\w+)\(")
_WORD = re.compile(r"\w+", re.ASCII)


@dataclass(frozen=True)
class FileWords:
    """A file's called and defined names, each set kept as one space-separated string: the cache
    loads two strings per file, not a hundred (sglang/srt's result cache loads in 0.37-0.39 s
    so, 0.40-0.46 s with sets; splitting them all again takes 0.02 s)."""

    called: bytes
    defined: bytes
    # Whether the file holds one of the index's seed words anywhere in its bytes: a run after
    # one edit asks it of every file of the tree (19 words searched in 36 MB over sglang/srt,
    # 0.1-0.2 s). The seed words come from the contract, which is part of the cache's run key.
    seeded: bool


def read_words(data: bytes, seeds: tuple[bytes, ...]) -> FileWords:
    return FileWords(_joined(_CALLED.findall(data)), _joined(_DEFINED.findall(data)), any(word in data for word in seeds))


def _joined(names: Iterable[bytes]) -> bytes:
    return b" ".join(sorted(set(names)))


@dataclass(frozen=True)
class _Names:
    called: frozenset[bytes]
    defined: frozenset[bytes]
    seeded: bool


class WordIndex:
    """The files of a scope that call or define one of some names, or hold one of the `seeds`
    (`kvlint.running.project_facts.seed_words`), in the scope's order."""

    def __init__(
        self, sources: Mapping[str, bytes], cache: Optional[ResultCache], digests: dict[str, bytes], seeds: tuple[bytes, ...]
    ) -> None:
        self._sources = sources
        self._cache = cache
        self._digests = digests
        self._seeds = seeds
        self._names: dict[str, _Names] = {}
        # False once a question was answered from the bytes (a name that is not an ASCII word).
        self.by_names = True
        # Every name asked about: a file's other names answer no question.
        self.asked_called: set[bytes] = set()
        self.asked_defined: set[bytes] = set()

    def read_all(self, jobs: Optional[int]) -> None:
        """Read the words of every file the cache does not hold, in forked workers where there are
        many (a cold run: sglang/srt's 2,141 files took 0.75 s here)."""
        missing = [path for path in self._sources if path not in self._names and self._cached(path) is None]
        read = partial(read_words, seeds=self._seeds)
        for path, words in zip(missing, map_shared(read, missing, self._sources, jobs)):
            self._keep(path, words)

    def seeded(self) -> list[str]:
        every = self._every()
        return [path for path in self._sources if every[path].seeded]

    def calling(self, names: set[str]) -> list[str]:
        other = _pattern(rb"(?<![\w])(?:", names, rb")\(")
        return self._matching(names, lambda found: found.called, other, self.asked_called)

    def defining(self, names: set[str]) -> list[str]:
        other = _pattern(rb"def (?:", names, rb")\(")
        return self._matching(names, lambda found: found.defined, other, self.asked_defined)

    def _matching(
        self,
        names: set[str],
        read: Callable[[_Names], frozenset[bytes]],
        other: Optional[re.Pattern[bytes]],
        asked: set[bytes],
    ) -> list[str]:
        words = {name.encode() for name in names if _WORD.fullmatch(name)}
        asked |= words
        self.by_names = self.by_names and other is None
        every = self._every()
        # The bytes only where the word sets cannot answer: the result cache's words stand for them.
        return [
            path for path in self._sources
            if not read(every[path]).isdisjoint(words) or (other is not None and other.search(self._sources[path]))
        ]

    def _every(self) -> dict[str, _Names]:
        """Every file's names, made once: each question of the rounds is asked of every file."""
        if len(self._names) < len(self._sources):
            for path in self._sources:
                if path not in self._names:
                    cached = self._cached(path)
                    if cached is None:
                        self._keep(path, read_words(self._sources[path], self._seeds))
                    else:
                        self._names[path] = _names(cached)
        return self._names

    def _cached(self, path: str) -> Optional[FileWords]:
        return self._cache.file_words(path, self._digests[path]) if self._cache is not None else None

    def _keep(self, path: str, words: FileWords) -> None:
        """Words read now: kept for this run and, by content, in the cache."""
        if self._cache is not None:
            self._cache.store_file_words(path, self._digests[path], words)
        self._names[path] = _names(words)


def answers_alike(now: FileWords, then: FileWords, called: frozenset[bytes], defined: frozenset[bytes]) -> bool:
    """Whether `now` answers as `then` did every question about a seed word, a call of one of
    `called` and a definition of one of `defined`."""
    if now == then:
        return True
    new, old = _names(now), _names(then)
    return new.seeded == old.seeded and new.called & called == old.called & called and new.defined & defined == old.defined & defined


def _names(words: FileWords) -> _Names:
    return _Names(frozenset(words.called.split()), frozenset(words.defined.split()), words.seeded)


def _pattern(before: bytes, names: set[str], after: bytes) -> Optional[re.Pattern[bytes]]:
    """The bytes pattern for the names the word sets cannot answer for; None without any."""
    other = sorted(name for name in names if not _WORD.fullmatch(name))
    if not other:
        return None
    return re.compile(before + b"|".join(re.escape(name.encode()) for name in other) + after)
