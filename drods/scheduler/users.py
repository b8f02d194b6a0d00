"""Where a workload's users are, as the scheduler sees it: a distribution over client
sites, cities or regions, declared on the placement or learned from CATS steering's demand.
(`user_distance.py` says how far they are from each cluster).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from drods.scheduler.arrays import FloatArr

UsersSource = Literal["declared", "learned", "none"]


@dataclass(frozen=True, slots=True)
class UserShare:
    """One place the users are: ``kind`` is site, city or region; ``share`` sums to 1 over a demand."""

    kind: str
    place: str
    share: float

    def to_dict(self) -> dict[str, object]:
        return {self.kind: self.place, "weight": round(self.share, 4)}


@dataclass(frozen=True, slots=True)
class UserDemand:
    """A workload's users and where that knowledge came from."""

    shares: tuple[UserShare, ...]
    source: UsersSource

    @classmethod
    def of(cls, places: Iterable[tuple[str, str, float]], source: UsersSource) -> UserDemand | None:
        """From (kind, place, weight) triples; None when no weight is positive."""
        rows = [(k, p, float(w)) for k, p, w in places if w > 0]
        total = sum(w for _, _, w in rows)
        if not rows or total <= 0:
            return None
        return cls(tuple(UserShare(k, p, w / total) for k, p, w in rows), source)

    @property
    def weights(self) -> FloatArr:
        return np.asarray([u.share for u in self.shares])

    def to_list(self) -> list[dict[str, object]]:
        return [u.to_dict() for u in self.shares]
