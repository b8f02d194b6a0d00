"""Traffic affinity score (H1): a workload goes near the peers it talks to most.

In the manner of scheduler-plugins' NetworkOverhead: for each candidate cluster c the accumulated
network cost to the already-placed peers, weighted by traffic,

    cost(c) = Σ_peers bytes/s(p) × Σ_d share_p(d) × dist(c, d)

with share_p(d) the fraction of peer p's replicas on cluster d and dist(c, d) = 0 on the same
cluster, else the latency c → d in ms when c's network profile knows it (``latencyMs`` keyed by
cluster name), else ``sameZoneCost`` (1), ``sameRegionCost`` (10) or ``maxCost`` (100). Lowest
cost scores 100, highest 0 (min-max over the feasible clusters, as NetworkOverhead normalises).
Traffic comes from ``PUT /api/v1/traffic`` (decayed, ``drods.model.traffic``); no hand-written
affinity. Skipped before any array work when the workload has no placed peer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

Peer = tuple[float, tuple[tuple[str, int], ...]]


class TrafficAffinity(PluginBase):
    name = "TrafficAffinity"
    affinity = True

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        super().__init__(args)
        self.same_zone = float(self.args.get("sameZoneCost", 1.0))
        self.same_region = float(self.args.get("sameRegionCost", 10.0))
        self.max_cost = float(self.args.get("maxCost", 100.0))
        self.anchor_share = float(self.args.get("anchorShare", 0.2))

    @staticmethod
    def placed_peers(task: TaskInfo, snap: Snapshot) -> list[Peer]:
        hit = task.cache.get("trafficPeers")
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        out: list[Peer] = []
        talk = snap.traffic.get(task.workload) if task.workload else None
        if talk:
            for peer, bps in talk.items():
                pl = snap.workload_placements.get(peer)
                if pl and bps > 0 and peer != task.workload:
                    out.append((bps, pl))
        task.cache["trafficPeers"] = out
        return out

    def anchors(self, task: TaskInfo, snap: Snapshot) -> FloatArr:
        """Per cluster, the bytes/s of the significant peers running there (0 elsewhere): a peer is
        significant when it sends at least ``anchorShare`` (default 0.2) of the heaviest peer's
        traffic. Concentration keeps a replica beside each of them where the workload may run and
        has the replicas — callers in two regions each find a copy of their callee at hand."""
        out = np.zeros(snap.n)
        peers = self.placed_peers(task, snap)
        if not peers:
            return out
        floor = self.anchor_share * max(bps for bps, _ in peers)
        for bps, placement in peers:
            if bps < floor:
                continue
            for name, count in placement:
                row = snap.index.get(name)
                if row is not None and count > 0:
                    out[row] += bps
        return out

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        return not self.placed_peers(task, snap)

    def distance(self, snap: Snapshot, row: int, name: str) -> FloatArr:
        """dist(c, d) for every cluster c to cluster ``name`` at ``row``."""
        n = snap.n
        d = np.full(n, self.max_cost)
        region = snap.indexes.topo["region"][:n]
        zone = snap.indexes.topo["zone"][:n]
        if region[row] >= 0:
            d[region == region[row]] = self.same_region
        if zone[row] >= 0:
            d[zone == zone[row]] = self.same_zone
        lat = snap.latency_array(name)
        if lat is not None:
            known = lat[:n]
            d = np.where(np.isnan(known), d, known)
        d[row] = 0.0
        return d

    def cost(self, task: TaskInfo, snap: Snapshot) -> FloatArr:
        """cost(c) for every cluster: the traffic-weighted distance to the placed peers (not normalised)."""
        cost = np.zeros(snap.n)
        for bps, placement in self.placed_peers(task, snap):
            total = sum(c for _, c in placement)
            if total <= 0:
                continue
            for name, count in placement:
                row = snap.index.get(name)
                if row is not None and count > 0:
                    cost += (bps * count / total) * self.distance(snap, row, name)
        return cost

    def served_cost(self, task: TaskInfo, snap: Snapshot, rows: list[int]) -> float:
        """The traffic-weighted distance of a whole placement (cluster ``rows``), each peer's replicas
        served by the nearest of them (topology-aware routing): what a placement split beside peers
        in several regions saves, where `cost` — one cluster against every peer — cannot say it."""
        if not rows:
            return 0.0
        at = np.asarray(rows, dtype=np.intp)
        total_cost = 0.0
        for bps, placement in self.placed_peers(task, snap):
            total = sum(c for _, c in placement)
            for name, count in placement:
                row = snap.index.get(name)
                if row is not None and count > 0 and total > 0:
                    total_cost += (bps * count / total) * float(self.distance(snap, row, name)[at].min())
        return total_cost

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        cost = self.cost(task, snap)
        feas = cost[mask]
        if feas.size == 0:
            return np.full(n, 100.0)
        lo = float(feas.min())
        hi = float(feas.max())
        if hi - lo <= 1e-12:
            return np.full(n, 100.0)
        return np.clip(100.0 * (hi - cost) / (hi - lo), 0.0, 100.0)  # type: ignore[no-any-return]
