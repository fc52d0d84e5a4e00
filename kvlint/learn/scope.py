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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Mapping, Optional

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
    """The files learning reads, sorted by path, asked only through `survey` and `first`."""

    def __init__(self, sources: Mapping[Path, bytes]) -> None:
        self._files = sorted(sources.items())
        self.paths = [path for path, _ in self._files]
        self._answers: dict[Question, dict[int, Any]] = {}
        self._stops: dict[Question, int] = {}

    def survey(self, function: Callable[..., Any], *names: Hashable) -> dict[Path, Any]:
        """Every file's answer that is not None, in path order."""
        question: Question = (function, names)
        if question not in self._answers or question in self._stops:
            self._stops.pop(question, None)
            self._answers[question] = dict(self._answered(question))
        return {self.paths[number]: answer for number, answer in self._answers[question].items()}

    def first(self, function: Callable[..., Any], *names: Hashable) -> Optional[tuple[Path, Any]]:
        """The first file (in path order) with an answer, and its answer; the files after it are not asked."""
        question: Question = (function, names)
        if question not in self._answers:
            found = next(self._answered(question), None)
            self._answers[question] = {} if found is None else dict([found])
            if found is not None:
                self._stops[question] = found[0]
        number, answer = next(iter(self._answers[question].items()), (None, None))
        return None if number is None else (self.paths[number], answer)

    def asked(self, pinned: Mapping[Path, int]) -> Asked:
        """What learning asked, `pinned` the files whose lines it wrote into the contract (with the last line)."""
        lines = {number: pinned[path] for number, path in enumerate(self.paths) if path in pinned}
        answers = {
            question: {number: _fingerprint(answer, lines.get(number)) for number, answer in found.items()}
            for question, found in self._answers.items()
        }
        return Asked(answers, dict(self._stops), lines)

    def _answered(self, question: Question) -> Iterator[tuple[int, Any]]:
        function, names = question
        for number, (_path, data) in enumerate(self._files):
            answer = function(data, *names) or None
            if answer is not None:
                yield number, answer


def _fingerprint(answer: Any, lines_up_to: Optional[int]) -> bytes:
    """A digest of what equality sees of `answer`, and of its line numbers up to `lines_up_to`.
    Answers hold no sets, so their `repr` is the same in every process."""
    shown = repr(_compared(answer, lines_up_to))
    return hashlib.blake2b(shown.encode(), digest_size=16).digest()


def _compared(value: Any, lines_up_to: Optional[int]) -> Any:
    """`value` as equality sees it (a dataclass without its `compare=False` fields), and with
    those fields' line numbers up to `lines_up_to` (the later ones None)."""
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_compared(item, lines_up_to) for item in value)
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
    return lines if lines <= last else None


# A dataclass's fields and whether equality compares each, by its type: answers hold thousands of readings.
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}
