"""A worker that loads LibCST while the main process builds the project index.

A pre-commit run on one large backend spent about 0.25 s on the project index
and then 0.25 s importing LibCST, one after the other, though neither needs
the other: the index reads CPython's trees. When such a run has a second core,
one worker process is started before the index and imports LibCST and the
rules at once, then parses the files it will check as the check would
without the index's helper facts (`kvlint.running.checker.parse_ahead`). The
files are then checked there (`kvlint.running.workers`); where the index's
facts leave the text to parse as it was (most often: they add a word to a
function the rules' own words kept already), the check finds it parsed.

It is started only where it can pay: a few files to check (more start a pool
anyway), in a tree large enough for its index to take longer than starting a
worker, whose index the result cache mostly holds (`warm`), and one of them
holding a selected rule's trigger words. It is let go at once, before the
index, where no rule's `may_flag` keeps one of them, asked without the index's
helper names (a file only they would keep is checked without a head start, as
before): a model file every rule clears never waits on it. That guess imports
the rules here, which is why it is made after the worker started.

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
from kvlint.running.workers import MIN_FILES_FOR_WORKERS, Work, default_jobs

# Below this many files in the run's scope, the index takes less than a worker's start.
MIN_SCOPE_FILES = 200


class HeadStart:
    """The head-start worker's pool, for as long as it is where files are checked."""

    def __init__(self, pool: ProcessPoolExecutor, candidates: Mapping[str, bytes]) -> None:
        self._pool: Optional[ProcessPoolExecutor] = pool
        self._candidates = candidates

    def parse_ahead(
        self,
        rules: Sequence[type[Rule]],
        contract: Contract,
        requests: Callable[[list[str]], list[Work]],
    ) -> bool:
        """Have the worker parse the files some rule's `may_flag` keeps (asked without the index's
        helper names), as their check will; False, and the worker let go, where it keeps none.

        `requests`: the check requests of some of the files, made before the index (so without its
        helper facts). Asked after the worker was started: the rules' import here and the guess take
        place while it loads LibCST.
        """
        kept = [path for path, data in self._candidates.items() if _kept_by_a_rule(path, data, rules, contract)]
        if not kept:
            self.close()
            return False
        assert self._pool is not None
        self._pool.submit(_parse_ahead, requests(kept))
        return True

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
) -> Optional[HeadStart]:
    """A worker already loading LibCST, where checking `to_check` may be worth one.

    `answered`: whether the result cache holds a file's result already; `wanted`: whether bytes hold
    a selected rule's trigger words; `warm`: whether the cache holds the index's summaries.
    """
    if not to_check or len(to_check) >= MIN_FILES_FOR_WORKERS or scope_files < MIN_SCOPE_FILES:
        return None
    if not warm or loaded() or (jobs if jobs is not None else default_jobs()) < 2:
        return None
    candidates = {path: data for path, data in to_check.items() if not answered(path) and wanted(data)}
    if not candidates:
        return None
    pool = ProcessPoolExecutor(max_workers=1)
    pool.submit(_load_checker)
    return HeadStart(pool, candidates)


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


def _parse_ahead(work: list[Work]) -> None:
    # Imported here: the main process never imports the checker (it imports LibCST).
    from kvlint.running.checker import parse_ahead

    for request, data in work:
        parse_ahead(request, data)
