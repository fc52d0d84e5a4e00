"""Pause CPython's cyclic collector over work that makes many objects and no garbage cycles.

Parsing (CPython's tree, LibCST's), summarising and unpickling make hundreds
of thousands of objects, freed by reference counting; with the collector on,
every few hundred of them start a collection that walks those made so far.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextmanager
def made_to_last() -> Iterator[None]:
    """Pause the collector over work whose results live until the run ends, then take everything
    alive out of its walks (`gc.freeze`; `kvlint.running.engine.run` hands it back at its end).

    Otherwise each later collection walks them again, and a worker forked afterwards touches
    their pages: in a cold run over sglang/srt the main process spent 0.9 s in collections,
    most of it while it fed the workers.
    """
    with collector_paused():
        yield
        gc.freeze()
