"""The discrete-event loop of ``drods simulate``: simulated time, the real scheduler, real auto-ops.

Per tick (``tickMinutes``), for each policy:

1. fleet events due (a cluster or region fails / recovers, is drained / uncordoned, a surge starts
   or ends); replicas on a failed cluster fail over (the scheduler re-divides what the Readiness
   filter drops), a drain re-places the cluster's bindings from scratch;
2. the clusters publish their background load (the WaterLevel policy sees observed use; the
   Karmada baselines see requests, which don't move with the day);
3. workload events due: arrivals are scheduled, scalings re-divided, departures forgotten;
4. bindings short of replicas are retried (as the queue retries parked bindings on cluster events;
   a tick stops retrying after ``RETRY_STREAK`` retries in a row that placed nothing);
5. WaterLevel only: a sustained breach (monitoring's `SustainedDetector`) goes through `autoops.execute`
   to a hook that picks bindings with `choose_evacuation` and re-places them; a cluster above the
   fleet's achievable level is shaved (`drods.whatif.shaving`); a cluster replicas left (restore) or
   failed over from (fail-back, after ``failbackAfterSeconds``) is offered them back once up and calm
   — the descheduler's decision code — each move within the scheduler's move budget;
6. the figures are recorded against the truth: background use + the requests of placed replicas.

Every decision is `Scheduler.schedule` against a `Snapshot` followed by ``snap.assume`` — the
placements feed back into what the next decision sees.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from drods.model.binding import BindingSpec, TargetCluster
from drods.model.cluster import ClusterSpec, CostModel, NetworkProfile
from drods.model.reschedule import RescheduleRequest, RescheduleResult, choose_evacuation
from drods.monitor.autoops import AutoOps, RestoreWatch, execute
from drods.monitor.thresholds import SustainedDetector
from drods.scheduler.framework import Scheduler
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import Task
from drods.scheduler.users import UserDemand
from drods.schedulerd.failback import grants
from drods.schedulerd.fleet import MoveBudget
from drods.schedulerd.service import SchedulerSettings
from drods.whatif.ideal import fits_under_limits, ideal_latency_hist, ideal_peak, ideal_peak_within_slo
from drods.whatif.load import BackgroundLoad, apply_trace, diurnal, read_trace
from drods.whatif.policies import Policy, make_policy
from drods.whatif.scenario import Scenario
from drods.whatif.shaving import PeakShavePass

RETRY_STREAK = 20
GIB = 1024.0**3
Progress = Callable[[str, int, int], None]


# ---------------------------------------------------------------------- the fleet and its events
@dataclass(slots=True)
class Fleet:
    names: list[str]
    region: np.ndarray  # region index per cluster
    regions: list[str]
    offsets: np.ndarray  # UTC offset (hours) per cluster
    cpu: np.ndarray  # allocatable cores
    memory: np.ndarray  # allocatable GiB
    price_cpu: np.ndarray
    price_mem: np.ndarray
    egress: np.ndarray
    limit: np.ndarray  # cluster waterLevelLimit (NaN: none)
    weight: np.ndarray
    latency: np.ndarray  # (clusters, regions) ms
    specs: list[ClusterSpec]

    @property
    def n(self) -> int:
        return len(self.names)


def build_fleet(scn: Scenario) -> Fleet:
    regions = [r.name for r in scn.regions]
    ridx = {r: i for i, r in enumerate(regions)}
    rmap = {r.name: r for r in scn.regions}

    def lat(a: str, b: str) -> float:
        if a == b:
            return rmap[a].localLatencyMs
        return float(rmap[a].latencyMs.get(b, rmap[b].latencyMs.get(a, 100.0)))

    names: list[str] = []
    cols: dict[str, list[float]] = {k: [] for k in ("region", "offsets", "cpu", "memory", "pc", "pm", "eg", "lim", "w")}
    specs: list[ClusterSpec] = []
    for g in scn.clusters:
        prefix = g.prefix or g.region
        for i in range(g.count):
            name = g.names[i] if g.names else f"{prefix}-{i:03d}"
            names.append(name)
            for k, v in (("region", ridx[g.region]), ("offsets", rmap[g.region].utcOffsetHours), ("cpu", g.cpu),
                         ("memory", g.memoryGiB), ("pc", g.cpuCoreHour), ("pm", g.memoryGiBHour),
                         ("eg", g.egressGiB), ("lim", g.waterLevelLimit if g.waterLevelLimit else math.nan),
                         ("w", g.weight)):
                cols[k].append(float(v))
            specs.append(ClusterSpec(region=g.region, provider=g.provider, waterLevelLimit=g.waterLevelLimit,
                                     cost=CostModel(cpuCoreHour=g.cpuCoreHour, memoryGiBHour=g.memoryGiBHour,
                                                    egressGiB=g.egressGiB),
                                     network=NetworkProfile(latencyMs={r: lat(g.region, r) for r in regions})))
    if len(set(names)) != len(names):
        raise ValueError("cluster names must be unique across groups")
    region = np.asarray(cols["region"], dtype=np.intp)
    latency = np.asarray([[lat(regions[region[c]], r) for r in regions] for c in range(len(names))])
    return Fleet(names, region, regions, np.asarray(cols["offsets"]), np.asarray(cols["cpu"]),
                 np.asarray(cols["memory"]), np.asarray(cols["pc"]), np.asarray(cols["pm"]), np.asarray(cols["eg"]),
                 np.asarray(cols["lim"]), np.asarray(cols["w"], dtype=np.int64), latency, specs)


@dataclass(frozen=True, slots=True)
class FleetEvent:
    minute: float
    kind: str  # fail | recover | drain | uncordon | surge | surge-end
    clusters: tuple[int, ...]
    region: int | None
    factor: float


def fleet_events(scn: Scenario, fleet: Fleet) -> list[FleetEvent]:
    undo = {"fail": "recover", "drain": "uncordon", "surge": "surge-end"}
    out: list[FleetEvent] = []
    for i, e in enumerate(scn.events):
        if e.cluster is not None:
            if e.cluster not in fleet.names:
                raise ValueError(f"events[{i}].cluster: unknown cluster {e.cluster!r}")
            rows: tuple[int, ...] = (fleet.names.index(e.cluster),)
            region: int | None = None  # a cluster's surge is its background only (a region's scales workloads)
        else:
            region = fleet.regions.index(str(e.region))
            rows = tuple(int(i) for i in np.flatnonzero(fleet.region == region))
        out.append(FleetEvent(e.at, e.type, rows, region, e.factor))
        if e.durationMinutes and e.type in undo:
            out.append(FleetEvent(e.at + e.durationMinutes, undo[e.type], rows, region, e.factor))
    return sorted(out, key=lambda ev: ev.minute)


# ---------------------------------------------------------------------- workloads
@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    minute: float
    kind: str  # arrive | scale | leave
    name: str
    replicas: int = 0
    cpu: float = 0.0
    memory: float = 0.0
    origin: int = 0


def workload_events(scn: Scenario, fleet: Fleet, rng: np.random.Generator) -> list[WorkloadEvent]:
    """The explicit items plus the generator's seeded events, in time order."""
    out: list[WorkloadEvent] = []
    regions = fleet.regions
    for w in scn.workloads.items:
        origin = regions.index(w.region) if w.region else 0
        out.append(WorkloadEvent(w.at, "arrive", w.name, w.replicas, w.cpu, w.memoryGiB, origin))
        out.extend(WorkloadEvent(m, "scale", w.name, r) for m, r in w.scale)
        if w.leaveAt is not None:
            out.append(WorkloadEvent(w.leaveAt, "leave", w.name))
    gen = scn.workloads.generate
    if gen is not None and (gen.events or gen.initial):
        minutes = scn.durationHours * 60.0
        counts = np.bincount(fleet.region, minlength=len(regions)).astype(float)
        offsets = np.asarray([r.utcOffsetHours for r in scn.regions])
        peak = scn.background.diurnal.peakHour
        total = gen.initial + gen.events
        origins = rng.choice(len(regions), size=total, p=counts / counts.sum())
        times = np.zeros(total)
        todo = np.arange(gen.initial, total)
        while todo.size:  # rejection sampling: busier in each origin's local day
            cand = rng.uniform(0.0, minutes, todo.size)
            if gen.followDiurnal:
                local = (scn.startHourUtc + cand / 60.0 + offsets[origins[todo]]) % 24.0
                p = (0.25 + (1.0 + np.cos(2 * np.pi * (local - peak) / 24.0)) / 2.0) / 1.25
                ok = rng.random(todo.size) < p
            else:
                ok = np.ones(todo.size, dtype=bool)
            times[todo[ok]] = cand[ok]
            todo = todo[~ok]
        order = np.argsort(times, kind="stable")
        kinds = rng.random(total)
        kinds[: gen.initial] = 1.0  # the initial workloads arrive
        live: list[tuple[str, int]] = []
        base: dict[str, int] = {}
        seq = 0
        for k in order.tolist():
            t, origin, u = float(times[k]), int(origins[k]), float(kinds[k])
            if live and u < gen.leaveShare and k >= gen.initial:
                name, _ = live.pop(int(rng.integers(len(live))))
                out.append(WorkloadEvent(t, "leave", name))
            elif live and u < gen.leaveShare + gen.scaleShare and k >= gen.initial:
                name, _ = live[int(rng.integers(len(live)))]
                new = max(1, int(round(base[name] * rng.uniform(0.5, 1.8))))
                base[name] = new
                out.append(WorkloadEvent(t, "scale", name, new))
            else:
                seq += 1
                name = f"w{seq:05d}"
                r = int(rng.integers(gen.replicas[0], gen.replicas[1] + 1))
                base[name] = r
                live.append((name, origin))
                out.append(WorkloadEvent(t, "arrive", name, r, round(float(rng.uniform(*gen.cpu)), 3),
                                         round(float(rng.uniform(*gen.memoryGiB)), 3), origin))
    return sorted(out, key=lambda ev: ev.minute)


def background(scn: Scenario, fleet: Fleet, rng: np.random.Generator, base_dir: Path | None) -> BackgroundLoad:
    bg = diurnal(scn.background.diurnal, ticks=scn.ticks, tick_minutes=scn.tickMinutes,
                 start_hour_utc=scn.startHourUtc, utc_offsets=fleet.offsets, rng=rng)
    if scn.background.trace:
        path = Path(scn.background.trace)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        apply_trace(bg, read_trace(path), fleet.names, scn.tickMinutes)
    return bg


@dataclass(slots=True)
class Inputs:
    """What every policy of one simulation shares (generated once, seeded)."""

    scenario: Scenario
    seed: int
    fleet: Fleet
    load: BackgroundLoad
    events: list[FleetEvent]
    workloads: list[WorkloadEvent]


def prepare(scn: Scenario, seed: int | None = None, base_dir: Path | None = None) -> Inputs:
    s = scn.seed if seed is None else seed
    rng = np.random.default_rng(s)
    fleet = build_fleet(scn)
    load = background(scn, fleet, rng, base_dir)
    return Inputs(scn, s, fleet, load, fleet_events(scn, fleet), workload_events(scn, fleet, rng))


# ---------------------------------------------------------------------- one policy's run
@dataclass(slots=True)
class _Workload:
    name: str
    base: int
    cpu: float
    memory: float
    origin: int
    spec: BindingSpec
    placement: dict[int, int] = field(default_factory=dict)
    evacuated_from: set[int] = field(default_factory=set)
    failed_over_from: set[int] = field(default_factory=set)
    multiplier: float = 1.0
    users: UserDemand | None = None  # what the scheduler learned of its users (policies that know them)

    @property
    def requested(self) -> int:
        return int(math.ceil(self.base * self.multiplier - 1e-9))


@dataclass(slots=True)
class Trace:
    """What one policy's run recorded (per tick, and totals)."""

    policy: str
    water_level: np.ndarray  # (ticks, clusters), NaN while a cluster is down
    pending: np.ndarray  # (ticks,) replicas requested but not running
    requested: np.ndarray  # (ticks,)
    wl_breaches: int = 0
    latency_breaches: int = 0
    moved: int = 0
    cross_domain_bytes: float = 0.0
    cost: float = 0.0
    decisions: int = 0
    operations: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    ideal_peak: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (ticks,) fluid lower bound
    full: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # (ticks,) demand > room
    latency_bins: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the distinct latencies (ms)
    latency_hist: np.ndarray = field(default_factory=lambda: np.zeros(0))  # replica-ticks per bin
    ideal_latency_hist: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the same, ideally


class PolicyRun:
    def __init__(self, inputs: Inputs, policy: Policy) -> None:
        self.inp = inputs
        self.scn = scn = inputs.scenario
        self.pol = policy
        # its own copy of the clusters' specs: a drain cordons them for this policy's run only (every
        # policy replays the same inputs, whatever ran before it)
        f = self.fleet = replace(inputs.fleet, specs=list(inputs.fleet.specs))
        n = f.n
        self.sched = Scheduler(policy.profile, rng_seed=inputs.seed)
        self.snap = Snapshot(capacity=max(16, n))
        self.up = np.ones(n, dtype=bool)
        self.rep = np.zeros(n, dtype=np.int64)  # replicas placed per cluster
        self.req_cpu = np.zeros(n)
        self.req_mem = np.zeros(n)
        self.xrep = np.zeros(n)  # replicas away from their users' region
        self.workloads: dict[str, _Workload] = {}
        self.lat_bad: set[str] = set()
        self.total_requested = 0
        self.signals: dict[str, float] = {}
        weights: dict[int, list[str]] = {}
        for c, w in enumerate(f.weight.tolist()):
            weights.setdefault(int(w), []).append(f.names[c])
        self.placement_doc = policy.placement(weights, scn.waterLevelLimit)
        self.mean_cpu = inputs.load.cpu.mean(axis=0) * scn.background.requestsFraction
        self.mean_mem = inputs.load.memory.mean(axis=0) * scn.background.requestsFraction
        self.surge = np.ones(n)  # background multiplier per cluster
        self.region_surge = np.ones(len(f.regions))
        for c in range(n):
            self.snap.upsert_cluster(f.names[c], {}, f.specs[c], True, self._status(c, 0))
        ticks = scn.ticks
        self.trace = Trace(policy.name, np.full((ticks, n), np.nan, dtype=np.float32), np.zeros(ticks),
                           np.zeros(ticks))
        self._init_users()
        self.ops = AutoOps(scn.autoops)
        # monitoring's limit per cluster: its own spec limit, else the default (one detector per value)
        self.limits = np.where(np.isnan(f.limit), scn.waterLevelLimit, f.limit)
        self.detectors = {lim: SustainedDetector("waterLevel", lim, scn.sustainedMinutes * 60.0,
                                                 hysteresis=scn.hysteresis) for lim in set(self.limits.tolist())}
        self.restores = RestoreWatch(self.ops)
        self.failbacks = RestoreWatch(self.ops, scn.autoops.failbackAfterSeconds)
        self.now_s = 0.0
        self.moves = MoveBudget(SchedulerSettings().fleet_max_moves_per_minute, lambda: self.now_s)
        self.failing_back: list[str] = []  # fail-backs the move budget has not granted yet
        self.shaver = PeakShavePass(self.ops, f.names, f.cpu, f.memory, f.latency, self.slo,
                                    knows_users=self.pol.knows_users)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t = 0

    def _init_users(self) -> None:
        """What the figures of user latency and the ideal need; for a policy that knows users, the
        latencies as the network status would report them (measured pairs)."""
        f, tr = self.fleet, self.trace
        regions = len(f.regions)
        self.rep_origin = np.zeros((f.n, regions))  # replicas per (cluster, users' region)
        self.cpu_origin = np.zeros((f.n, regions))  # their requested cores, and GiB
        self.mem_origin = np.zeros((f.n, regions))
        self.demand_cpu = np.zeros(regions)  # requested cores per users' region
        self.demand_mem = 0.0  # requested GiB
        self.demand_replicas = np.zeros(regions)
        tr.latency_bins = np.unique(f.latency)
        tr.latency_hist = np.zeros(tr.latency_bins.size)
        tr.ideal_latency_hist = np.zeros(tr.latency_bins.size)
        tr.ideal_peak = np.full(self.scn.ticks, np.nan)
        tr.full = np.zeros(self.scn.ticks, dtype=bool)
        self.lat_idx = np.searchsorted(tr.latency_bins, f.latency)
        self.slo = self.scn.sla.latencyMs if self.pol.knows_users else None
        # the clusters each users' region may use under the policy's latency SLO (its ideal's constraint)
        self.within = None if self.slo is None else f.latency <= self.slo
        if self.pol.knows_users:
            for c in range(f.n):
                for r, region in enumerate(f.regions):
                    self.snap.set_network_pair(f.names[c], region, float(f.latency[c, r]), None)

    def _demand(self, w: _Workload, sign: float) -> None:
        k = sign * w.spec.replicas
        self.demand_cpu[w.origin] += k * w.cpu
        self.demand_mem += k * w.memory
        self.demand_replicas[w.origin] += k

    def _record_users(self, t: int) -> None:
        """This tick's replica latencies and the ideal's (both as replica counts per latency bin)."""
        f, tr, up = self.fleet, self.trace, self.up
        tr.latency_hist += np.bincount(self.lat_idx[up].ravel(), weights=self.rep_origin[up].ravel(),
                                       minlength=tr.latency_bins.size)
        cpu, mem = self._bg(t)
        ok = up & ~self.snap.unschedulable[: f.n]
        placed_cpu, placed_mem = float((self.req_cpu * up).sum()), float((self.req_mem * up).sum())
        if self.within is None:
            tr.ideal_peak[t] = ideal_peak(cpu, mem, f.cpu, f.memory, ok, placed_cpu, placed_mem)
        else:
            # what runs beyond the SLO now (it gave way there: the users' region down, no room within it)
            # may go anywhere in the bound, so it holds for this placement; the rest stays within the SLO
            inside = self.within & ok[:, None]
            held_cpu, held_mem = self.cpu_origin * up[:, None], self.mem_origin * up[:, None]
            near_cpu, near_mem = (held_cpu * inside).sum(axis=0), (held_mem * inside).sum(axis=0)
            tr.ideal_peak[t] = ideal_peak_within_slo(
                cpu, mem, f.cpu, f.memory, ok, near_cpu, near_mem, self.within,
                float(self.limits[ok].min()) if ok.any() else self.scn.waterLevelLimit,
                beyond_cpu=max(0.0, float(held_cpu.sum() - near_cpu.sum())),
                beyond_mem=max(0.0, float(held_mem.sum() - near_mem.sum())))
        limits = np.minimum(self.limits, self.scn.waterLevelLimit)
        # a replica no cluster could hold under its limit even empty is unplaceable, not a sign of a full
        # fleet: left out of the demand and of the largest replica the room is measured with
        most_cpu = float((limits * f.cpu)[ok].max()) if ok.any() else 0.0
        most_mem = float((limits * f.memory)[ok].max()) if ok.any() else 0.0
        never = [w for w in self.workloads.values() if w.cpu > most_cpu or w.memory > most_mem]
        fits = [w for w in self.workloads.values() if w.cpu <= most_cpu and w.memory <= most_mem]
        big_cpu = max((w.cpu for w in fits), default=0.0)
        big_mem = max((w.memory for w in fits), default=0.0)
        tr.full[t] = not fits_under_limits(cpu, mem, f.cpu, f.memory, ok, limits,
                                           float(self.demand_cpu.sum()) - sum(w.spec.replicas * w.cpu for w in never),
                                           self.demand_mem - sum(w.spec.replicas * w.memory for w in never),
                                           big_cpu, big_mem) if ok.any() else bool(self.demand_cpu.sum() > 0)
        room = np.where(ok, np.maximum(self.limits - cpu, 0.0) * f.cpu, 0.0)
        cap = np.where(ok, np.maximum(1.0 - cpu, 0.0) * f.cpu, 0.0)
        tr.ideal_latency_hist += ideal_latency_hist(f.latency, room, cap, self.demand_cpu, self.demand_replicas,
                                                    tr.latency_bins)

    # -------------------------------------------------------------- load and views
    def _bg(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        ld = self.inp.load
        return (np.minimum(ld.cpu[t] * self.surge, 1.0), np.minimum(ld.memory[t] * self.surge, 1.0))

    def _status(self, c: int, t: int) -> dict[str, Any]:
        f = self.fleet
        if self.pol.sees_use:
            cpu, mem = self._bg(t)
            return {"cpu": {"allocatable": f.cpu[c], "used": float(cpu[c]) * f.cpu[c]},
                    "memory": {"allocatable": f.memory[c], "used": float(mem[c]) * f.memory[c]}}
        return {"cpu": {"allocatable": f.cpu[c], "allocated": float(self.mean_cpu[c]) * f.cpu[c]},
                "memory": {"allocatable": f.memory[c], "allocated": float(self.mean_mem[c]) * f.memory[c]}}

    def truth(self, t: int) -> np.ndarray:
        """Water level as it really is: background use plus the requests of placed replicas."""
        cpu, mem = self._bg(t)
        f = self.fleet
        wl = np.maximum(cpu + self.req_cpu / f.cpu, mem + self.req_mem / f.memory)
        return np.where(self.up, wl, np.nan)

    # -------------------------------------------------------------- placements
    def _set_placement(self, w: _Workload, new: dict[int, int]) -> None:
        f = self.fleet
        for c in set(w.placement) | set(new):
            d = new.get(c, 0) - w.placement.get(c, 0)
            if d:
                self.rep[c] += d
                self.req_cpu[c] += d * w.cpu
                self.req_mem[c] += d * w.memory
                if f.region[c] != w.origin:
                    self.xrep[c] += d
                self.rep_origin[c, w.origin] += d
                self.cpu_origin[c, w.origin] += d * w.cpu
                self.mem_origin[c, w.origin] += d * w.memory
        w.placement = {c: k for c, k in new.items() if k > 0}
        sla = self.scn.sla.latencyMs
        if sla is not None:
            bad = any(f.latency[c, w.origin] > sla for c in w.placement)
            (self.lat_bad.add if bad else self.lat_bad.discard)(w.name)

    def schedule(self, w: _Workload, *, rebalance: bool = False, budget: MoveBudget | None = None) -> int:
        """One real scheduling cycle for ``w``; returns replicas it added (0 when nothing changed,
        -1 when ``budget`` does not grant its moves: nothing changed)."""
        f = self.fleet
        cur = [TargetCluster.model_construct(cluster=f.names[c], replicas=k) for c, k in w.placement.items()]
        # as the scheduler service builds it: no preferred regions (TopologyPreference then follows the
        # regions the workload runs in now)
        task = Task(w.spec, name=w.name, current=cur, rebalance=rebalance, users=w.users, latency_slo_ms=self.slo)
        res = self.sched.schedule(task, self.snap, signals=self.signals)
        self.trace.decisions += 1
        if res.phase != "Scheduled":
            return 0
        idx = self.snap.index
        new = {idx[t.cluster]: t.replicas for t in res.placement if t.replicas > 0}
        if budget is not None and not grants(budget, [(f.names[c], k) for c, k in w.placement.items()],
                                             [(f.names[c], k) for c, k in new.items()]):
            return -1
        old_running = sum(k for c, k in w.placement.items() if self.up[c])
        self._commit(w, new)
        return sum(k for c, k in new.items() if self.up[c]) - old_running

    def _commit(self, w: _Workload, new: dict[int, int]) -> None:
        """``w`` now runs as ``new``: assumed in the snapshot, moves counted, figures updated."""
        f = self.fleet
        self.snap.assume([TargetCluster.model_construct(cluster=f.names[c], replicas=k) for c, k in new.items()],
                         w.spec.resources, key=w.name)
        moved = sum(max(0, k - w.placement.get(c, 0)) for c, k in new.items()) - \
            max(0, sum(new.values()) - sum(w.placement.values()))  # a scale-up's additions are no moves
        self.trace.moved += moved
        self.trace.cross_domain_bytes += moved * self.scn.workloads.stateGiB * GIB
        self._set_placement(w, new)

    def _running(self, w: _Workload) -> int:
        return sum(k for c, k in w.placement.items() if self.up[c])

    def _resize(self, w: _Workload) -> None:
        old_req = w.spec.replicas
        new_req = w.requested
        if new_req == old_req:
            return
        self.total_requested += new_req - old_req
        self._demand(w, -1.0)
        w.spec = w.spec.model_copy(update={"replicas": new_req})
        self._demand(w, 1.0)
        self.schedule(w)

    # -------------------------------------------------------------- events
    def _workload_event(self, ev: WorkloadEvent) -> None:
        if ev.kind == "arrive":
            if ev.name in self.workloads:
                return
            spec = BindingSpec.model_validate({"replicas": 0, "resources": {"cpu": ev.cpu, "memory": ev.memory},
                                               "placement": self.placement_doc})
            new = _Workload(ev.name, ev.replicas, ev.cpu, ev.memory, ev.origin, spec,
                            multiplier=float(self.region_surge[ev.origin]))
            if self.pol.knows_users:  # learned from its demand: the scenario's users' region
                new.users = UserDemand.of([("region", self.fleet.regions[ev.origin], 1.0)], "learned")
            self.workloads[ev.name] = new
            self._resize(new)
            return
        w = self.workloads.get(ev.name)
        if w is None:
            return
        if ev.kind == "scale":
            w.base = ev.replicas
            self._resize(w)
            return
        self.snap.forget(key=w.name)
        self._set_placement(w, {})
        self.lat_bad.discard(w.name)
        self.total_requested -= w.spec.replicas
        self._demand(w, -1.0)
        del self.workloads[w.name]

    def _on_cluster(self, c: int) -> list[_Workload]:
        return sorted((w for w in self.workloads.values() if w.placement.get(c, 0) > 0),
                      key=lambda w: (-w.placement[c], w.name))

    def _fleet_event(self, ev: FleetEvent) -> None:
        f, snap = self.fleet, self.snap
        if ev.kind in ("fail", "recover"):
            ready = ev.kind == "recover"
            for c in ev.clusters:
                self.up[c] = ready
                snap.set_ready(f.names[c], ready)
                if not ready:
                    self.detectors[float(self.limits[c])].forget(f.names[c])
            if not ready:  # failover: the scheduler re-divides what Readiness drops
                for w in sorted({w.name: w for c in ev.clusters for w in self._on_cluster(c)}.values(),
                                key=lambda w: w.name):
                    w.failed_over_from.update(c for c in ev.clusters if w.placement.get(c, 0) > 0)
                    self.schedule(w)
        elif ev.kind in ("drain", "uncordon"):
            cordon = ev.kind == "drain"
            for c in ev.clusters:
                f.specs[c] = f.specs[c].model_copy(update={"unschedulable": cordon})
                snap.upsert_cluster(f.names[c], {}, f.specs[c], bool(self.up[c]), self._status(c, self._t))
            if cordon:
                for w in sorted({w.name: w for c in ev.clusters for w in self._on_cluster(c)}.values(),
                                key=lambda w: w.name):
                    self.schedule(w, rebalance=True)
        else:
            on = ev.kind == "surge"
            for c in ev.clusters:
                self.surge[c] = ev.factor if on else 1.0
            if ev.region is not None:
                self.region_surge[ev.region] = ev.factor if on else 1.0
                for w in [w for w in self.workloads.values() if w.origin == ev.region]:
                    w.multiplier = float(self.region_surge[ev.region])
                    self._resize(w)
            self.signals = {"trafficSurge": 1.0} if (self.surge > 1.0).any() else {}

    # -------------------------------------------------------------- automatic operations (WaterLevel)
    async def _hook(self, req: RescheduleRequest) -> RescheduleResult:
        """The scheduler's side of a request, as `drods.controllers.rescheduler.Rescheduler` does it."""
        c = self.fleet.names.index(req.cluster)
        if req.action == "evacuate":
            on = [(w.placement[c], w.name) for w in self._on_cluster(c)]
            if not on:
                return RescheduleResult(False, 0, f"no binding has replicas on {req.cluster}")
            chosen = choose_evacuation(on, req.fraction)
            for _, name in chosen:
                w = self.workloads[name]
                w.evacuated_from.add(c)
                self.schedule(w, rebalance=True)
            self.restores.moved(req.cluster)
            return RescheduleResult(True, sum(n for n, _ in chosen), "", tuple(n for _, n in chosen))
        if req.action == "failback":
            names = sorted(w.name for w in self.workloads.values() if c in w.failed_over_from)
            for name in names:
                self.workloads[name].failed_over_from.discard(c)
            self.failing_back.extend(n for n in names if n not in self.failing_back)
            self._fail_back()
            if not names:
                return RescheduleResult(False, 0, f"no binding failed over from {req.cluster}")
            return RescheduleResult(True, 0, "", tuple(names))
        if req.action == "restore":
            names = sorted(w.name for w in self.workloads.values() if c in w.evacuated_from)
            for name in names:
                w = self.workloads[name]
                w.evacuated_from.discard(c)
                self.schedule(w, rebalance=True)
            if not names:
                return RescheduleResult(False, 0, f"no binding was moved away from {req.cluster}")
            return RescheduleResult(True, 0, "", tuple(names))
        return RescheduleResult(False, 0, f"{req.action} is not simulated")

    async def _record(self, kind: str, reason: str, **kw: Any) -> None:
        outcome = kw.get("details", {}).get("outcome", "?")
        key = f"{kind}:{outcome}"
        self.trace.operations[key] = self.trace.operations.get(key, 0) + 1

    def _autoops(self, now_s: float) -> None:
        assert self._loop is not None
        f = self.fleet
        wl = self.snap.water_level
        limits = self.limits
        open_ = self.up & ~self.snap.unschedulable[: f.n]
        below = open_ & (wl < limits)
        for c in np.flatnonzero(self.up).tolist():
            ev = self.detectors[float(limits[c])].observe(f.names[c], float(wl[c]), now_s)
            if ev is None or ev.kind != "sustained":
                continue
            reason = f"water level {ev.value:.2f} above the limit {ev.limit:.2f}"
            self._loop.run_until_complete(execute(
                self.ops, "evacuate", f.names[c], reason, now_s, candidates=int(below.sum() - below[c]),
                details=ev.to_dict(), hook=self._hook, record=self._record))
        p = self.scn.autoops
        if p.enabled and p.peakshave:  # the descheduler's peak shaving (`drods.whatif.shaving`)
            self.shaver.run(self._loop, now_s, np.where(self.up, wl, np.nan), limits, open_, self.workloads.values(),
                            self.moves, lambda n, pl: self._commit(self.workloads[n], pl), self._record)
        calm_below = limits - self.scn.hysteresis
        if p.enabled and p.failback:
            self._failback_pass(now_s, wl, calm_below)
        if not (p.enabled and p.restore):
            return
        for name in list(self.restores.calm_since):  # the descheduler's restore loop
            c = f.names.index(name)
            since = self.restores.due(name, bool(self.up[c] and wl[c] < calm_below[c]), now_s)
            if since is None:
                continue
            reason = f"water level {wl[c]:.2f} below the limit {limits[c]:.2f} for {now_s - since:.0f}s"
            outcome, _ = self._loop.run_until_complete(execute(
                self.ops, "restore", f.names[c], reason, now_s, candidates=0,
                details={"waterLevel": float(wl[c]), "calmSince": since}, hook=self._hook, record=self._record))
            self.restores.done(name, outcome, now_s)

    def _failback_pass(self, now_s: float, wl: np.ndarray, calm_below: np.ndarray) -> None:
        """The descheduler's fail-back pass (`drods.controllers.descheduler.Descheduler.failback`)."""
        assert self._loop is not None
        f = self.fleet
        self._fail_back()  # what the budget did not grant before, as the scheduler's queue retries it
        for c in np.flatnonzero(~self.up).tolist():
            self.failbacks.moved(f.names[c])
        for name in list(self.failbacks.calm_since):
            c = f.names.index(name)
            since = self.failbacks.due(name, bool(self.up[c] and wl[c] < calm_below[c]), now_s)
            if since is None:
                continue
            reason = (f"cluster {name} Ready again, water level {wl[c]:.2f} below the limit "
                      f"{self.limits[c]:.2f} for {now_s - since:.0f}s")
            outcome, _ = self._loop.run_until_complete(execute(
                self.ops, "failback", name, reason, now_s, candidates=0,
                details={"waterLevel": float(wl[c]), "readySince": since, "recovered": name},
                hook=self._hook, record=self._record))
            self.failbacks.done(name, outcome, now_s)

    def _fail_back(self) -> None:
        """Re-place the bindings waiting to fail back, as far as the move budget grants."""
        waiting, self.failing_back = self.failing_back, []
        for name in waiting:
            w = self.workloads.get(name)
            if w is not None and self.schedule(w, rebalance=True, budget=self.moves) < 0:
                self.failing_back.append(name)

    # -------------------------------------------------------------- the loop
    def run(self, progress: Progress | None = None) -> Trace:
        t_start = time.perf_counter()
        scn, f = self.scn, self.fleet
        tick_min = scn.tickMinutes
        tick_h = tick_min / 60.0
        tr = self.trace
        fev, wev = self.inp.events, self.inp.workloads
        fi = wi = 0
        self._loop = asyncio.new_event_loop() if self.pol.autoops else None
        try:
            for t in range(scn.ticks):
                self._t = t
                now = t * tick_min
                self.now_s = now * 60.0
                while fi < len(fev) and fev[fi].minute <= now:
                    self._fleet_event(fev[fi])
                    fi += 1
                if self.pol.sees_use:
                    for c in range(f.n):
                        self.snap.set_status(f.names[c], self._status(c, t))
                while wi < len(wev) and wev[wi].minute <= now:
                    self._workload_event(wev[wi])
                    wi += 1
                self._retry()
                if self.pol.autoops:
                    self._autoops(now * 60.0)
                    self._retry()  # room the moves freed, as the scheduler's queue retries on a cluster change
                wl = self.truth(t)
                tr.water_level[t] = wl
                running = int(self.rep[self.up].sum())
                tr.requested[t] = self.total_requested
                tr.pending[t] = max(0, self.total_requested - running)
                tr.wl_breaches += int(np.count_nonzero(wl > scn.sla.waterLevel))
                tr.latency_breaches += len(self.lat_bad)
                self._record_users(t)
                traffic_gib = float((self.xrep * self.up).sum()) * scn.workloads.trafficMBps * 1e6 * tick_min * 60 / GIB
                tr.cross_domain_bytes += traffic_gib * GIB
                up = self.up
                tr.cost += float(((self.req_cpu * f.price_cpu + self.req_mem * f.price_mem) * up).sum()) * tick_h
                tr.cost += float((self.xrep * up * f.egress).sum()) * scn.workloads.trafficMBps * 1e6 * \
                    tick_min * 60 / GIB
                if progress is not None:
                    progress(self.pol.name, t + 1, scn.ticks)
        finally:
            if self._loop is not None:
                self._loop.close()
        tr.wall_s = time.perf_counter() - t_start
        return tr

    def _retry(self) -> None:
        short = [w for w in self.workloads.values() if self._running(w) < w.spec.replicas]
        streak = 0
        for w in sorted(short, key=lambda w: w.name):
            if self.schedule(w) > 0:
                streak = 0
                continue
            streak += 1
            if streak >= RETRY_STREAK:
                break


def simulate(inputs: Inputs, policies: list[str], progress: Progress | None = None) -> dict[str, Trace]:
    """Run every policy over the same inputs."""
    args = inputs.scenario.pluginArgs
    return {name: PolicyRun(inputs, make_policy(name, args)).run(progress) for name in policies}
