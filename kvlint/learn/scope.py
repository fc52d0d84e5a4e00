"""The files contract learning reads, and what it asked of each.

Learning reads a file only by asking a question of it: a module function of the file's bytes
(and a few names) whose answer is plain data (tuples, strings, numbers, frozen dataclasses of
them), None when the file has nothing to say. `Scope` asks the files in path order; `Asked`
keeps a fingerprint of every answer, so that after an edit the contract cache can ask the
edited files alone the same questions: when each answers as before, learning would take the
same steps and reach the same contract, which is kept without learning again.

Lines move with every edit above them, so a reading may leave its line numbers out of its
equality (`field(compare=False)`, such a field holds a line number or a tuple of them):
learning's steps do not depend on them, only the sources it writes ("learned from PATH:LINE").
A file whose lines reach the contract is pinned with the last line it names (`Asked.pinned`):
in its answers, every line number up to that one must be as before.

The installed engine's files, where the tree builds on one (`kvlint.learn.installed_engine`), are
context: asked after the tree's, and never recorded in `Asked`, which keeps only the engine's
identity; the contract cache compares that, and reads no file of the engine on a warm run.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Mapping, Optional

from kvlint.api.paths import display_path

# A module function of a file's bytes and the names after them.
Question = tuple[Callable[..., Any], tuple[Hashable, ...]]


@dataclass
class Asked:
    """Every question learning asked, with a fingerprint of each file's answer; files are
    numbered in path order."""

    # The fingerprints of the answers that are not None.
    answers: dict[Question, dict[int, bytes]]
    # A question asked until the first file with an answer: the files after it were not asked.
    stops: dict[Question, int]
    # Files whose lines learning wrote into the contract, and the last line it wrote of each.
    pinned: dict[int, int]
    # The identity of the installed engine read as context (`InstalledEngine.identity`), or that
    # it was looked for and not found; "" where learning did not look for one.
    engine: str = ""

    def answers_as_before(self, number: int, data: bytes) -> bool:
        """Whether `data`, the new bytes of file `number`, answers every question asked of it as before."""
        for question, answers in self.answers.items():
            if number > self.stops.get(question, number):
                continue
            function, names = question
            answer = function(data, *names) or None
            if (None if answer is None else _fingerprint(answer, self.pinned.get(number))) != answers.get(number):
                return False
        return True


class Scope:
    """The files learning reads, sorted by path, asked only through `survey` and `first`; then any
    context (`add_context`: the installed engine's files), after the tree's."""

    def __init__(self, sources: Mapping[Path, bytes]) -> None:
        self._files = sorted(sources.items())
        self.paths = [path for path, _ in self._files]
        # Files numbered below this are the tree's; `Asked` records only theirs.
        self._tree = len(self._files)
        self._shown: Callable[[Path], str] = lambda path: display_path(path, Path.cwd())
        self._answers: dict[Question, dict[int, Any]] = {}
        self._stops: dict[Question, int] = {}
        # How many files, in order, each question has been asked of.
        self._extent: dict[Question, int] = {}

    def add_context(self, files: Mapping[Path, bytes], shown: Callable[[Path], str]) -> None:
        """`files` read after the tree's (those the tree holds left out), shown as `shown` names them.
        A question already asked goes on over them when asked again: `first` only where the tree
        had no answer, so the tree's own definitions come first."""
        tree = {os.path.abspath(path) for path in self.paths[: self._tree]}
        added = sorted((path, data) for path, data in files.items() if os.path.abspath(path) not in tree)
        self._files.extend(added)
        self.paths.extend(path for path, _ in added)
        context = {path for path, _ in added}
        tree_shown = self._shown
        self._shown = lambda path: shown(path) if path in context else tree_shown(path)

    def shown(self, path: Path) -> str:
        """A file as the contract's sources name it: relative to the working directory, or as its context names it."""
        return self._shown(path)

    def survey(self, function: Callable[..., Any], *names: Hashable) -> dict[Path, Any]:
        """Every file's answer that is not None, in path order."""
        question: Question = (function, names)
        found = self._answers.setdefault(question, {})
        start = self._extent.get(question, 0)
        if start < len(self._files):
            found.update(self._answered(question, start))
            self._extent[question] = len(self._files)
        self._stops.pop(question, None)
        return {self.paths[number]: answer for number, answer in found.items()}

    def first(self, function: Callable[..., Any], *names: Hashable) -> Optional[tuple[Path, Any]]:
        """The first file (in path order) with an answer, and its answer; the files after it are not asked."""
        question: Question = (function, names)
        found = self._answers.setdefault(question, {})
        start = self._extent.get(question, 0)
        if not found and start < len(self._files):
            hit = next(self._answered(question, start), None)
            self._extent[question] = len(self._files) if hit is None else hit[0] + 1
            if hit is not None:
                found[hit[0]] = hit[1]
                self._stops[question] = hit[0]
        # A survey's answers, or the one `first` found: either way the lowest number comes first.
        number, answer = next(iter(found.items()), (None, None))
        return None if number is None else (self.paths[number], answer)

    def asked(self, pinned: Mapping[Path, int], engine: str = "") -> Asked:
        """What learning asked of the tree's files, `pinned` the files whose lines it wrote into the
        contract (with the last line), `engine` the identity of the installed engine it read as context."""
        tree = self._tree
        lines = {number: pinned[path] for number, path in enumerate(self.paths[:tree]) if path in pinned}
        answers = {
            question: {number: _fingerprint(answer, lines.get(number)) for number, answer in found.items() if number < tree}
            for question, found in self._answers.items()
        }
        # A question that found its answer in the context asked every file of the tree.
        stops = {question: number for question, number in self._stops.items() if number < tree}
        return Asked(answers, stops, lines, engine)

    def _answered(self, question: Question, start: int) -> Iterator[tuple[int, Any]]:
        function, names = question
        for number in range(start, len(self._files)):
            answer = function(self._files[number][1], *names) or None
            if answer is not None:
                yield number, answer


def _fingerprint(answer: Any, lines_up_to: Optional[int]) -> bytes:
    """A digest of what equality sees of `answer`, and of its line numbers up to `lines_up_to`,
    the same in every process: a set's members are taken in sorted order, not hash order."""
    shown = repr(_compared(answer, lines_up_to))
    return hashlib.blake2b(shown.encode(), digest_size=16).digest()


def _compared(value: Any, lines_up_to: Optional[int]) -> Any:
    """`value` as equality sees it (a dataclass without its `compare=False` fields), and with
    those fields' line numbers up to `lines_up_to` (the later ones None)."""
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_compared(item, lines_up_to) for item in value)
    if isinstance(value, (set, frozenset)):
        # Hash order differs between processes (string hashing is salted): a digest of it would
        # tell every run an unchanged file answered differently, and learning would start over.
        return "set", tuple(sorted((_compared(item, lines_up_to) for item in value), key=repr))
    if is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        if kind not in _FIELDS:
            _FIELDS[kind] = tuple((item.name, item.compare) for item in fields(value))
        shown = []
        for name, compared in _FIELDS[kind]:
            if compared:
                shown.append(_compared(getattr(value, name), lines_up_to))
            elif lines_up_to is not None:
                shown.append(_lines_up_to(getattr(value, name), lines_up_to))
        return kind.__name__, tuple(shown)
    return value


def _lines_up_to(lines: Any, last: int) -> Any:
    if isinstance(lines, tuple):
        return tuple(_lines_up_to(line, last) for line in lines)
    # Anything but a line (a file a reading leaves unknown, filled in after it) is none.
    return lines if isinstance(lines, int) and lines <= last else None


# A dataclass's fields and whether equality compares each, by its type: answers hold thousands of readings.
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}
