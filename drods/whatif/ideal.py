"""The reference a policy is measured against: per tick, the lowest peak water level any
placement of the replicas it runs could reach, and the lowest user latency the requested replicas
could have. (Replicas a policy leaves pending are not in its peak bound: they count in pending
replica-minutes instead.)

Both are lower bounds from a fluid relaxation (replicas divisible, nothing else placed first):

* **peak** — water filling over the up, schedulable clusters: the level L at which
  Σ max(0, L − background_c) · capacity_c holds the demand, per resource; the bound is the larger of
  the resources' levels and the highest background (a cluster's own load cannot move);
* **peak within the latency SLO** — for a policy bound by the users' latency SLO (the default, which
  knows the users): the same filling where each user region's replicas may use only the clusters
  within the SLO of it, as long as that level stays under the water-level limit (past it the SLO
  gives way: the policy's own rule); the replicas it runs beyond the SLO at that tick (the SLO gave
  way there: their region down, or no room within it) may go anywhere, so the bound holds for the
  placement measured;
* **latency** — each user region's replicas at the nearest clusters with room under their
  water-level limit (then up to their full capacity), each region as if it were alone.

And one test of the demand itself (`fits_under_limits`): whether the replicas requested fit under the
water-level limits with room for packing whole replicas (every cluster short of its limit by one
of the largest replicas requested) — when they do not, the fleet is full: pending replicas then
are the price of holding the limit, and the report says so.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import FloatArr
from drods.scheduler.waterfill import fluid_level

__all__ = ["fits_under_limits", "fluid_level", "ideal_latency_hist", "ideal_peak", "ideal_peak_within_slo",
           "nearest_fill", "weighted_p95"]


def ideal_peak(bg_cpu: FloatArr, bg_mem: FloatArr, cpu: FloatArr, mem: FloatArr, up: np.ndarray,
               demand_cpu: float, demand_mem: float) -> float:
    """The fluid lower bound of the peak water level over the ``up`` clusters."""
    if not up.any():
        return float("nan")
    return max(fluid_level(bg_cpu[up], cpu[up], demand_cpu), fluid_level(bg_mem[up], mem[up], demand_mem))


def fits_under_limits(bg_cpu: FloatArr, bg_mem: FloatArr, cpu: FloatArr, mem: FloatArr, up: np.ndarray,
                      limits: FloatArr, demand_cpu: float, demand_mem: float, replica_cpu: float = 0.0,
                      replica_mem: float = 0.0) -> bool:
    """Does ``demand`` (cores, GiB) fit on the ``up`` clusters with each filled no higher than its
    limit less one replica of (``replica_cpu``, ``replica_mem``)? Whole replicas fill a cluster to
    within one replica of its limit whatever their order, so with the largest replica requested this
    is the room the demand surely has; with zero, the fluid bound (Σ max(0, limit − background) ·
    capacity holds it, per resource)."""
    room_cpu = float(np.maximum((limits - bg_cpu) * cpu - replica_cpu, 0.0)[up].sum())
    room_mem = float(np.maximum((limits - bg_mem) * mem - replica_mem, 0.0)[up].sum())
    return demand_cpu <= room_cpu * (1 + 1e-9) and demand_mem <= room_mem * (1 + 1e-9)


MAX_HALL_PLACES = 12  # beyond this many user places, only each place alone and all together are checked


def place_sets(k: int) -> list[np.ndarray]:
    """The sets of user places whose joint demand is checked: every non-empty subset up to
    ``MAX_HALL_PLACES`` places, else each place alone and all of them (fewer checks: a weaker but
    still valid bound)."""
    if k <= MAX_HALL_PLACES:
        bits = np.arange(1, 2**k)[:, None] >> np.arange(k) & 1
        return [np.flatnonzero(b) for b in bits]
    return [np.array([r]) for r in range(k)] + [np.arange(k)]


def slo_level(background: FloatArr, capacity: FloatArr, demand: FloatArr, eligible: np.ndarray,
              anywhere: float = 0.0) -> float:
    """The lowest level at which each user place's ``demand`` fits on the clusters ``eligible`` for it
    (clusters × places), and ``anywhere`` more on any cluster. By Hall's theorem a fluid placement exists
    at level L iff every set S of places fits on the clusters eligible for any of S, so the bound is the
    highest of those sets' own fluid levels (a set with ``anywhere`` in it may use every cluster: of
    those, the set of all of them is the highest); a place with demand and no eligible cluster makes it
    infinite."""
    want = np.flatnonzero(demand > 0)
    level = float(background.max()) if background.size else float("nan")
    if anywhere > 0:
        level = max(level, fluid_level(background, capacity, float(demand.sum()) + anywhere))
    for sub in place_sets(want.size):
        places = want[sub]
        rows = eligible[:, places].any(axis=1)
        if not rows.any():
            return float("inf")
        level = max(level, fluid_level(background[rows], capacity[rows], float(demand[places].sum())))
    return level


def ideal_peak_within_slo(bg_cpu: FloatArr, bg_mem: FloatArr, cpu: FloatArr, mem: FloatArr, up: np.ndarray,
                          demand_cpu: FloatArr, demand_mem: FloatArr, within: np.ndarray, limit: float, *,
                          beyond_cpu: float = 0.0, beyond_mem: float = 0.0) -> float:
    """The fluid lower bound of the peak for a policy bound by a latency SLO that gives way to room:
    each user region's requests (``demand_*[r]``) on the ``up`` clusters ``within`` (clusters × regions)
    its SLO while that stays at or under ``limit``, and ``beyond_*`` (what runs beyond the SLO now) on
    any; past the limit the SLO gives way, and the bound is the unconstrained one, never below ``limit``
    (the clusters within the SLO fill to it first)."""
    if not up.any():
        return float("nan")
    near = within[up]
    bound = max(slo_level(bg_cpu[up], cpu[up], demand_cpu, near, beyond_cpu),
                slo_level(bg_mem[up], mem[up], demand_mem, near, beyond_mem))
    if bound <= limit:
        return bound
    free = ideal_peak(bg_cpu, bg_mem, cpu, mem, up, float(demand_cpu.sum()) + beyond_cpu,
                      float(demand_mem.sum()) + beyond_mem)
    return min(bound, max(free, limit))


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
