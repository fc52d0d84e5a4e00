"""The files contract learning reads, and what it asked of each.

Learning reads a file only by asking a question of it: a module function of the file's bytes
(and a few names) whose answer is plain data (tuples, strings, numbers, frozen dataclasses of
them), None when the file has nothing to say. `Scope` asks the files in path order; `Asked`
keeps a fingerprint of every answer, so that after an edit the contract cache can ask the
edited files alone the same questions: when each answers as before, learning would take the
same steps and reach the same contract, which is kept without learning again.

Lines move with every edit above them, so a reading may leave its line numbers out of its
equality (`field(compare=False)`): learning's steps do not depend on them, only the sources it
writes ("learned from PATH:LINE"). The files whose lines reach the contract are pinned
(`Asked.pinned`): their answers must be the same line for line.
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
    # Files whose answers' lines learning wrote into the contract.
    pinned: frozenset[int]

    def answers_as_before(self, number: int, data: bytes) -> bool:
        """Whether `data`, the new bytes of file `number`, answers every question asked of it as before."""
        for question, answers in self.answers.items():
            if number > self.stops.get(question, number):
                continue
            function, names = question
            answer = function(data, *names) or None
            if (None if answer is None else _fingerprint(answer, number in self.pinned)) != answers.get(number):
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

    def asked(self, pinned: set[Path]) -> Asked:
        """What learning asked, `pinned` the files whose lines it wrote into the contract."""
        numbers = frozenset(number for number, path in enumerate(self.paths) if path in pinned)
        answers = {
            question: {number: _fingerprint(answer, number in numbers) for number, answer in found.items()}
            for question, found in self._answers.items()
        }
        return Asked(answers, dict(self._stops), numbers)

    def _answered(self, question: Question) -> Iterator[tuple[int, Any]]:
        function, names = question
        for number, (_path, data) in enumerate(self._files):
            answer = function(data, *names) or None
            if answer is not None:
                yield number, answer


def _fingerprint(answer: Any, with_lines: bool) -> bytes:
    """A digest of what equality sees of `answer` (every field `with_lines`). Answers hold no
    sets, so their `repr` is the same in every process."""
    shown = repr(answer if with_lines else _compared(answer))
    return hashlib.blake2b(shown.encode(), digest_size=16).digest()


def _compared(value: Any) -> Any:
    """`value` as equality sees it: a dataclass without its `compare=False` fields."""
    if isinstance(value, (tuple, list)):
        return tuple(_compared(item) for item in value)
    if is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        if kind not in _COMPARED_FIELDS:
            _COMPARED_FIELDS[kind] = tuple(item.name for item in fields(value) if item.compare)
        return (kind.__name__, tuple(_compared(getattr(value, name)) for name in _COMPARED_FIELDS[kind]))
    return value


# A dataclass's fields equality compares, by its type: answers hold thousands of readings.
_COMPARED_FIELDS: dict[type, tuple[str, ...]] = {}
