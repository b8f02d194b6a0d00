"""The reference a policy is measured against: per tick, the lowest peak water level any
placement of the replicas it runs could reach, and the lowest user latency the requested replicas
could have. (Replicas a policy leaves pending are not in its peak bound: they count in pending
replica-minutes instead.)

Both are lower bounds from a fluid relaxation (replicas divisible, nothing else placed first):

* **peak** — water filling over the up, schedulable clusters: the level L at which
  Σ max(0, L − background_c) · capacity_c holds the demand, per resource; the bound is the larger of
  the resources' levels and the highest background (a cluster's own load cannot move);
* **latency** — each user region's replicas at the nearest clusters with room under their
  water-level limit (then up to their full capacity), each region as if it were alone.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import FloatArr


def fluid_level(background: FloatArr, capacity: FloatArr, demand: float) -> float:
    """The level L (fraction of capacity) at which the clusters hold ``demand`` above their
    ``background`` (fractions), filling the lowest first; ``background.max()`` bounds it below."""
    if background.size == 0:
        return float("nan")
    top = float(background.max())
    if demand <= 0:
        return top
    order = np.argsort(background, kind="stable")
    bg, cap = background[order], capacity[order]
    ccap = np.cumsum(cap)
    # water held when the level reaches bg[k]: Σ_{j<k} (bg[k] − bg[j]) · cap[j]
    held = bg * np.concatenate(([0.0], ccap[:-1])) - np.concatenate(([0.0], np.cumsum(bg * cap)[:-1]))
    k = int(np.searchsorted(held, demand, side="right")) - 1  # the last level still below the demand
    level = bg[k] + (demand - held[k]) / ccap[k]
    return max(float(level), top)


def ideal_peak(bg_cpu: FloatArr, bg_mem: FloatArr, cpu: FloatArr, mem: FloatArr, up: np.ndarray,
               demand_cpu: float, demand_mem: float) -> float:
    """The fluid lower bound of the peak water level over the ``up`` clusters."""
    if not up.any():
        return float("nan")
    return max(fluid_level(bg_cpu[up], cpu[up], demand_cpu), fluid_level(bg_mem[up], mem[up], demand_mem))


def nearest_fill(latency: FloatArr, room: FloatArr, capacity: FloatArr, demand: float) -> FloatArr:
    """How much of ``demand`` each cluster holds when it goes to the nearest first: within ``room``
    first, then up to ``capacity`` (what nothing holds stays unplaced)."""
    out = np.zeros(latency.size)
    left = demand
    order = np.argsort(latency, kind="stable")
    for limit in (room, capacity):
        if left <= 0:
            break
        free = np.maximum(limit[order] - out[order], 0.0)
        take = np.minimum(free, np.maximum(left - np.concatenate(([0.0], np.cumsum(free)[:-1])), 0.0))
        out[order] += take
        left -= float(take.sum())
    return out


def ideal_latency_hist(latency: FloatArr, room: FloatArr, capacity: FloatArr, demand_cpu: FloatArr,
                       replicas: FloatArr, bins: FloatArr) -> FloatArr:
    """Replicas per latency bin (``bins``: the distinct latencies) when each user region's demand
    (``demand_cpu[r]`` cores of ``replicas[r]`` replicas) sits at its nearest clusters with room;
    ``latency``: (clusters, regions)."""
    hist = np.zeros(bins.size)
    for r in np.flatnonzero(demand_cpu > 0).tolist():
        held = nearest_fill(latency[:, r], room, capacity, float(demand_cpu[r]))
        idx = np.searchsorted(bins, latency[:, r])
        hist += np.bincount(idx, weights=held * (replicas[r] / demand_cpu[r]), minlength=bins.size)
    return hist


def weighted_p95(bins: FloatArr, hist: FloatArr) -> float:
    """The 95th percentile of values ``bins`` counted ``hist`` times (0 when nothing was counted)."""
    total = float(hist.sum())
    if total <= 0:
        return 0.0
    cum = np.cumsum(hist)
    return float(bins[int(np.searchsorted(cum, 0.95 * total, side="left"))])
