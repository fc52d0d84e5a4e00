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
