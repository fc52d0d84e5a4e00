"""Check many files, in worker processes when there are enough of them.

Results come back in the order of the requests, whatever order the workers
finish in. A file whose check raises becomes that file's internal error. A
worker that dies outright (a crash in native code, the OOM killer) breaks the
whole pool and fails every unfinished file with it; those files are re-run,
one worker at a time, until the file that kills a worker is found and
reported alone, so the rest of the run still gets its results.
"""

from __future__ import annotations

from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import nullcontext
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Callable, Optional

from kvlint.api.types import FileOutcome, RunError
from kvlint.processes.collector import collector_paused
from kvlint.running.deferred_libcst import load as load_libcst
from kvlint.processes.pool import MIN_FILES_FOR_WORKERS, job_count

if TYPE_CHECKING:
    from kvlint.running.checker import CheckResult
    from kvlint.running.plan import CheckRequest

Progress = Callable[[int, int], None]
Work = tuple["CheckRequest", bytes]


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
