"""Check many files, in worker processes when there are enough of them.

Results come back in the order of the requests, whatever order the workers
finish in. A file whose check raises becomes that file's internal error. A
worker that dies outright (a crash in native code, the OOM killer) breaks the
whole pool and fails every unfinished file with it; those files are re-run,
one worker at a time, until the file that kills a worker is found and
reported alone, so the rest of the run still gets its results.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import nullcontext
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, TypeVar

from kvlint.api.types import FileOutcome, RunError
from kvlint.running.collector import collector_paused
from kvlint.running.deferred_libcst import load as load_libcst

if TYPE_CHECKING:
    from kvlint.running.checker import CheckResult
    from kvlint.running.plan import CheckRequest

# Below this many files to parse, worker start-up costs more than it saves.
MIN_FILES_FOR_WORKERS = 8

# Below this many keys, `map_shared` starting a pool costs more than it saves.
MIN_KEYS_TO_SHARE = 256
# Keys per task: few round trips, yet shares even enough that no worker finishes long after the other.
_SHARED_CHUNK = 64
# What `map_shared`'s forked workers find in the memory they inherit: (function, data).
_SHARED: Optional[tuple[Callable[[Any], Any], Mapping[Any, Any]]] = None

Progress = Callable[[int, int], None]
Work = tuple["CheckRequest", bytes]
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


def default_jobs() -> int:
    """The cores this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def job_count(jobs: Optional[int]) -> int:
    """The worker processes `--jobs` asks for: every core this process may run on where it is None."""
    return jobs if jobs is not None else default_jobs()


def check_all(
    work: list[Work], jobs: Optional[int], progress: Optional[Progress] = None, started: Optional[Executor] = None
) -> list[CheckResult]:
    """Each request's result, in order. `started`: a pool already started for this run
    (`kvlint.running.head_start`), used first whatever the number of files."""
    total = len(work)
    workers = job_count(jobs)
    if started is None and (workers <= 1 or total < MIN_FILES_FOR_WORKERS):
        results = []
        for done, (request, data) in enumerate(work, 1):
            results.append(check_guarded(request, data))
            if progress:
                progress(done, total)
        return results
    slots: list[Optional[CheckResult]] = [None] * total
    finished = 0

    def tick() -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished, total)

    # Largest files first, so one big file does not finish last on its own.
    pending = sorted(range(total), key=lambda i: -len(work[i][1]))
    isolating = False
    if started is not None:
        # One worker, files in submission order: if it dies, the next round finds the culprit alone.
        pending = _run_pool(work, pending, 1, slots, tick, started)
        isolating = bool(pending)
        if pending:
            # Broken: its thread ends before another pool forks.
            started.shutdown(wait=True)
    if pending:
        # Loaded once here rather than in each worker: forked workers share it, and enough files to
        # start workers for almost always include one LibCST parses.
        load_libcst()
    while pending:
        broken = _run_pool(work, pending, 1 if isolating else min(workers, len(pending)), slots, tick)
        if broken and isolating:
            # One worker, files in submission order: the first broken one killed it.
            culprit, broken = broken[0], broken[1:]
            slots[culprit] = _failed(work[culprit][0].path, "the worker process died while checking this file")
            tick()
        # After a break, isolate until the culprit is found, then go back to full speed.
        isolating = bool(broken) and not isolating
        pending = broken
    return [slot for slot in slots if slot is not None]


def _run_pool(
    work: list[Work],
    indices: list[int],
    workers: int,
    slots: list[Optional[CheckResult]],
    tick: Callable[[], None],
    started: Optional[Executor] = None,
) -> list[int]:
    """Fill `slots` for `indices`; return the indices lost to a broken pool, in submission order.

    `started`: the pool to use (its owner shuts it down); else one of `workers` made here.
    """
    broken: list[int] = []
    with nullcontext(started) if started is not None else ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {}
        for i in indices:
            try:
                futures[pool.submit(check_guarded, *work[i])] = i
            except BrokenProcessPool:
                # The pool broke before this file was handed over (a worker died meanwhile).
                broken.append(i)
        for future in as_completed(futures):
            index = futures[future]
            try:
                slots[index] = future.result()
            except BrokenProcessPool:
                broken.append(index)
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled back
                slots[index] = _failed(work[index][0].path, f"worker failed: {exc!r}")
            tick()
    order = {index: position for position, index in enumerate(indices)}
    return sorted(broken, key=order.__getitem__)


class RoundPool:
    """`function(*args)` for each of `arguments`, in order, round after round (each round's work known
    only once the one before is done): in worker processes once a round has enough, and the pool
    then kept for the later rounds, whatever their size. The project index reads sglang/srt in four
    rounds; a pool started for each cost a cold run 0.3 s.

    For work that cannot fail on a file (it reports a file's problems in its result), so a broken
    pool only means a worker died: that round is then done here, and so is every later one.
    """

    def __init__(self, jobs: Optional[int]) -> None:
        self._workers = job_count(jobs)
        self._pool: Optional[ProcessPoolExecutor] = None
        self._broken = False

    def __enter__(self) -> RoundPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def map(self, function: Callable[..., T], arguments: list[tuple[Any, ...]]) -> list[T]:
        if not arguments:
            return []
        if self._pool is None and (self._broken or self._workers <= 1 or len(arguments) < MIN_FILES_FOR_WORKERS):
            return [function(*args) for args in arguments]
        if self._pool is None:
            # Sized by the round that starts it, the seeded files', the largest in practice (under fork every
            # worker starts at once, whether or not a round keeps it busy).
            self._pool = ProcessPoolExecutor(max_workers=min(self._workers, len(arguments)))
        try:
            return list(self._pool.map(function, *zip(*arguments), chunksize=4))
        except BrokenProcessPool:
            self._pool.shutdown(wait=True)
            self._pool, self._broken = None, True
            return [function(*args) for args in arguments]


def map_shared(function: Callable[[V], T], keys: Sequence[K], data: Mapping[K, V], jobs: Optional[int]) -> list[T]:
    """`function(data[key])` for each key, in order; in forked workers when there are many keys.

    The workers read `function` and `data` from the memory the fork gives them: only keys and
    results cross a pipe (sending sglang/srt's 36 MB of bytes to workers cost what they saved).
    Without fork (spawn), with one core or a few keys, everything runs here.
    """
    global _SHARED
    workers = job_count(jobs)
    if workers <= 1 or len(keys) < MIN_KEYS_TO_SHARE or multiprocessing.get_start_method() != "fork":
        return [function(data[key]) for key in keys]
    chunks = [list(keys[start : start + _SHARED_CHUNK]) for start in range(0, len(keys), _SHARED_CHUNK)]
    _SHARED = (function, data)
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return [result for chunk in pool.map(_map_chunk, chunks) for result in chunk]
    except BrokenProcessPool:
        return [function(data[key]) for key in keys]
    finally:
        _SHARED = None


def _map_chunk(keys: list[Any]) -> list[Any]:
    assert _SHARED is not None, "map_shared's workers are forked after it is set"
    function, data = _SHARED
    return [function(data[key]) for key in keys]


def check_guarded(request: CheckRequest, data: bytes) -> CheckResult:
    # Imported here: the checker pulls in LibCST, which a fully cached run never needs.
    from kvlint.running.checker import check_bytes

    try:
        # A file's trees make no cycle: collections during its check were a third of a cold check.
        with collector_paused():
            return check_bytes(request, data)
    except Exception as exc:  # noqa: BLE001 - anything unexpected is this file's internal error
        return _failed(request.path, repr(exc))


def _failed(path: str, why: str) -> CheckResult:
    # As in `check_guarded`: the checker module loads LibCST.
    from kvlint.running.checker import CheckResult

    return CheckResult(FileOutcome(path, False, errors=(RunError(path, f"internal error: {why}", internal=True),)))
