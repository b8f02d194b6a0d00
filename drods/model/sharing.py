"""A bounded pool through which equal immutable values share one object.

Caches of many documents repeat a few values (cluster names, phases, requirement shapes); holding
one object per distinct value instead of one per document is most of what those caches weigh.
The pool is emptied when full, so values seen once (uids, timestamps) are kept alive by their
documents only, never by the pool for long.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class SharedValues(Generic[T]):
    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._values: dict[T, T] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def adder(self) -> Callable[[T, T], T]:
        """``add(v, v)`` returns the pooled object equal to ``v`` (``v`` itself when new); one
        adder serves one document, so the pool is checked for room once, not per value."""
        if len(self._values) >= self._limit:
            self._values.clear()
        return self._values.setdefault

    def share(self, value: T) -> T:
        return self.adder()(value, value)
