"""A worker that loads LibCST while the main process builds the project index.

A pre-commit run on one large backend spent about 0.25 s on the project index
and then 0.25 s importing LibCST, one after the other, though neither needs
the other: the index reads CPython's trees. When such a run has a second core,
one worker process is started before the index and imports LibCST and the
rules at once; the files are then checked there (`kvlint.running.workers`).

It is started only where it can pay: a few files to check (more start a pool
anyway), in a tree large enough for its index to take longer than starting a
worker, whose index the result cache mostly holds (`warm`), and one of them a
file some rule's `may_flag` keeps, asked without the index's helper names (a
file only they would keep is checked without a head start, as before). A model
file every rule clears never waits on it.

Nothing forks beside the pool's thread (Python 3.12 warns: a child could
inherit a lock held there): the index summarises in the main process while it
runs, which a warm cache leaves little to do, and a batch of files large
enough for a pool of every core closes it first.
"""

from __future__ import annotations

import ast
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Callable, Mapping, Optional, Sequence

from kvlint.api.contract import Contract
from kvlint.api.rule import Rule
from kvlint.running.deferred_libcst import load, loaded
from kvlint.running.preparse import Unparsable, python_tree
from kvlint.running.workers import MIN_FILES_FOR_WORKERS, default_jobs

# Below this many files in the run's scope, the index takes less than a worker's start.
MIN_SCOPE_FILES = 200


class HeadStart:
    """The head-start worker's pool, for as long as it is where files are checked."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self._pool: Optional[ProcessPoolExecutor] = pool

    def pool_for(self, files: int) -> Optional[Executor]:
        """The pool to check `files` files in; None (for good) once a batch needs every core."""
        if self._pool is not None and files >= MIN_FILES_FOR_WORKERS:
            self._pool.shutdown(wait=True)
            self._pool = None
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            # Not waited for: a worker still loading LibCST for a file the cache answered ends by itself.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def head_start(
    to_check: Mapping[str, bytes],
    answered: Callable[[str], bool],
    wanted: Callable[[bytes], bool],
    scope_files: int,
    warm: bool,
    jobs: Optional[int],
    rules: Callable[[], Sequence[type[Rule]]],
    contract: Contract,
) -> Optional[HeadStart]:
    """A worker already loading LibCST, where checking `to_check` is worth one.

    `answered`: whether the result cache holds a file's result already; `wanted`: whether bytes hold
    a selected rule's trigger words; `warm`: whether the cache holds the index's summaries; `rules`:
    the selected per-file rules (imported when asked).
    """
    if not to_check or len(to_check) >= MIN_FILES_FOR_WORKERS or scope_files < MIN_SCOPE_FILES:
        return None
    if not warm or loaded() or (jobs if jobs is not None else default_jobs()) < 2:
        return None
    unanswered = [path for path in to_check if not answered(path)]
    if not any(wanted(to_check[path]) and _kept_by_a_rule(path, to_check[path], rules(), contract)
               for path in unanswered):
        return None
    pool = ProcessPoolExecutor(max_workers=1)
    pool.submit(_load_checker)
    return HeadStart(pool)


def _kept_by_a_rule(path: str, data: bytes, rules: Sequence[type[Rule]], contract: Contract) -> bool:
    tree = python_tree(data, path)
    if isinstance(tree, Unparsable):
        return False
    return any(_may_flag(rule, data, tree, contract) for rule in rules)


def _may_flag(rule: type[Rule], data: bytes, tree: ast.Module, contract: Contract) -> bool:
    try:
        return rule.may_flag(data, tree, contract, frozenset())
    except Exception:  # noqa: BLE001 - only a guess where to check: the check itself reports the crash
        return False


def _load_checker() -> None:
    load()
    # Imported here: this runs in the worker, which then has the checker and every rule ready.
    from kvlint.running.checker import check_bytes  # noqa: F401
    from kvlint.running.registry import all_rules

    all_rules()
