"""The peak-shaving rebalance: the decision, shared by the descheduler and the what-if simulator.

Replicas are placed where the water level is low when they are placed; the background load of a
cluster then follows its day and rises under them. An evacuation waits for a sustained breach of
the limit; below it nothing would move. This decision moves the fewest replicas off a cluster that
stands above the level the fleet could reach:

* the **achievable level** is the fluid fill level (`drods.scheduler.waterfill.fluid_level`) of
  the divisible workloads' replicas on top of the clusters' backgrounds (water level minus those
  replicas' share), as if replicas were divisible: over the whole open fleet (the **target** a
  cluster is shaved to, never below its own background) and over the clusters a hot cluster's
  workloads may use (the **ceiling** a receiving cluster may reach, + ``margin``) — so replicas of
  workloads whose users are elsewhere leave for clusters farther off, making room for those bound
  to the cluster by their latency SLO;
* a cluster is **hot** while its water level is above the target + ``margin``; once hot for the
  damping window (`PeakWatch`) it is shaved;
* **shaving** moves one replica at a time — the one whose departure lowers the cluster most — to
  the allowed cluster nearest the workload's users (with or without a latency SLO; one of unknown
  latency last), then lowest after receiving it, only while that
  cluster stays at or under its limit less ``headroom`` (one at its limit is a noise step from a
  breach), under the source's new level and under the ceiling, and never
  beyond a workload's latency SLO (a cluster of unknown latency counts as beyond it). It stops at
  the target, when no move pays or when the move budget is spent; a plan that lowers the cluster by
  less than ``min_gain`` is dropped (the move would cost more than it gains). A workload that a plan of the
  same pass moved already is left to a later pass (its Binding carries one plan's moves).
* **returning** (`homeward`): a shave sends replicas away from their users when their own clusters
  are the hot ones, and nothing else brings them back. A replica on a cluster at least
  ``min_gain_ms`` farther from its workload's users than an allowed cluster nearer them goes to the
  nearest such cluster (then the lowest) while that one stays at or under the fleet's fill level
  (`fleet_level`: the water's own, not raised to the highest background) − ``margin`` and its limit:
  at least twice the margin below the level at which a cluster is hot, so a returned replica is not
  shaved away again at once; and only to a cluster that has stood there for the damping window
  (`PeakWatch` again), so a passing dip moves nothing.

Pure NumPy over per-cluster arrays; time is passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from drods.model.annotations import PEAK_SHAVE
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.waterfill import fluid_level

EPS = 1e-9  # levels equal within rounding are equal


@dataclass(frozen=True, slots=True)
class Capacity:
    """Allocatable cores and GiB per cluster (positive)."""

    cpu: FloatArr
    memory: FloatArr


@dataclass(slots=True)
class Holding:
    """A divisible workload's replicas, as the decision sees them."""

    name: str
    placement: dict[int, int]  # cluster index → replicas
    cpu: float  # cores per replica (the fluid fill's unit)
    memory: float  # GiB per replica
    allowed: BoolArr  # clusters its placement policy allows
    latency: FloatArr | None = None  # ms from its users to each cluster (NaN: unknown); None: no users
    slo_ms: float | None = None  # its latency SLO (None: none)
    ok: BoolArr | None = None  # `targets`, once computed

    def step(self, fleet: Capacity) -> FloatArr:
        """The water level one replica adds to each cluster (the larger of its two shares)."""
        return np.maximum(self.cpu / fleet.cpu, self.memory / fleet.memory)

    def targets(self) -> BoolArr:
        """Clusters a replica may move to: allowed, and within the SLO when the workload has one
        (computed once: a pass asks many times)."""
        if self.ok is None:
            self.ok = self.allowed.copy()
            if self.slo_ms is not None and self.latency is not None:
                self.ok &= np.nan_to_num(self.latency, nan=np.inf) <= self.slo_ms
        return self.ok


@dataclass(frozen=True, slots=True)
class ShaveMove:
    workload: str
    source: int
    target: int
    replicas: int


@dataclass(frozen=True, slots=True)
class Shave:
    """One hot cluster's plan: its level before and after, the achievable level, the moves, and
    each receiving cluster's level before and after."""

    cluster: int
    before: float
    after: float
    achievable: float
    moves: tuple[ShaveMove, ...]
    targets: dict[int, tuple[float, float]]
    placements: dict[str, dict[int, int]]  # workload → its placement after the moves
    # "return": ``cluster`` received replicas back near their users (`homeward`); ``targets`` are
    # then the clusters they left
    kind: Literal["shave", "return"] = "shave"
    hot_since: float | None = None  # a shave: since when its cluster had been hot
    severe: bool = False  # a shave due after the shorter window: far above what its replicas could reach

    @property
    def replicas(self) -> int:
        return sum(m.replicas for m in self.moves)

    def reason(self, cluster: str) -> str:
        """Why (the decision's reason): the levels before and after, and the level the fleet could reach."""
        if self.kind == "return":
            return (f"{PEAK_SHAVE} {cluster}: {self.replicas} replica(s) back near their users from "
                    f"{len(self.targets)} cluster(s); water level {self.before:.3f} to {self.after:.3f}, "
                    f"under the achievable {self.achievable:.3f}")
        return (f"{PEAK_SHAVE} {cluster}: water level {self.before:.3f} above the achievable {self.achievable:.3f}; "
                f"{self.replicas} replica(s) to {len(self.targets)} cluster(s) bring it to {self.after:.3f}")

    def as_json(self, names: Sequence[str]) -> dict[str, Any]:
        """The decision record's ``details``: why, the levels before and after, where each replica went."""
        return {"waterLevelBefore": round(self.before, 4), "waterLevelAfter": round(self.after, 4),
                "achievableLevel": round(self.achievable, 4), "replicas": self.replicas,
                "moves": [{"binding": m.workload, "from": names[m.source], "to": names[m.target],
                           "replicas": m.replicas} for m in self.moves],
                "kind": self.kind,
                **({"hotSince": self.hot_since} if self.hot_since is not None else {}),
                **({"severe": True} if self.severe else {}),
                ("sources" if self.kind == "return" else "targets"):
                    {names[t]: {"waterLevelBefore": round(b, 4), "waterLevelAfter": round(a, 4)}
                     for t, (b, a) in sorted(self.targets.items())}}


def movable_level(holdings: Sequence[Holding], capacity: FloatArr) -> FloatArr:
    """The water level the holdings' replicas make up on each cluster (cores over capacity)."""
    cores = np.zeros(capacity.size)
    for h in holdings:
        for c, k in h.placement.items():
            cores[c] += k * h.cpu
    return cores / np.maximum(capacity, 1e-9)


def achievable_level(levels: FloatArr, capacity: FloatArr, movable: FloatArr, among: BoolArr, *,
                     at_least_top: bool = True) -> float:
    """The fluid fill level of the movable load over the clusters ``among`` (each keeps its background)."""
    if not among.any():
        return float("nan")
    bg = np.maximum(levels[among] - movable[among], 0.0)
    return fluid_level(bg, capacity[among], float((movable[among] * capacity[among]).sum()), at_least_top=at_least_top)


@dataclass(frozen=True, slots=True)
class Hot:
    """A hot cluster's goal: shave down to ``target``, filling others no higher than ``ceiling``."""

    target: float  # the fleet's achievable level, never below the cluster's own background
    ceiling: float  # the achievable level over the clusters its workloads may use (+ margin)
    reachable: float = 0.0  # the highest of the two achievable levels: as low as its replicas can go

    def excess(self, level: float) -> float:
        """How far ``level`` stands above what its replicas could reach: far above it, the level is no
        passing noise, and there is room for them (a region whose users may not leave it is not)."""
        return level - max(self.target, self.reachable)


def hot_clusters(levels: FloatArr, capacity: FloatArr, open_: BoolArr, holdings: Sequence[Holding],
                 margin: float) -> dict[int, Hot]:
    """Clusters above the fleet's achievable level (never below their own background) + ``margin``.
    Its replicas go no higher than the achievable level over the open clusters its workloads may use
    (itself included) + ``margin``: replicas of workloads whose users are elsewhere may leave for
    clusters farther off, making room for the ones bound to it by their SLO."""
    n = levels.size
    known = ~np.isnan(levels)
    movable = movable_level(holdings, capacity)
    fleet = achievable_level(levels, capacity, movable, open_ & known)
    out: dict[int, Hot] = {}
    if np.isnan(fleet):
        return out
    on: dict[int, list[Holding]] = {}
    for h in holdings:
        for c, k in h.placement.items():
            if k > 0:
                on.setdefault(c, []).append(h)
    for c in np.flatnonzero(known & (np.nan_to_num(levels) > fleet + margin)).tolist():
        target = max(fleet, float(levels[c] - movable[c]))
        if c not in on or levels[c] <= target + margin:
            continue
        among = np.zeros(n, dtype=bool)
        for h in on[c]:
            among |= h.targets()
        among = (among & open_ & known)
        among[c] = True
        reachable = max(achievable_level(levels, capacity, movable, among), fleet)
        out[c] = Hot(target, reachable + margin, reachable)
    return out


@dataclass(slots=True)
class _Step:
    relief: float
    after: float
    holding: Holding
    target: int


def _best_step(c: int, levels: FloatArr, limits: FloatArr, open_: BoolArr, ceiling: float,
               holdings: Sequence[tuple[Holding, FloatArr, BoolArr]],
               placements: dict[str, dict[int, int]]) -> _Step | None:
    """The one replica move off ``c`` that lowers it most, to the allowed cluster lowest after it;
    ``holdings`` come largest relief first, so the first that can move (and its equals) decide."""
    best: _Step | None = None
    room = open_ & (levels <= ceiling + EPS)
    for h, step, targets in holdings:
        relief = float(step[c])
        if best is not None and relief < best.relief - EPS:
            break
        if placements[h.name].get(c, 0) <= 0:
            continue
        after = levels + step
        ok = targets & room & (after <= limits + EPS) & (after <= levels[c] - relief + EPS) & (after <= ceiling + EPS)
        ok[c] = False
        if not ok.any():
            continue
        if h.latency is not None:  # nearest the users first (unknown last), then the lowest
            lat = np.where(ok, np.nan_to_num(h.latency, nan=np.inf), np.inf)
            ok &= lat <= lat.min()
        t = int(np.argmin(np.where(ok, after, np.inf)))
        if best is None or float(after[t]) < best.after:
            best = _Step(relief, float(after[t]), h, t)
    return best


def shave(c: int, hot: Hot, levels: FloatArr, limits: FloatArr, open_: BoolArr, fleet: Capacity,
          holdings: Sequence[Holding], *, min_gain: float, budget: int, headroom: float = 0.0,
          leave: Collection[str] = ()) -> Shave | None:
    """The fewest replica moves that bring cluster ``c`` towards ``hot.target`` (module docstring);
    ``levels`` is updated in place when a plan is returned. None: no move pays. Workloads named in
    ``leave`` stay (a plan of this pass moves them already: a Binding carries one plan's moves)."""
    achievable, ceiling = hot.target, hot.ceiling
    on = sorted(((h, h.step(fleet), h.targets()) for h in holdings
                 if h.placement.get(c, 0) > 0 and h.name not in leave),
                key=lambda x: (-float(x[1][c]), x[0].name))
    placements = {h.name: dict(h.placement) for h, _, _ in on}
    limits = limits - headroom
    work = levels.copy()
    before = float(work[c])
    moves: dict[tuple[str, int], int] = {}
    touched: dict[int, float] = {}
    while work[c] > achievable + EPS and sum(moves.values()) < budget:
        step = _best_step(c, work, limits, open_, ceiling, on, placements)
        if step is None:
            break
        h, t = step.holding, step.target
        touched.setdefault(t, float(work[t]))
        work[c] -= step.relief
        work[t] = step.after
        p = placements[h.name]
        p[c] -= 1
        p[t] = p.get(t, 0) + 1
        moves[(h.name, t)] = moves.get((h.name, t), 0) + 1
    if not moves or before - float(work[c]) < min_gain:
        return None
    levels[:] = work
    return Shave(c, before, float(work[c]), achievable,
                 tuple(ShaveMove(name, c, t, k) for (name, t), k in sorted(moves.items())),
                 {t: (b, float(work[t])) for t, b in touched.items()},
                 {name: {k: v for k, v in p.items() if v > 0} for name, p in placements.items()
                  if any(m == name for m, _ in moves)})


def fleet_level(levels: FloatArr, capacity: FloatArr, open_: BoolArr, holdings: Sequence[Holding]) -> float:
    """The level of the holdings' replicas filled over the open clusters measured — the water's own,
    not raised to the highest background (a cluster whose own load stands above it makes no room
    elsewhere): the level under which replicas return."""
    return achievable_level(levels, capacity, movable_level(holdings, capacity), open_ & ~np.isnan(levels),
                            at_least_top=False)


def with_room(levels: FloatArr, level: float, margin: float) -> BoolArr:
    """Clusters at or under the achievable level − ``margin``: where replicas may return."""
    return np.nan_to_num(levels, nan=np.inf) <= level - margin + EPS


def room_for_returns(watch: PeakWatch, names: Sequence[str], levels: FloatArr, open_: BoolArr, level: float,
                     margin: float, now: float) -> BoolArr:
    """The open clusters that have had room (`with_room`) for the watch's damping window in a row."""
    room = open_ & with_room(levels, level, margin)
    due = set(watch.observe({names[c] for c in np.flatnonzero(room).tolist()}, now))
    return np.fromiter((n in due for n in names), dtype=bool, count=len(names))


def homeward(levels: FloatArr, limits: FloatArr, receivers: BoolArr, fleet: Capacity, holdings: Sequence[Holding],
             *, level: float, margin: float, min_gain_ms: float, budget: int) -> list[Shave]:
    """Replicas back near their users where there is room (module docstring), only to ``receivers``
    (open clusters that have had room for the damping window), one plan per receiving cluster; a
    workload's replicas go to one cluster a pass (its Binding carries one plan's moves). ``levels``
    is updated in place. Workloads of one users' demand, placement policy or replica size share what
    is worked out for them (the callers share those arrays): a workload with nothing to return, or too
    large for the room left anywhere, costs O(1)."""
    rows = np.flatnonzero(receivers & ~np.isnan(levels))
    if np.isnan(level) or budget <= 0 or rows.size == 0:
        return []
    row_of = np.full(levels.size, -1)
    row_of[rows] = np.arange(rows.size)
    work = levels.copy()
    free = np.minimum(limits[rows], level - margin) + EPS - work[rows]  # each receiver's room (level)
    room = float(free.max())
    nearest: dict[tuple[int, int, float | None], tuple[FloatArr, float]] = {}
    sizes: dict[tuple[float, float], tuple[FloatArr, float]] = {}
    moves: dict[int, dict[tuple[str, int], int]] = {}  # receiver → (workload, source) → replicas
    after: dict[str, dict[int, int]] = {}
    left: dict[int, float] = {}  # each source's level before
    came: dict[int, float] = {}  # each receiver's level before
    for h in sorted(holdings, key=lambda h: h.name):
        ms = h.latency
        if ms is None or budget <= 0:
            continue
        if (near_best := nearest.get(key := (id(ms), id(h.allowed), h.slo_ms))) is None:
            # each receiver's latency from the users, where the workload may go (policy and SLO)
            near = np.where(h.allowed[rows], np.nan_to_num(ms[rows], nan=np.inf), np.inf)
            if h.slo_ms is not None:
                near[near > h.slo_ms] = np.inf
            near_best = nearest[key] = (near, float(near.min()))
        near, best = near_best
        far = sorted((c for c, k in h.placement.items() if k > 0 and float(ms[c]) - min_gain_ms >= best),
                     key=lambda c: (-float(ms[c]), c))  # NaN (unknown where it is) compares false: stays
        if not far:
            continue
        if (size := sizes.get((h.cpu, h.memory))) is None:
            step = np.maximum(h.cpu / fleet.cpu[rows], h.memory / fleet.memory[rows])
            size = sizes[(h.cpu, h.memory)] = (step, float(step.min()))
        step, smallest = size
        if smallest > room:
            continue
        p = dict(h.placement)
        to: int | None = None  # the receiver, as an index into ``rows``
        for c in far:
            while p.get(c, 0) > 0 and budget > 0:
                fits = (near <= float(ms[c]) - min_gain_ms) & (step <= free) & (rows != c)
                if to is None:
                    if not fits.any():
                        break
                    lat = np.where(fits, near, np.inf)
                    to = int(np.argmin(np.where(fits & (lat <= lat.min()), work[rows], np.inf)))
                elif not fits[to]:
                    break
                t = int(rows[to])
                gone = max(h.cpu / float(fleet.cpu[c]), h.memory / float(fleet.memory[c]))
                left.setdefault(c, float(work[c]))
                came.setdefault(t, float(work[t]))
                work[c] -= gone
                work[t] += step[to]
                free[to] -= step[to]
                if row_of[c] >= 0:
                    free[row_of[c]] += gone
                room = float(free.max())
                p[c] -= 1
                p[t] = p.get(t, 0) + 1
                by = moves.setdefault(t, {})
                by[(h.name, c)] = by.get((h.name, c), 0) + 1
                budget -= 1
        if to is not None:
            after[h.name] = {k: v for k, v in p.items() if v > 0}
    levels[:] = work
    plans = []
    for t, by in sorted(moves.items()):
        sources = sorted({c for _, c in by})
        plans.append(Shave(t, came[t], float(work[t]), level,
                           tuple(ShaveMove(name, c, t, k) for (name, c), k in sorted(by.items())),
                           {c: (left[c], float(work[c])) for c in sources},
                           {name: after[name] for name in sorted({n for n, _ in by})}, kind="return"))
    return plans


def returns(watch: PeakWatch, names: Sequence[str], levels: FloatArr, limits: FloatArr, open_: BoolArr,
            fleet: Capacity, holdings: Sequence[Holding], *, leave: Collection[str], margin: float,
            min_gain_ms: float, budget: int, now: float, headroom: float = 0.0) -> list[Shave]:
    """A pass's returns: the fill level of every holding's replicas, the clusters that have had room
    under it for the watch's window, and `homeward` for the holdings not named in ``leave`` (those
    the pass just shaved). A cluster that receives waits another window before it receives again:
    the levels the next pass reads may not show the replicas it took yet."""
    level = fleet_level(levels, fleet.cpu, open_, holdings)
    receivers = room_for_returns(watch, names, levels, open_, level, margin, now)
    plans = homeward(levels, limits - headroom, receivers, fleet, [h for h in holdings if h.name not in leave],
                     level=level, margin=margin, min_gain_ms=min_gain_ms, budget=budget)
    for plan in plans:
        watch.shaved(names[plan.cluster], now)
    return plans


@dataclass(slots=True)
class PeakWatch:
    """Which clusters have stood hot (or, for returns, had room) for the damping window (pure; time
    passed in)."""

    after_s: float
    hot_since: dict[str, float] = field(default_factory=dict)

    def observe(self, hot: set[str], now: float) -> list[str]:
        """Record which clusters are hot now; those hot for ``after_s`` in a row, hottest first is the
        caller's order."""
        for c in list(self.hot_since):
            if c not in hot:
                del self.hot_since[c]
        for c in hot:
            self.hot_since.setdefault(c, now)
        return sorted(c for c, since in self.hot_since.items() if now - since >= self.after_s)

    def shaved(self, cluster: str, now: float) -> None:
        """A shave was decided: the window starts again, so a cluster is shaved once per window."""
        self.hot_since[cluster] = now
