"""A bounded pool through which equal immutable values share one object.

Caches of many documents repeat a few values (cluster names, phases, requirement shapes); holding
one object per distinct value instead of one per document is most of what those caches weigh.
The pool is emptied when full, so values seen once (uids, timestamps) are kept alive by their
documents only, never by the pool for long.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

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


class SharedContainers:
    """A bounded pool of decoded JSON containers (dicts and lists) that hold only values, by their
    content: equal ones in many kept documents become one object. Bindings repeat whole parts —
    conditions, usage readings, a placement on one cluster, labels, a policy reference —, ~half of
    what a decoded Binding weighs. A pooled container is shared between documents: it is read, never
    changed (as every object an informer hands out). Emptied when full, as `SharedValues`."""

    __slots__ = ("_limit", "_containers")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._containers: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._containers)

    def clear(self) -> None:
        self._containers.clear()

    def entries(self) -> list[tuple[Hashable, Any]]:
        """The pooled containers with their keys (a check that none was changed compares the two)."""
        return list(self._containers.items())

    def adder(self) -> Callable[[Hashable, Any], Any]:
        """``add(key, container)``: the pooled container of that content (``container`` when new)."""
        if len(self._containers) >= self._limit:
            self._containers.clear()
        return self._containers.setdefault
