"""GPUs by model and storage by tier as consumed capacities (F1, S3): one clusters × keys table each.

A cluster states its offers in its spec (``gpus: [{model, count, relativePerformance}]``,
``storage: [{tier, capacityGiB}]``); a member may report them in its status document, in the same
shape as ``cpu``/``memory``::

    "gpuByModel":    {"A100": {"capacity": 8, "allocatable": 8, "allocated": 3}}
    "storageByTier": {"ssd":  {"capacity": 2000, "allocated": 250}}

Per (cluster, key) the table keeps

* ``capacity``  — the reported ``allocatable`` (else ``capacity``), else the spec's; NaN = unknown
  (a model listed only in ``gpuModels``): such a cell is not enforced;
* ``reported``  — the member's ``allocated``;
* ``assumed``   — what recent decisions added and the member's report does not show yet (S7, the
  same assume/forget as cpu and memory);
* ``placed``    — what every placed binding holds there, for as long as it is placed.

Load = ``reported + assumed`` where the member reports that model / tier, else ``placed`` (a
member that reports no per-model allocation never will, so what DRO-DS placed is all it knows).
Free = capacity − load. A replica needing N GPUs takes them from one model (a pod runs on one
node), so N GPUs of an eligible model fit ``Σ_models floor(free / N)`` replicas; draws take the
slowest eligible model first, keeping faster GPUs for tasks that need them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from drods.model.binding import ReplicaRequirements
from drods.scheduler.arrays import BoolArr, FloatArr, IntArr

EPS = 1e-9
Cell = Literal["assumed", "placed"]  # the two kinds of load a decision adds to a table


@dataclass(frozen=True, slots=True)
class OfferDemand:
    """What one replica consumes of the offer tables: GPUs of an eligible model, GiB of a tier."""

    gpus: int = 0
    gpu_model: str | None = None
    min_gpu_perf: float | None = None
    storage_gib: float = 0.0
    storage_tier: str | None = None

    @property
    def uses_gpus(self) -> bool:
        return self.gpus > 0

    @property
    def uses_tier(self) -> bool:
        return self.storage_tier is not None and self.storage_gib > 0

    @classmethod
    def of(cls, res: ReplicaRequirements | Mapping[str, Any] | None) -> OfferDemand | None:
        """The demand of a replica's requirements (model or spec dict); None when it has none."""
        if res is None:
            return None
        if isinstance(res, ReplicaRequirements):
            gpus, model, perf = res.gpu, res.gpuModel, res.minGpuPerformance
            gib, tier = res.storage, res.storageTier
        else:
            gpus, model, perf = int(res.get("gpu") or 0), res.get("gpuModel"), res.get("minGpuPerformance")
            gib, tier = float(res.get("storage") or 0.0), res.get("storageTier")
        d = cls(gpus, model or None, float(perf) if perf is not None else None, gib, tier or None)
        return d if d.uses_gpus or d.uses_tier else None


Draw = tuple[str, str, float]  # (cluster, key, amount) one placement holds in one table


class OfferTable:
    """One consumed capacity per cluster row and key (GPU model or storage tier)."""

    def __init__(self, rows: int) -> None:
        self.keys: dict[str, int] = {}
        self.key_names: list[str] = []
        self.spec_cap = np.full((rows, 0), np.nan)
        self.perf = np.full((rows, 0), np.nan)
        self.status_cap = np.full((rows, 0), np.nan)
        self.reported = np.zeros((rows, 0))
        self.assumed = np.zeros((rows, 0))
        self.placed = np.zeros((rows, 0))
        self.reports = np.zeros((rows, 0), dtype=bool)  # the member reports this cell
        # derived, kept current cell by cell on every change: what the plugins read
        self.cap = np.full((rows, 0), np.nan)
        self.load = np.zeros((rows, 0))

    _FILLS: tuple[tuple[str, Any], ...] = (("spec_cap", np.nan), ("perf", np.nan), ("status_cap", np.nan),
                                           ("reported", 0.0), ("assumed", 0.0), ("placed", 0.0), ("reports", False),
                                           ("cap", np.nan), ("load", 0.0))

    def column(self, key: str) -> int:
        """The column of ``key``, added on first sight (a new model or tier: rare, one copy)."""
        col = self.keys.get(key)
        if col is None:
            col = len(self.key_names)
            self.keys[key] = col
            self.key_names.append(key)
            for attr, fill in self._FILLS:
                a = getattr(self, attr)
                setattr(self, attr, np.hstack((a, np.full((a.shape[0], 1), fill))))
        return col

    def grow(self, rows: int) -> None:
        for attr, fill in self._FILLS:
            a = getattr(self, attr)
            b = np.full((rows, a.shape[1]), fill)
            b[: a.shape[0]] = a
            setattr(self, attr, b)

    def move(self, dst: int, src: int) -> None:
        for attr, _ in self._FILLS:
            a = getattr(self, attr)
            a[dst] = a[src]

    def clear(self, row: int) -> None:
        for attr, fill in self._FILLS:
            getattr(self, attr)[row] = fill

    def set_spec(self, row: int, offers: Sequence[tuple[str, float, float]]) -> None:
        """The spec's offers of one row: (key, capacity, relative performance)."""
        self.spec_cap[row] = np.nan
        self.perf[row] = np.nan
        for key, cap, perf in offers:
            col = self.column(key)
            prev = self.spec_cap[row, col]
            self.spec_cap[row, col] = cap if math.isnan(prev) else prev + cap
            self.perf[row, col] = perf if math.isnan(self.perf[row, col]) else max(perf, self.perf[row, col])
        self._refresh(row)

    def set_status(self, row: int, section: Any) -> None:
        """The member's report of one row (``{key: {capacity, allocatable, allocated}}``), or none."""
        self.status_cap[row] = np.nan
        self.reported[row] = 0.0
        self.reports[row] = False
        if isinstance(section, Mapping):
            self._read_status(row, section)
        self._refresh(row)

    def _read_status(self, row: int, section: Mapping[Any, Any]) -> None:
        for key, leaf in section.items():
            if not isinstance(key, str) or not isinstance(leaf, Mapping):
                continue
            cap = _num(leaf.get("allocatable"))
            if cap is None:
                cap = _num(leaf.get("capacity"))
            used = _num(leaf.get("allocated"))
            if cap is None and used is None:
                continue
            col = self.column(key)
            if cap is not None:
                self.status_cap[row, col] = cap
            self.reported[row, col] = used or 0.0
            self.reports[row, col] = True

    def _refresh(self, row: int, col: Any = slice(None)) -> None:
        sc = self.status_cap[row, col]
        self.cap[row, col] = np.where(np.isnan(sc), self.spec_cap[row, col], sc)
        self.load[row, col] = np.where(self.reports[row, col], self.reported[row, col] + self.assumed[row, col],
                                       self.placed[row, col])

    def capacity(self, n: int) -> FloatArr:
        return self.cap[:n]

    def free(self, n: int, which: Cell | None = None) -> FloatArr:
        """(n, keys) free amount; NaN where the capacity is unknown."""
        return self.free_at(np.s_[:n], which)

    def capacity_at(self, idx: Any) -> FloatArr:
        """Capacity of the cells ``idx`` selects (any NumPy index into rows × keys)."""
        return self.cap[idx]  # type: ignore[no-any-return]

    def free_at(self, idx: Any, which: Cell | None = None) -> FloatArr:
        """Free amount of the cells ``idx`` selects. ``which`` = "placed" or "assumed": free as that
        cell kind alone sees it (where a draw of that kind goes)."""
        cap = self.cap[idx]
        if which == "placed":
            return cap - self.placed[idx]  # type: ignore[no-any-return]
        if which == "assumed":
            return cap - self.reported[idx] - self.assumed[idx]  # type: ignore[no-any-return]
        return cap - self.load[idx]  # type: ignore[no-any-return]

    def add(self, which: Cell, row: int, key: str, amount: float) -> None:
        """Add ``amount`` to the ``assumed`` or ``placed`` cell (never below 0)."""
        col = self.column(key)  # may replace the arrays: pick one after it
        a = self.assumed if which == "assumed" else self.placed
        a[row, col] = max(0.0, a[row, col] + amount)
        self._refresh(row, col)


def gpu_columns(table: OfferTable, demand: OfferDemand) -> list[int]:
    """The models a replica may use at all: the named one, else every model."""
    if demand.gpu_model is None:
        return list(range(len(table.key_names)))
    col = table.keys.get(demand.gpu_model)
    return [] if col is None else [col]


def _index(n: int, rows: IntArr | None, cols: list[int]) -> Any:
    return np.s_[:n, cols] if rows is None else np.ix_(rows, np.asarray(cols, dtype=np.intp))


def gpu_eligible(table: OfferTable, demand: OfferDemand, n: int, rows: IntArr | None = None,
                 cols: list[int] | None = None) -> BoolArr:
    """(rows, cols) the models a replica may use on each cluster, where their count is known."""
    cols = gpu_columns(table, demand) if cols is None else cols
    idx = _index(n, rows, cols)
    ok = ~np.isnan(table.capacity_at(idx))
    if demand.min_gpu_perf is not None:
        ok &= table.perf[idx] >= demand.min_gpu_perf  # NaN (no performance stated) fails
    return ok  # type: ignore[no-any-return]


def gpu_fit(table: OfferTable, demand: OfferDemand, n: int) -> tuple[FloatArr, FloatArr]:
    """Replicas that fit per cluster (inf where no eligible count is known) and the free GPUs of
    the eligible models."""
    cols = gpu_columns(table, demand)
    if not cols:
        inf = np.full(n, np.inf)
        return inf, inf
    if len(cols) == 1:  # a named model: one column, 1-D arithmetic
        c = cols[0]
        cap1 = table.cap[:n, c]
        ok = ~np.isnan(cap1)
        if demand.min_gpu_perf is not None:
            ok &= table.perf[:n, c] >= demand.min_gpu_perf
        free1 = np.where(ok, np.maximum(cap1 - table.load[:n, c], 0.0), np.inf)
        return np.floor(free1 / demand.gpus + EPS), free1
    every = len(cols) == len(table.key_names)
    sel: Any = np.s_[:n] if every else np.s_[:n, cols]  # every model: views, no copies
    cap = table.cap[sel]
    elig = ~np.isnan(cap)
    if demand.min_gpu_perf is not None:
        elig &= table.perf[sel] >= demand.min_gpu_perf  # NaN (no performance stated) fails
    free = np.where(elig, np.maximum(cap - table.load[sel], 0.0), 0.0)
    ones = np.ones(cap.shape[1])  # sums over the few models as a matrix-vector product: a row-wise
    fit = np.floor(free / demand.gpus + EPS) @ ones  # reduction over a short axis is ~5x slower
    known = elig.astype(np.float64) @ ones > 0
    return np.where(known, fit, np.inf), np.where(known, free @ ones, np.inf)


def tier_fit(table: OfferTable, demand: OfferDemand, n: int) -> tuple[FloatArr, FloatArr]:
    """Replicas that fit per cluster on the task's tier (inf where its capacity is unknown), and the
    tier's free GiB."""
    col = table.keys.get(demand.storage_tier or "")
    if col is None:
        inf = np.full(n, np.inf)
        return inf, inf
    free = table.cap[:n, col] - table.load[:n, col]
    free = np.where(np.isnan(free), np.inf, np.maximum(free, 0.0))
    return np.floor(free / demand.storage_gib + EPS), free


def draw_gpus(table: OfferTable, demand: OfferDemand, row: int, n: int, replicas: int,
              which: Cell | None = None) -> list[tuple[str, float]]:
    """GPUs ``replicas`` replicas take on cluster ``row``, model by model, slowest eligible first
    (free as the ``which`` cells see it); what no model holds goes to the last eligible one (the
    decision outran the counts)."""
    cols = np.asarray(gpu_columns(table, demand), dtype=np.intp)
    if cols.size == 0:
        return []
    cols = cols[gpu_eligible(table, demand, n, np.array([row]), cols.tolist())[0]]
    if cols.size == 0:
        return []
    cols = cols[np.argsort(np.nan_to_num(table.perf[row, cols], nan=np.inf), kind="stable")]
    free = np.maximum(table.free_at((row, cols), which), 0.0)
    out: list[tuple[str, float]] = []
    left = replicas
    for i, col in enumerate(cols.tolist()):
        take = left if i == cols.size - 1 else min(left, int(free[i] / demand.gpus + EPS))
        if take > 0:
            out.append((table.key_names[col], float(take * demand.gpus)))
            left -= take
        if left <= 0:
            break
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None
