"""A worker forked as soon as a run knows its few files, to load LibCST and parse while the
main process reads the tree, learns the contract and builds the project index.

A pre-commit run on one large backend spent about 0.25 s on the project index,
then 0.15 s importing LibCST and 0.2 s parsing the file with it, one after the
other, though nothing before the check needs LibCST: the index reads CPython's
trees. When such a run has a second core, one worker process is forked: where
the command names its files (the hook's `kvlint check FILE...`), before the
run machinery is even imported (`start_early`), else right after discovery
(`warm_up`, which also keeps or closes an early one once the scope is known).
It imports the rules and guesses, with each rule's `may_flag` under the
default contract, whether a file it was given will be parsed; if one will, it
imports LibCST at once, while the main process is still on the phases before
the index. Once the main process knows the run can
use it (`HeadStart.keep_for`: the cache holds the index, a file is neither
answered by the cache nor free of trigger words) and has made the check
requests (without the index's helper facts, which come later), the worker asks
`may_flag` as the check will and parses what the check would parse: CPython's
tree of the file, and LibCST's of its skeleton
(`kvlint.running.checker.parse_ahead`). The files are then checked there
(`kvlint.running.workers`); where the index's facts leave the text to parse as
it was (most often: they add a word to a function the rules' own words kept
already), the check finds it parsed. A model file every rule clears costs the
worker a guess, not LibCST's import.

It is forked only where it can pay: a few files to check (more start a pool
anyway), in a tree large enough for its index to take longer than starting a
worker, with the result cache on; a run that then finds it cannot use it
closes it before anything else forks.

Nothing forks beside the pool's thread (Python 3.12 warns: a child could
inherit a lock held there): the index summarises in the main process while it
runs, which a warm cache leaves little to do, and a batch of files large
enough for a pool of every core closes it first.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from kvlint.running.deferred_libcst import loaded
from kvlint.processes.pool import MIN_FILES_FOR_WORKERS, job_count
from kvlint.running.workers import Work

# Below this many files in the run's scope, the index takes less than a worker's start.
MIN_SCOPE_FILES = 200
# How often a worker looks whether the main process still runs (an interrupted run leaves it behind).
_PARENT_POLL_S = 0.2


class HeadStart:
    """The head-start worker's pool, for as long as it is where files are checked."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self._pool: Optional[ProcessPoolExecutor] = pool
        # The files worth parsing ahead (`keep_for`): not answered by the cache, holding trigger words.
        self.files: list[str] = []

    def keep_for(
        self,
        to_check: Mapping[str, bytes],
        answered: Callable[[str], bool],
        wanted: Callable[[bytes], bool],
        warm: bool,
    ) -> bool:
        """Whether checking `to_check` may use the worker; ended if not.

        `answered`: whether the result cache holds a file's result already; `wanted`: whether bytes
        hold a selected rule's trigger words; `warm`: whether the cache holds the index's summaries
        (a cold index wants every core).
        """
        self.files = [path for path, data in to_check.items() if not answered(path) and wanted(data)] if warm else []
        if not self.files:
            self.discard()
        return bool(self.files)

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

    def discard(self) -> None:
        """End the worker at once, for a run that will not use it.

        It has only imported and guessed so far; waiting for it to finish importing LibCST cost a
        hook run in a small project 0.2 s, and the run then imported LibCST itself.
        """
        if self._pool is not None:
            for process in list(self._pool._processes.values()):  # no public way to stop a pool's worker
                process.terminate()
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            # Waited for: a worker told nothing before this process exits would wait for work for
            # ever, holding the run's stdout open (a pre-commit hook reading it would hang). By now
            # it has checked the files, so it ends at once.
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def start_early(paths: Sequence[Path], cache: bool, jobs: Optional[int]) -> Optional[HeadStart]:
    """The head start for the Python files a command names (the pre-commit hook's), forked before
    the run machinery is imported: its import and discovery took 0.07-0.1 s of a hook run on a
    backend, which the worker spent waiting. `warm_up` keeps it or ends it once the scope is known."""
    if not all(path.suffix == ".py" and path.is_file() for path in paths):
        return None
    return _start(paths, cache, jobs)


def warm_up(
    files: Sequence[Path], scope_files: int, cache: bool, jobs: Optional[int], started: Optional[HeadStart] = None
) -> Optional[HeadStart]:
    """A worker already importing the rules (and LibCST, if it guesses a file needs it), where
    checking `files` in a scope of `scope_files` files may be worth one; `cache`: the result cache is on.

    `started`: the one `start_early` forked, kept where one may pay, else ended.
    """
    if started is not None:
        if scope_files >= MIN_SCOPE_FILES and 0 < len(files) < MIN_FILES_FOR_WORKERS:
            return started
        started.discard()
        return None
    return _start(files, cache, jobs) if scope_files >= MIN_SCOPE_FILES else None


def _start(files: Sequence[Path], cache: bool, jobs: Optional[int]) -> Optional[HeadStart]:
    if not files or len(files) >= MIN_FILES_FOR_WORKERS or not cache:
        return None
    if loaded() or job_count(jobs) < 2:
        return None
    pool = ProcessPoolExecutor(max_workers=1, initializer=_worker_start, initargs=(os.getpid(),))
    pool.submit(_warm_up, [str(path) for path in files])
    return HeadStart(pool)


def _worker_start(parent: int) -> None:
    """In the worker: no cyclic collections, and an end when the main process is gone.

    The worker imports LibCST and parses a few files, whose trees make no cycle and live until
    their check: with the collector on, parsing a large backend took a tenth longer.
    """
    gc.disable()
    _exit_with_parent(parent)


def _exit_with_parent(parent: int) -> None:
    """End when the main process is gone, whatever state it left the pool in."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _warm_up(paths: list[str]) -> None:
    # Imported here: this runs in the worker. The registry first: it puts a stand-in for LibCST in
    # place, so neither the rules nor the checker (which import it) import LibCST itself.
    from kvlint.running.registry import all_rules

    rules = all_rules()
    # Imported here, after the stand-in: see above.
    from kvlint.api.contract import Contract
    from kvlint.api.rule import Rule
    from kvlint.running.checker import would_parse
    from kvlint.running.deferred_libcst import load
    from kvlint.running.plan import CheckRequest

    file_rules = tuple(rule for rule in rules if issubclass(rule, Rule))
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue  # the main process reports it
        # A guess under the default contract: the learned one may keep another file, or none.
        if would_parse(CheckRequest(path, file_rules, Contract()), data):
            load()
            return


def _parse_ahead(work: list[Work]) -> None:
    # Imported here: the main process never imports the checker (it imports LibCST).
    from kvlint.running.checker import parse_ahead

    for request, data in work:
        parse_ahead(request, data)
