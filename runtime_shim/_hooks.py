"""State shared by the pools, the paged helpers and `kv_layout_guard`.

Kept apart so that `pool` and `paged` can tell an active guard about a new
pool, an unmarked write or a trusted internal op without importing `guard`
(which needs neither of them).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, List, Protocol


class GuardListener(Protocol):
    def on_pool_created(self, pool: Any) -> None: ...

    def on_unmarked_write(self, pool: Any, door: str, layer_id: int, loc_info: Any) -> None: ...

    def on_write_index(self, pool: Any, door: str, layer_id: int, loc: Any) -> None: ...


class _State(threading.local):
    def __init__(self) -> None:
        # TorchFunctionMode is per thread, so the guards that see a pool's
        # creation and the trusted-op depth are per thread as well.
        self.active: List[GuardListener] = []
        self.trusted_depth = 0


STATE = _State()


@contextmanager
def trusted() -> Iterator[None]:
    """Ops inside are the shim's own (paged helpers, pool internals): never flagged."""
    STATE.trusted_depth += 1
    try:
        yield
    finally:
        STATE.trusted_depth -= 1


def announce_pool(pool: Any) -> None:
    for guard in STATE.active:
        guard.on_pool_created(pool)


def report_unmarked_write(pool: Any, door: str, layer_id: int, loc_info: Any) -> None:
    for guard in STATE.active:
        guard.on_unmarked_write(pool, door, layer_id, loc_info)


def report_write_index(pool: Any, door: str, layer_id: int, loc: Any) -> None:
    for guard in STATE.active:
        guard.on_write_index(pool, door, layer_id, loc)
