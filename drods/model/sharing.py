"""A bounded pool through which equal immutable values share one object.

Caches of many documents repeat a few values (cluster names, phases, requirement shapes) and whole
parts (conditions, a placement on one cluster, labels); holding one object per distinct value instead
of one per document is most of what those caches weigh. The pool is emptied when full, so values seen
once (uids, timestamps) are kept alive by their documents only, never by the pool for long.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T", bound=Hashable)


class SharedPool(Generic[K, V]):
    """Pooled values by key: the value itself when it is hashable (``SharedPool[str, str]``), or a
    key standing for its content (a decoded JSON container by its JSON). A pooled value is shared
    between its holders: read, never changed."""

    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._values: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def clear(self) -> None:
        self._values.clear()

    def entries(self) -> list[tuple[K, V]]:
        """The pooled values with their keys (a check that none was changed compares the two)."""
        return list(self._values.items())

    def adder(self) -> Callable[[K, V], V]:
        """``add(key, value)`` returns the pooled value of that key (``value`` itself when new); one
        adder serves one document, so the pool is checked for room once, not per value."""
        if len(self._values) >= self._limit:
            self._values.clear()
        return self._values.setdefault

    def share(self: SharedPool[T, T], value: T) -> T:
        return self.adder()(value, value)
