"""`kvlint check -v`: what each phase of a run did, how long it took, what it skipped and why.

Phases log on the `kvlint` logger at INFO, each skipped file at DEBUG; the
CLI's `-v` shows INFO on stderr and `-vv` DEBUG (as flake8's and ruff's
verbose output do). Without a handler nothing is formatted.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("kvlint")


class Phases:
    """Times consecutive phases of one run."""

    def __init__(self) -> None:
        self._start = self._last = time.perf_counter()

    def done(self, phase: str, message: str, *args: object) -> None:
        now = time.perf_counter()
        log.info("%-9s %7.3f s  " + message, phase, now - self._last, *args)
        self._last = now

    def total(self, message: str, *args: object) -> None:
        log.info("%-9s %7.3f s  " + message, "total", time.perf_counter() - self._start, *args)
