"""Traffic rebalancing (H1): should a placed workload move nearer the peers it talks to now?

TrafficAffinity places a workload near the peers already placed when it arrives. The graph changes
afterwards: a caller that arrives later and cannot come to its callee — its own latency need
excludes every cluster the callee runs on — stays apart from it. The callee can often go to the
caller instead. `traffic_verdict` re-runs the scheduler for a placed workload as a reschedule does
(from scratch: ``rebalance``) and says to move it only when

* it has placed traffic peers and a significant one (at least ``anchorShare`` of the heaviest
  peer's bytes/s) runs on a cluster it does not run on;
* its own filters (latency need, affinity, taints, capacity, …) admit such a cluster;
* the scheduler would now place every replica, and not where they are — with replicas to spare,
  one beside each significant peer (concentration's ``required`` positions); and
* the traffic cost of that placement beats the current one's by more than ``min_reduction``: each
  peer's traffic times the network distance to the *nearest* cluster of the placement (callers
  reach the nearest copy, as topology-aware routing and the steering routes send them).

The threshold is on the cost, not on TrafficAffinity's 0..100 score: the score is min–max normalised
over the feasible clusters, so when a far region is feasible a move from another cluster of the
peer's region onto the peer's own cluster gains about one point, although the distance to the peer
falls from the same-region cost (10) to 0. Both are recorded with the verdict.

Pure over a snapshot: the descheduler's traffic rebalance (`drods.controllers.traffic_rebalance`)
and ``bench/placement_quality.py`` both decide with it; the move itself is an ordinary reschedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from drods.model.binding import TargetCluster
from drods.scheduler.arrays import FloatArr
from drods.scheduler.framework import Scheduler
from drods.scheduler.plugins.traffic_affinity import TrafficAffinity
from drods.scheduler.profile import Profile
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import Task, analyse

Pairs = tuple[tuple[str, int], ...]
DEFAULT_MIN_REDUCTION = 0.4  # share of the traffic-weighted network cost a move must save


class TrafficRebalancePolicy(BaseModel):
    """``autoops.trafficRebalance`` in the configuration file (docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    minCostReduction: float = Field(default=DEFAULT_MIN_REDUCTION, ge=0, lt=1)
    cooldownSeconds: float = Field(default=3600.0, ge=0)  # per workload, between two moves
    intervalSeconds: float = Field(default=60.0, gt=0)  # between two passes over the placed workloads
    # an edge moves a workload only once reported over this long: a burst reported once moves nothing
    settleSeconds: float = Field(default=300.0, ge=0)


@dataclass(frozen=True, slots=True)
class TrafficVerdict:
    """Move or not, and why; the scores and the placement the scheduler would choose."""

    move: bool
    reason: str
    peer: str | None = None  # the heaviest placed peer
    cost_before: float | None = None  # traffic-weighted distance to the peers, current placement
    cost_after: float | None = None  # … of the placement the scheduler would choose now
    score_before: float | None = None  # TrafficAffinity score (0..100), current placement
    score_after: float | None = None
    placement: Pairs = ()

    @property
    def reduction(self) -> float | None:
        if self.cost_before is None or self.cost_after is None or self.cost_before <= 0:
            return None
        return 1.0 - self.cost_after / self.cost_before

    def details(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {"move": self.move, "reason": self.reason, "peer": self.peer, "costBefore": r(self.cost_before),
                "costAfter": r(self.cost_after), "costReduction": r(self.reduction),
                "trafficAffinityBefore": r(self.score_before), "trafficAffinityAfter": r(self.score_after),
                "placement": [{"cluster": c, "replicas": n} for c, n in self.placement]}


def traffic_plugin(profile: Profile) -> TrafficAffinity | None:
    for plugin, weight in profile.scores:
        if isinstance(plugin, TrafficAffinity) and weight > 0:
            return plugin
    return None


def _mean(row: FloatArr, snap: Snapshot, placement: Mapping[str, int]) -> float:
    rows = [(snap.index[c], n) for c, n in placement.items() if c in snap.index and n > 0]
    if not rows:
        return 0.0
    idx = np.fromiter((r for r, _ in rows), dtype=np.intp, count=len(rows))
    w = np.fromiter((n for _, n in rows), dtype=np.float64, count=len(rows))
    return float((row[idx] * w).sum() / w.sum())


def heaviest_peer(snap: Snapshot, workload: str) -> tuple[str, float, Pairs] | None:
    """The placed peer ``workload`` exchanges the most bytes/s with: (name, bytes/s, placement)."""
    best: tuple[str, float, Pairs] | None = None
    for peer, bps in (snap.traffic.get(workload) or {}).items():
        where = snap.workload_placements.get(peer)
        if peer == workload or bps <= 0 or not where:
            continue
        if best is None or (bps, peer) > (best[1], best[0]):
            best = (peer, bps, tuple(where))
    return best


def traffic_verdict(scheduler: Scheduler, task: Task, snap: Snapshot,
                    min_reduction: float = DEFAULT_MIN_REDUCTION) -> TrafficVerdict:
    """Whether to re-place ``task`` (placed at ``task.current``) nearer its traffic peers; see the module."""
    plugin = traffic_plugin(scheduler.profile)
    if plugin is None:
        return TrafficVerdict(False, "TrafficAffinity is not in the scheduler profile")
    if not task.workload:
        return TrafficVerdict(False, "no workload name in the traffic graph")
    current = {t.cluster: t.replicas for t in task.current if t.replicas > 0}
    if not current:
        return TrafficVerdict(False, "not placed")
    top = heaviest_peer(snap, task.workload)
    if top is None:
        return TrafficVerdict(False, "no placed traffic peer")
    peer, bps, where = top
    again = Task(task.spec, task.name, list(task.current), rebalance=True, workload_class=task.workload_class,
                 workload=task.workload)
    d = scheduler.profile.spec.defaults
    info = analyse(again, default_division=d.division, default_limit=d.waterLevelLimit)
    anchors = plugin.anchors(info, snap)
    peer_clusters = [c for c, row in snap.index.items() if anchors[row] > 0]
    apart = sorted(set(peer_clusters) - set(current))
    if not apart:
        return TrafficVerdict(False, f"it runs beside every significant peer (heaviest: {peer} on "
                                     f"{', '.join(sorted(c for c, n in where if n > 0))})", peer)
    there = apart
    mask = scheduler.feasible(info, snap)
    if not any(c in snap.index and mask[snap.index[c]] for c in there):
        result = scheduler.schedule(again, snap)
        why = "; ".join(f"{c}: {result.reasons.get(c, 'not feasible')}" for c in sorted(there)[:3])
        return TrafficVerdict(False, f"its own constraints exclude every cluster its significant peers run on "
                                     f"apart from it ({why})", peer)
    result = scheduler.schedule(again, snap)
    if result.phase != "Scheduled" or result.partial:
        return TrafficVerdict(False, f"the scheduler would not place every replica now: {result.message}", peer)
    proposed = dict(result.pairs)
    if proposed == current:
        return TrafficVerdict(False, "the scheduler would place it where it is", peer, placement=result.pairs)
    row = np.clip(np.asarray(plugin.score(info, snap, mask), dtype=np.float64), 0.0, 100.0)

    def served(placement: Mapping[str, int]) -> float:
        return plugin.served_cost(info, snap, [snap.index[c] for c, n in placement.items() if c in snap.index and n])

    before, after = served(current), served(proposed)
    verdict = TrafficVerdict(False, "", peer, before, after, _mean(row, snap, current), _mean(row, snap, proposed),
                             result.pairs)
    saved = verdict.reduction
    move = saved is not None and saved > min_reduction
    why = (f"traffic-weighted distance to its peers {before:.3g} → {after:.3g} "
           f"({'no cost now' if saved is None else f'{saved:.0%} less'}, threshold {min_reduction:.0%}); "
           f"TrafficAffinity {verdict.score_before:.1f} → {verdict.score_after:.1f}; heaviest peer {peer} "
           f"({bps / 1e6:.2f} MB/s) on {', '.join(sorted(there))}")
    return replace(verdict, move=move, reason=why)


def current_of(placement: Mapping[str, int] | Pairs) -> list[TargetCluster]:
    """A placement as the ``current`` of a `Task`."""
    items = placement.items() if isinstance(placement, Mapping) else placement
    return [TargetCluster.model_construct(cluster=c, replicas=n) for c, n in items if n > 0]
