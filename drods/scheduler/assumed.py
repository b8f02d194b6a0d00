"""The S7 assumed load: what this scheduler placed and member status does not show yet.

One (rows, resources) array added to the observed load, plus a record per binding key so a later
``forget(key=...)`` (the status caught up, or the binding moved) takes away exactly what was added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from drods.model.binding import TargetCluster
from drods.scheduler.arrays import FloatArr, IntArr
from drods.scheduler.resources import NRES

PlacementLike = Sequence[TargetCluster] | Sequence[tuple[str, int]]


def names_counts(placement: PlacementLike) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Cluster names and replica counts of a placement given as objects or (cluster, replicas)."""
    if placement and isinstance(placement[0], tuple):
        pairs: Sequence[tuple[str, int]] = placement  # type: ignore[assignment]
        return tuple(c for c, _ in pairs), tuple(int(k) for _, k in pairs)
    objs: Sequence[TargetCluster] = placement  # type: ignore[assignment]
    return tuple(t.cluster for t in objs), tuple(int(t.replicas) for t in objs)


@dataclass(slots=True)
class Assumed:
    """One assumed placement: replicas per cluster of a per-replica demand."""

    names: tuple[str, ...]
    counts: tuple[int, ...]
    req: FloatArr


class AssumedLoad:
    """The assumed load per row and the placements it came from, by binding key."""

    def __init__(self, cap: int, index: Mapping[str, int]) -> None:
        self._index = index  # the snapshot's name → row map (the same dict for its lifetime)
        self.arr = np.zeros((cap, NRES))
        self.records: dict[str, Assumed] = {}

    def grow(self, new: int) -> None:
        b = np.zeros((new, NRES))
        b[: self.arr.shape[0]] = self.arr
        self.arr = b

    def add(self, names: Sequence[str], counts: Sequence[int], req: FloatArr, sign: float) -> IntArr | None:
        """Add (``sign`` 1) or take away (-1, never below 0) ``counts`` replicas of ``req``;
        returns the rows touched (None when none is known)."""
        idx = self._index
        rows: list[int] = []
        cs: list[int] = []
        for name, c in zip(names, counts, strict=True):
            row = idx.get(name)
            if row is None or c == 0:
                continue
            rows.append(row)
            cs.append(c)
        if not rows:
            return None
        r = np.asarray(rows, dtype=np.intp)
        assumed = self.arr
        if len(rows) > 8 and r.size == len(set(rows)):  # many clusters (Duplicated): one array update
            a = assumed[r] + (sign * np.asarray(cs, dtype=np.float64))[:, None] * req
            if sign < 0:
                np.maximum(a, 0.0, out=a)
            assumed[r] = a
        else:  # a few clusters, or one named twice: one row at a time, as given
            for row, c in zip(rows, cs, strict=True):
                a = assumed[row]
                a += (sign * c) * req
                if sign < 0:
                    np.maximum(a, 0.0, out=a)
        return r
