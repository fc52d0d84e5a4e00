"""The last few answers computed for objects, found again by identity, not equality.

For values that are costly to hash or compare (a contract with thousands of entries, a class's
syntax tree) and asked about again and again while one of them is in use: the objects are held,
so an id is never reused while its answer is kept.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._held: list[tuple[K, V]] = []

    def get(self, key: K, build: Callable[[], V]) -> V:
        for held, answer in self._held:
            if held is key:
                return answer
        answer = build()
        self._held.insert(0, (key, answer))
        del self._held[self._size:]
        return answer
