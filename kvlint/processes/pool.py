"""Work spread over worker processes: how many, and two ways of handing them pure work.

`RoundPool` serves rounds of work whose next round is known only once the one before is
done (the project index's summaries); `map_shared` maps one function over data the workers
inherit by fork. Neither knows what the work is; `kvlint.running.workers` checks files on
top of the same counts.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

# Below this many files to parse, worker start-up costs more than it saves.
MIN_FILES_FOR_WORKERS = 8

# Below this many keys, `map_shared` starting a pool costs more than it saves.
MIN_KEYS_TO_SHARE = 256
# Keys per task: few round trips, yet shares even enough that no worker finishes long after the other.
_SHARED_CHUNK = 64
# What `map_shared`'s forked workers find in the memory they inherit: (function, data).
_SHARED: Optional[tuple[Callable[[Any], Any], Mapping[Any, Any]]] = None

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
