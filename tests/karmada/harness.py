"""Translate Karmada's scheduler test fixtures into DRO-DS snapshots and tasks.

A Karmada test cluster is described by what its cases use: the replicas it can still take
("available replicas" — its ``pods`` allocatable in Karmada's helpers, here a ``pods`` capacity in
the status), its topology, and the score the case gives it. Replicas request no CPU or memory,
so ``pods`` is the only bound, exactly as in Karmada's ``NewClusterWithResource`` fixtures.

Scores go through ``KarmadaScore``, a score plugin reading the case's table; Karmada orders equal
scores by cluster name, DRO-DS at random (S6, docs/karmada.md "score ties"), so the plugin takes
a thousandth of a point off by name rank — below any score a case gives, above the random part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from drods.model.binding import BindingSpec, ReplicaRequirements, TargetCluster
from drods.model.cluster import ClusterSpec
from drods.model.placement import (
    ClusterAffinity,
    Placement,
    ReplicaScheduling,
    SpreadConstraint,
    StaticClusterWeight,
    WeightPreference,
)
from drods.scheduler import Profile, Scheduler, ScheduleResult, Snapshot, Task, register
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.task import TaskInfo

DOC = "docs/karmada.md"


@register
class KarmadaScore(PluginBase):
    """The score a Karmada test case assigns each cluster (``pluginArgs.KarmadaScore.scores``)."""

    name = "KarmadaScore"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        s = np.zeros(snap.n)
        table: Mapping[str, float] = self.args.get("scores", {})
        names = sorted(snap.names)
        for rank, nm in enumerate(names):
            row = snap.index[nm]
            s[row] = float(table.get(nm, 0.0)) - 1e-3 * rank
        return np.clip(s, 0.0, 100.0)


def fleet(clusters: Mapping[str, int | None], *, regions: Mapping[str, str] | None = None,
          zones: Mapping[str, str] | None = None, providers: Mapping[str, str] | None = None) -> Snapshot:
    """A snapshot of ready clusters; ``None`` available replicas = no bound."""
    snap = Snapshot()
    for name, pods in clusters.items():
        st: dict[str, Any] = {
            "timestamp": "2024-01-01T00:00:00Z", "source": "push",
            "cpu": {"capacity": 1000, "allocatable": 1000, "allocated": 0},
            "memory": {"capacity": 4000, "allocatable": 4000, "allocated": 0},
        }
        if pods is not None:
            st["pods"] = {"capacity": pods, "used": 0}
        spec = ClusterSpec(region=(regions or {}).get(name), zone=(zones or {}).get(name),
                           provider=(providers or {}).get(name))
        snap.upsert_cluster(name, {}, spec, True, st)
    return snap


def scheduler(scores: Mapping[str, float] | None = None, seed: int = 0) -> Scheduler:
    """The default filters; the case's scores as the only score (none: every cluster equal)."""
    if scores is None:
        return Scheduler(Profile.from_dict({"scores": {}}), rng_seed=seed)
    return Scheduler(Profile.from_dict({"scores": {"KarmadaScore": 1.0},
                                        "pluginArgs": {"KarmadaScore": {"scores": dict(scores)}}}),
                     rng_seed=seed)


def static(weights: Mapping[str, int] | Sequence[tuple[str, int]]) -> ReplicaScheduling:
    items = weights.items() if isinstance(weights, Mapping) else weights
    return ReplicaScheduling(replicaSchedulingType="Divided", replicaDivisionPreference="Weighted",
                             weightPreference=WeightPreference(staticWeightList=[
                                 StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[c]), weight=w)
                                 for c, w in items]))


DYNAMIC = ReplicaScheduling(replicaSchedulingType="Divided", replicaDivisionPreference="Weighted",
                            weightPreference=WeightPreference(dynamicWeight="AvailableReplicas"))
AGGREGATED = ReplicaScheduling(replicaSchedulingType="Divided", replicaDivisionPreference="Aggregated")
DUPLICATED = ReplicaScheduling(replicaSchedulingType="Duplicated")


def spread(field: str, max_groups: int | None = None, min_groups: int | None = None) -> SpreadConstraint:
    return SpreadConstraint(spreadByField=field, maxGroups=max_groups, minGroups=min_groups)  # type: ignore[arg-type]


def binding(replicas: int, *, rs: ReplicaScheduling | None = None, spreads: Sequence[SpreadConstraint] = (),
            affinity: Sequence[str] | None = None) -> BindingSpec:
    """A workload of ``replicas`` that requests no CPU or memory (only a pod slot each)."""
    pl = Placement(replicaScheduling=rs, spreadConstraints=list(spreads),
                   clusterAffinity=ClusterAffinity(clusterNames=list(affinity)) if affinity else None)
    return BindingSpec(replicas=replicas, resources=ReplicaRequirements(cpu=0, memory=0), placement=pl)


def schedule(snap: Snapshot, replicas: int, *, rs: ReplicaScheduling | None = None,
             current: Mapping[str, int] | None = None, sched: Scheduler | None = None,
             spreads: Sequence[SpreadConstraint] = (), affinity: Sequence[str] | None = None,
             rebalance: bool = False) -> ScheduleResult:
    """One scheduling decision through the public API (``Scheduler.schedule``)."""
    spec = binding(replicas, rs=rs, spreads=spreads, affinity=affinity)
    cur = [TargetCluster(cluster=c, replicas=n) for c, n in (current or {}).items() if n > 0]
    task = Task(spec, name="default/app", current=cur, rebalance=rebalance)
    return (sched or scheduler()).schedule(task, snap)


def placed(r: ScheduleResult) -> dict[str, int]:
    return {k: v for k, v in r.placement_dict().items() if v > 0}


def differs(entry: str) -> str:
    """Mark a test as asserting DRO-DS's own answer where it deliberately differs from Karmada;
    ``entry`` is the row id in docs/karmada.md (checked by test_differences.py)."""
    return entry
