"""A worker that loads LibCST and parses while the main process builds the project index.

A pre-commit run on one large backend spent about 0.25 s on the project index,
then 0.15 s importing LibCST and 0.2 s parsing the file with it, one after the
other, though the index does not need LibCST: it reads CPython's trees. When
such a run has a second core, one worker process is started before the index.
It imports the rules, and once the main process has made the check requests
(without the index's helper facts, which come later), it asks each rule's
`may_flag` as the check would and parses what the check would parse: CPython's
tree of the file, and LibCST's of its skeleton (`kvlint.running.checker.parse_ahead`),
importing LibCST only then. The files are then checked there
(`kvlint.running.workers`); where the index's facts leave the text to parse as
it was (most often: they add a word to a function the rules' own words kept
already), the check finds it parsed. A model file every rule clears costs the
worker a guess, not LibCST's import.

It is started only where it can pay: a few files to check (more start a pool
anyway), in a tree large enough for its index to take longer than starting a
worker, whose index the result cache mostly holds (`warm`), and one of them
holding a selected rule's trigger words.

Nothing forks beside the pool's thread (Python 3.12 warns: a child could
inherit a lock held there): the index summarises in the main process while it
runs, which a warm cache leaves little to do, and a batch of files large
enough for a pool of every core closes it first.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Callable, Mapping, Optional

from kvlint.running.deferred_libcst import loaded
from kvlint.running.workers import MIN_FILES_FOR_WORKERS, Work, default_jobs

# Below this many files in the run's scope, the index takes less than a worker's start.
MIN_SCOPE_FILES = 200
# How often a worker looks whether the main process still runs (an interrupted run leaves it behind).
_PARENT_POLL_S = 0.2


class HeadStart:
    """The head-start worker's pool, for as long as it is where files are checked."""

    def __init__(self, pool: ProcessPoolExecutor, files: list[str]) -> None:
        self._pool: Optional[ProcessPoolExecutor] = pool
        # The files worth parsing ahead: not answered by the cache, holding trigger words.
        self.files = files

    def parse_ahead(self, work: list[Work]) -> None:
        """Have the worker parse what checking `work` will parse, asked without the index's facts."""
        if self._pool is not None:
            self._pool.submit(_parse_ahead, work)

    def pool_for(self, files: int) -> Optional[Executor]:
        """The pool to check `files` files in; None (for good) once a batch needs every core."""
        if self._pool is not None and files >= MIN_FILES_FOR_WORKERS:
            self._pool.shutdown(wait=True)
            self._pool = None
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            # Waited for: a worker told nothing before this process exits would wait for work for
            # ever, holding the run's stdout open (a pre-commit hook reading it would hang). By now
            # it has checked the files, so it ends at once.
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def head_start(
    to_check: Mapping[str, bytes],
    answered: Callable[[str], bool],
    wanted: Callable[[bytes], bool],
    scope_files: int,
    warm: bool,
    jobs: Optional[int],
) -> Optional[HeadStart]:
    """A worker already importing the rules, where checking `to_check` may be worth one.

    `answered`: whether the result cache holds a file's result already; `wanted`: whether bytes hold
    a selected rule's trigger words; `warm`: whether the cache holds the index's summaries.
    """
    if not to_check or len(to_check) >= MIN_FILES_FOR_WORKERS or scope_files < MIN_SCOPE_FILES:
        return None
    if not warm or loaded() or (jobs if jobs is not None else default_jobs()) < 2:
        return None
    files = [path for path, data in to_check.items() if not answered(path) and wanted(data)]
    if not files:
        return None
    pool = ProcessPoolExecutor(max_workers=1, initializer=_exit_with_parent, initargs=(os.getpid(),))
    pool.submit(_load_rules)
    return HeadStart(pool, files)


def _exit_with_parent(parent: int) -> None:
    """In the worker: end when the main process is gone, whatever state it left the pool in."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _load_rules() -> None:
    # Imported here: this runs in the worker. The registry puts a stand-in for LibCST in place
    # first, so LibCST itself is imported only when a rule keeps a file (`parse_ahead`).
    from kvlint.running.registry import all_rules

    all_rules()


def _parse_ahead(work: list[Work]) -> None:
    # Imported here: the main process never imports the checker (it imports LibCST).
    from kvlint.running.checker import parse_ahead

    for request, data in work:
        parse_ahead(request, data)
