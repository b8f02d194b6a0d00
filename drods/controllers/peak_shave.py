"""The descheduler's peak-shaving pass (the decision: `drods.scheduler.peakshave`).

Each pass reads the clusters' water levels as monitoring sees them (``svc.fleet.realtime``), their
capacity (the status documents' ``cpu.capacity`` / ``memory.capacity``) and the placed Bindings
that may be divided anew — ``Divided`` by water level or available replicas, no static weights, no
``Aggregated``, no spread constraints, no stateful roles, not pinned by a MigrationPlan. A cluster
hot for ``peakshaveAfterSeconds`` goes through `drods.monitor.autoops.execute` as a ``peakshave``
action (a ``Rebalance`` in the operations log, with the levels before and after); the
`Rescheduler` asks the scheduler for exactly the planned moves (`drods.schedulerd.shaving`), which
the scheduler's move budget paces and the propagation makes gracefully (new copies first).

The users: a workload with users (declared ``placement.users`` or learned) moves to the allowed cluster
nearest them, latency read as the ``UserLatency`` plugin reads it (`latency_matrix`): a measured C2 pair
(``/status/network/``, read each pass) first, then the cluster's declared ``spec.network.latencyMs``,
then local for a cluster in the users' own region or city (one of unknown latency last). The same
latencies decide which replicas the pass then returns near their users (`homeward`), with or without
a latency SLO. The SLO guard: with a latency SLO (``placement.latencySLOMs`` or the learned one) it
moves only to clusters within the SLO of every user place — one of unknown latency is not a target.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from drods.machinery.informer import Informer
from drods.machinery.tasks import yielding
from drods.model.annotations import keeps_data, learned_users
from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.model.keys import NETWORK_PREFIX, pair_of
from drods.model.migration import pinned_placement
from drods.monitor import report as r
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.service import MonitorService
from drods.monitor.shaving import ShavingPass
from drods.registry.objects import ObjectRegistry
from drods.scheduler.arrays import BoolArr
from drods.scheduler.peakshave import Capacity, Holding, Shave
from drods.scheduler.plugins.user_distance import latency_matrix
from drods.scheduler.selection import ClusterFacts, ClusterSelection
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.users import UserDemand
from drods.store import Store

YIELD_EVERY = 256  # Bindings read between two yields to the event loop (each is validated and matched)

Execute = Callable[[str, str, dict[str, Any]], Awaitable[str]]
Obj = dict[str, Any]


def divisible(spec: BindingSpec) -> bool:
    """May a peak shave move some of its replicas without breaking its placement policy?"""
    pl = spec.placement
    rs = pl.replicaScheduling
    if rs is not None and (rs.replicaSchedulingType != "Divided" or rs.replicaDivisionPreference == "Aggregated"
                           or (rs.weightPreference is not None and rs.weightPreference.static_weights)):
        return False
    return not (pl.spreadConstraints or pl.statefulTopology is not None)


def user_demand(spec: BindingSpec, obj: Mapping[str, Any]) -> tuple[UserDemand | None, float | None]:
    """The workload's users (declared first, then learned) and its latency SLO."""
    pl = spec.placement
    users = UserDemand.of(((u.kind, u.place, u.weight) for u in pl.users), "declared")
    slo = pl.latencySLOMs
    doc = learned_users(obj)
    if users is None and doc is not None:
        users = UserDemand.of((("site", str(u["site"]), 1.0) for u in doc["sites"]
                               if isinstance(u, dict) and u.get("site")), "learned")
        got = doc.get("latencySLOMs")
        slo = slo if slo is not None else (float(got) if isinstance(got, int | float) and got > 0 else None)
    return users, slo


async def measured_pairs(store: Store) -> dict[tuple[str, str], float]:
    """C2's measured delays (ms) by (site or cluster) pair, as the scheduler's cache reads them."""
    out: dict[tuple[str, str], float] = {}
    for kv in (await store.range(NETWORK_PREFIX))[0]:
        pair = pair_of(kv.key)
        try:
            doc = json.loads(kv.value)
        except ValueError:
            continue
        delay = doc.get("delayMs") if isinstance(doc, dict) else None
        if pair is not None and isinstance(delay, int | float) and not isinstance(delay, bool):
            out[pair] = float(delay)
    return out


@dataclass
class LatencyView:
    """The clusters' declared latencies and the measured pairs, for the plugins' latency lookup;
    ``rows`` maps the pass's cluster order to the view's rows (-1: no readable spec)."""

    snap: Snapshot
    rows: np.ndarray
    _farthest: dict[UserDemand, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, names: Sequence[str], specs: Sequence[ClusterSpec | None],
           pairs: Mapping[tuple[str, str], float]) -> LatencyView:
        snap = Snapshot()
        for name, spec in zip(names, specs, strict=True):
            if spec is not None:
                snap.upsert_cluster(name, {}, spec, True, None)
        for (a, b), ms in pairs.items():
            snap.set_network_pair(a, b, ms, None)
        return cls(snap, np.fromiter((snap.index.get(c, -1) for c in names), dtype=np.intp, count=len(names)))

    def farthest(self, users: UserDemand) -> np.ndarray:
        """Per cluster, the latency to the farthest user place (NaN: any place unknown); one array per
        users' demand, shared by the workloads that have it (the pass reads it, never writes it)."""
        got = self._farthest.get(users)
        if got is None:
            worst = latency_matrix(self.snap, users).max(axis=0)
            got = np.full(self.rows.size, np.nan) if worst.size == 0 else \
                np.where(self.rows >= 0, worst[np.maximum(self.rows, 0)], np.nan)
            self._farthest[users] = got
        return got


class PeakShaver:
    """The pass and its damping watch; one per descheduler (state is rebuilt by watching)."""

    def __init__(self, svc: MonitorService, registry: ObjectRegistry, policy: AutoOpsPolicy,
                 bindings: Informer) -> None:
        self.svc = svc
        self.registry = registry
        self.policy = policy
        # the process's shared cache of Bindings: a pass reads it, not the store (a range of every
        # Binding held ~200 MB of stored values at once each minute at 100,000)
        self.bindings = bindings
        self.shaving = ShavingPass.of(policy)
        self.latencies: LatencyView | None = None  # this pass's (measured pairs are read each pass)

    async def _bindings(self) -> list[Obj | None]:
        """Every Binding, from the shared cache once it has listed (decoded documents the pass only reads)."""
        await self.bindings.wait_synced()
        return list(self.bindings.cache.values())

    def fleet(self, details: Mapping[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray, Capacity,
                                                         list[ClusterSpec | None], list[ClusterFacts | None]]:
        """Names, water levels (NaN: inactive), limits, capacity, specs and facts of the known clusters."""
        svc = self.svc
        names = sorted(c for c in details if c in svc.fleet.clusters)
        levels, limits, cpu, mem = (np.full(len(names), np.nan) for _ in range(4))
        specs: list[ClusterSpec | None] = []
        facts: list[ClusterFacts | None] = []
        for i, c in enumerate(names):
            d, info, entry = details[c], svc.fleet.clusters[c], svc.fleet.statuses.get(c)
            st = entry.status if entry is not None else None
            cap = (st.get(r.CPU_CAPACITY), st.get(r.MEMORY_CAPACITY)) if st is not None else (None, None)
            if d["active"] and d["waterLevel"] is not None and cap[0] and cap[1]:
                levels[i], cpu[i], mem[i] = float(d["waterLevel"]), float(cap[0]), float(cap[1])
            limits[i] = svc.water_level_limit(c)
            try:
                spec = ClusterSpec.model_validate(info.spec or {})
            except ValidationError:
                spec = None
            specs.append(spec)
            facts.append(None if spec is None or spec.unschedulable else ClusterFacts.of(c, info.labels, spec))
        return names, levels, limits, Capacity(np.nan_to_num(cpu, nan=1.0), np.nan_to_num(mem, nan=1.0)), specs, facts

    def holding(self, obj: Obj, index: Mapping[str, int], specs: Sequence[ClusterSpec | None],
                facts: Sequence[ClusterFacts | None],
                masks: dict[ClusterSelection, BoolArr] | None = None) -> Holding | None:
        """What the decision needs of one Binding, None when a peak shave may not move it. ``masks``:
        the clusters each selection allows, computed once per pass (bindings share a few policies,
        and matching every binding against every cluster in Python took a 1,000-cluster pass over
        10,000 Bindings past the leases' TTL)."""
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        if meta.get("deletionTimestamp") or pinned_placement(obj) is not None or \
                keeps_data(meta.get("labels")):  # F3: its data moves only with a plan
            return None
        placed = {index[t["cluster"]]: int(t.get("replicas") or 0) for t in status.get("placement") or []
                  if isinstance(t, dict) and t.get("cluster") in index and int(t.get("replicas") or 0) > 0}
        if not placed:  # before validating the spec: in a failure storm no Binding places anything
            return None
        try:
            spec = BindingSpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            return None
        if not divisible(spec) or spec.resources.cpu <= 0:
            return None
        sel = ClusterSelection.of(spec)
        allowed = masks.get(sel) if masks is not None else None
        if allowed is None:
            allowed = np.fromiter((f is not None and sel.selects(f) for f in facts), dtype=bool, count=len(facts))
            if masks is not None:
                masks[sel] = allowed
        users, slo = user_demand(spec, obj)
        latency = None
        if users is not None:  # with or without an SLO: moves go nearest the users, and come back
            if self.latencies is None:  # outside a pass: declared latencies only
                self.latencies = LatencyView.of(sorted(index, key=index.__getitem__), specs, {})
            latency = self.latencies.farthest(users)
        return Holding(str(meta.get("name")), placed, spec.resources.cpu, spec.resources.memory, allowed, latency,
                       slo if latency is not None else None)

    async def run(self, execute: Execute) -> list[Shave]:
        """One pass: shave each cluster hot for the damping window, hottest first; then return replicas
        to clusters near their users that have room (`homeward`), those just shaved left alone."""
        p = self.policy
        if not (p.enabled and p.peakshave):
            return []
        _, details = self.svc.fleet.realtime(self.svc.settings.activeMaxAgeSeconds)
        if not any(d["active"] and d["waterLevel"] is not None for d in details.values()):
            self.shaving.watch.observe(set(), self.svc.clock())  # no level measured: nothing is hot
            self.shaving.room.observe(set(), self.svc.clock())
            return []
        names, levels, limits, cap, specs, facts = self.fleet(details)
        index = {c: i for i, c in enumerate(names)}
        self.latencies = LatencyView.of(names, specs, await measured_pairs(self.registry.store))
        masks: dict[ClusterSelection, BoolArr] = {}
        holdings: list[Holding] = []
        async for obj in yielding(await self._bindings(), every=YIELD_EVERY):
            if obj is not None and (h := self.holding(obj, index, specs, facts, masks)) is not None:
                holdings.append(h)
        open_ = ~np.isnan(levels) & np.fromiter((f is not None for f in facts), dtype=bool, count=len(facts))
        done = self.shaving.run(names, levels, limits, open_, cap, holdings, self.svc.clock(), lambda _: True)
        for plan in done:  # the decision is pure; each plan then goes through the policy's gate
            await execute(names[plan.cluster], plan.reason(names[plan.cluster]), plan.as_json(names))
        return done
