"""Task analysis (S3): a BindingSpec reduced once per cycle to the hashable, array-ready facts plugins use.

The three dimensions of S3 are made explicit: ``storage_tier``, ``network_id`` and
``compute_class`` (``cpu`` or ``gpu:<model>``), next to the per-replica resource vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from drods.model.binding import BindingSpec, TargetCluster
from drods.model.placement import (
    ClusterAffinity,
    ClusterAffinityTerm,
    OverflowClusterAffinity,
    Placement,
    SpreadConstraint,
    StatefulTopology,
    StaticClusterWeight,
)
from drods.scheduler.arrays import FloatArr, IntArr
from drods.scheduler.offers import OfferDemand
from drods.scheduler.resources import requirement_vector
from drods.scheduler.users import UserDemand

_NO_ROWS: IntArr = np.zeros(0, dtype=np.intp)
_NO_ROWS.flags.writeable = False

Division = Literal["Duplicated", "Aggregated", "StaticWeight", "WaterLevel", "AvailableReplicas"]


@dataclass(frozen=True, slots=True)
class AffinityKey:
    """A cluster affinity term in canonical, hashable form (the cache key of its mask)."""

    name: str | None
    cluster_names: tuple[str, ...]
    exclude: tuple[str, ...]
    match_labels: tuple[tuple[str, str], ...]
    label_exprs: tuple[tuple[str, str, tuple[str, ...]], ...]
    field_exprs: tuple[tuple[str, str, tuple[str, ...]], ...]
    overflow: tuple[AffinityKey, ...] = ()  # F6: overflowAffinities tiers, in order

    @classmethod
    def of(cls, a: ClusterAffinity) -> AffinityKey:
        ls = a.labelSelector
        fs = a.fieldSelector
        over = a.overflowAffinities if isinstance(a, ClusterAffinityTerm) else []
        return cls(
            name=a.affinityName if isinstance(a, ClusterAffinityTerm | OverflowClusterAffinity) else None,
            cluster_names=tuple(a.clusterNames),
            exclude=tuple(a.exclude),
            match_labels=tuple(sorted(ls.matchLabels.items())) if ls else (),
            label_exprs=tuple((e.key, e.operator, tuple(e.values)) for e in ls.matchExpressions) if ls else (),
            field_exprs=tuple((e.key, e.operator, tuple(e.values)) for e in fs.matchExpressions) if fs else (),
            overflow=tuple(AffinityKey.of(o) for o in over),
        )

    @property
    def empty(self) -> bool:
        return not (self.cluster_names or self.exclude or self.match_labels or self.label_exprs
                    or self.field_exprs)


@dataclass(frozen=True, slots=True)
class StaticRules:
    """A static weight list split for linear evaluation: rules that only name clusters become
    (name, weight) pairs looked up in the snapshot's name index; every other rule stays a term
    whose mask is evaluated once per distinct term. A cluster's weight is its best matching rule."""

    names: tuple[str, ...] = ()
    name_weights: tuple[int, ...] = ()
    terms: tuple[tuple[AffinityKey, int], ...] = ()

    @classmethod
    def of(cls, rules: Sequence[StaticClusterWeight]) -> StaticRules:
        names: list[str] = []
        weights: list[int] = []
        add_name = names.append
        add_weight = weights.append
        terms: dict[AffinityKey, int] = {}
        for rule in rules:
            tc = rule.targetCluster
            cn = tc.clusterNames
            if cn and tc.labelSelector is None and tc.fieldSelector is None and not tc.exclude:
                for nm in cn:
                    add_name(nm)
                    add_weight(rule.weight)
                continue
            key = AffinityKey.of(tc)
            terms[key] = max(terms.get(key, 0), rule.weight)
        return cls(tuple(names), tuple(weights), tuple(terms.items()))

    def __bool__(self) -> bool:
        return bool(self.names or self.terms)


_NO_RULES = StaticRules()


@dataclass(slots=True)
class Task:
    """What the caller hands the scheduler: the binding, its name and where it runs now."""

    spec: BindingSpec
    name: str = ""
    current: Sequence[TargetCluster] = ()
    # soft topology preference (TopologyPreference score); defaults to where the workload runs now
    preferred_regions: Sequence[str] = ()
    preferred_zones: Sequence[str] = ()
    # True: ignore the current placement and divide afresh (S11 rebalancing)
    rebalance: bool = False
    # H2: the workload's class (label multicluster.io/workload-class), None when it has none
    workload_class: str | None = None
    # H1: the workload as the traffic graph names it ("namespace/name")
    workload: str | None = None
    # F3: the cluster holding the primary of a stateful topology now (``role: Primary`` in the status)
    primary: str | None = None
    # users learned from steering's demand (declared ``placement.users`` take precedence)
    users: UserDemand | None = None
    # the ServiceRegistration's delay threshold (``placement.latencySLOMs`` takes precedence)
    latency_slo_ms: float | None = None
    # the binding's spec changed (Karmada's ReconcileSchedule): replicas beyond a latency SLO it now
    # states leave while a cluster within it has room, as replicas on a cluster its affinity no longer
    # selects do (a change of learned users moves them only when the move pays)
    placement_changed: bool = False


@dataclass(slots=True)
class TaskInfo:
    """The analysed task plus per-cycle scratch state (Kubernetes' CycleState)."""

    key: str
    replicas: int
    priority: int
    req: FloatArr
    requested: tuple[int, ...]
    gpu_model: str | None
    storage_tier: str | None
    network_id: str | None
    compute_class: str
    max_latency_ms: float | None
    min_bandwidth_mbps: float | None
    capabilities: tuple[str, ...]
    targets: tuple[str, ...]
    tolerations: tuple[tuple[str | None, str, str | None, str | None], ...]
    # each toleration's ``tolerationSeconds`` (None: for good), in ``tolerations`` order
    toleration_seconds: tuple[float | None, ...]
    affinity_terms: tuple[AffinityKey | None, ...]
    shorthand: tuple[tuple[str, tuple[str, ...]], ...]
    spread: tuple[SpreadConstraint, ...]
    division: Division
    static_weights: StaticRules
    limit: float
    current: dict[str, int]
    preferred_regions: tuple[str, ...]
    preferred_zones: tuple[str, ...]
    rebalance: bool
    affinity: AffinityKey | None = None
    cost_first: bool = False
    egress_gib_per_hour: float = 0.0
    workload_class: str | None = None
    workload: str | None = None
    datasets: tuple[tuple[str, float], ...] = ()  # F4: ("namespace/name", GiB read per hour)
    follow: str | None = None  # F3: "namespace/name" of the workload this one follows
    # Karmada 1.17 workloadAffinity: "namespace/labelKey=labelValue" of its groups
    affinity_group: str | None = None
    anti_affinity_group: str | None = None
    topology: StatefulTopology | None = None  # F3: primary + replicas over distinct clusters
    primary: str | None = None  # F3: the topology's primary cluster now
    users: UserDemand | None = None  # where the users are (declared or learned)
    latency_slo_ms: float | None = None  # no replica beyond this from the users while room allows
    placement_changed: bool = False  # `Task.placement_changed`
    min_gpu_perf: float | None = None  # F1: a GPU at least this fast (relative performance)
    storage_gib: float = 0.0  # per replica, on ``storage_tier`` when named
    demand: OfferDemand | None = None  # F1: GPUs of an eligible model, GiB of a tier (None: neither)
    current_rows: IntArr = field(default_factory=lambda: _NO_ROWS)
    current_counts: IntArr = field(default_factory=lambda: _NO_ROWS)
    missing_targets: tuple[str, ...] = ()
    # the affinity term's clusterNames not registered (a typo, or a cluster yet to join): said, not only filtered
    missing_affinity_names: tuple[str, ...] = ()
    # the clusters graceful eviction tasks keep out (placement.exclude carries them), with why
    evicted: tuple[tuple[str, str], ...] = ()
    cache: dict[str, Any] = field(default_factory=dict)

    def analysis(self) -> dict[str, Any]:
        """The S3 mapping, as recorded in the result."""
        out: dict[str, Any] = {"storageTier": self.storage_tier, "networkIdentifier": self.network_id,
                               "compute": self.compute_class}
        if self.min_gpu_perf is not None:
            out["minGpuPerformance"] = self.min_gpu_perf
        if self.users is not None:
            users: dict[str, Any] = {"source": self.users.source, "sites": self.users.to_list()}
            if self.latency_slo_ms is not None:
                users["latencySLOMs"] = self.latency_slo_ms
            if "latencySLO" in self.cache:
                users["latencySLO"] = self.cache["latencySLO"]
            out["users"] = users
        return out


def affinity_terms(pl: Placement) -> tuple[AffinityKey | None, ...]:
    """The affinity terms tried in order (``None``: any cluster)."""
    if pl.clusterAffinities:
        return tuple(AffinityKey.of(t) for t in pl.clusterAffinities)
    if pl.clusterAffinity is not None:
        k = AffinityKey.of(pl.clusterAffinity)
        return (None if k.empty else k,)
    return (None,)


def shorthands(spec: BindingSpec) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The binding's region/provider/zone/city shorthands as (field, allowed values)."""
    return tuple((f, tuple(v)) for f, v in (("region", spec.regions), ("provider", spec.providers),
                                             ("zone", spec.zones), ("city", spec.cities)) if v)


def _division(pl: Placement, default: Division) -> tuple[Division, StaticRules]:
    """The replica division a placement asks for, with its static weight rules."""
    rs = pl.replicaScheduling
    if rs is not None and rs.replicaSchedulingType == "Duplicated":
        return "Duplicated", _NO_RULES
    if rs is not None and rs.replicaDivisionPreference == "Aggregated":
        return "Aggregated", _NO_RULES
    if rs is not None and rs.weightPreference is not None and rs.weightPreference.static_weights:
        return "StaticWeight", StaticRules.of(rs.weightPreference.static_weights)
    if rs is not None and rs.weightPreference is not None and rs.weightPreference.dynamicWeight:
        return rs.weightPreference.dynamicWeight, _NO_RULES
    return default, _NO_RULES


def analyse(task: Task | BindingSpec, *, name: str = "", current: Sequence[TargetCluster] | None = None,
            default_division: Division = "WaterLevel", default_limit: float | None = None) -> TaskInfo:
    """S3: map a binding to storage tier, network identifier and compute (incl. GPU model)."""
    if isinstance(task, BindingSpec):
        task = Task(spec=task, name=name, current=current or ())
    elif current is not None:
        task = Task(task.spec, task.name, current, task.preferred_regions, task.preferred_zones,
                    task.rebalance, task.workload_class, task.workload, task.primary, task.users,
                    task.latency_slo_ms, task.placement_changed)
    spec = task.spec
    res = spec.resources
    req = requirement_vector(res)
    requested = tuple(i for i, v in enumerate(req.tolist()) if v > 0)
    pl = spec.placement
    net = spec.network
    terms = affinity_terms(pl)
    shorthand = shorthands(spec)
    division, statics = _division(pl, default_division)
    ns = (spec.resource.namespace if spec.resource is not None else None) or "default"
    cur: dict[str, int] = {}
    for t in task.current:
        if t.replicas > 0:
            cur[t.cluster] = cur.get(t.cluster, 0) + t.replicas
    gpu_model = res.gpuModel
    compute = f"gpu:{gpu_model or 'any'}" if res.gpu > 0 or gpu_model or res.minGpuPerformance else "cpu"
    # F3: the topology's counts are the placement; a workload scaled to zero runs nowhere
    topology = pl.statefulTopology if spec.replicas > 0 else None
    return TaskInfo(
        key=task.name,
        replicas=topology.total if topology is not None else spec.replicas,
        priority=spec.priority,
        req=req,
        requested=requested,
        gpu_model=gpu_model,
        storage_tier=res.storageTier,
        network_id=net.identifier if net else None,
        compute_class=compute,
        max_latency_ms=net.maxLatencyMs if net else None,
        min_bandwidth_mbps=net.minBandwidthMbps if net else None,
        capabilities=tuple(spec.capabilities),
        targets=tuple(spec.targetClusters),
        tolerations=tuple((t.key, t.operator, t.value, t.effect) for t in pl.clusterTolerations),
        toleration_seconds=tuple(None if t.tolerationSeconds is None else float(t.tolerationSeconds)
                                 for t in pl.clusterTolerations),
        affinity_terms=terms,
        shorthand=shorthand,
        spread=tuple(pl.spreadConstraints),
        division=division,
        static_weights=statics,
        limit=(pl.waterLevelLimit if default_limit is None or "waterLevelLimit" in pl.model_fields_set
               else default_limit),
        current=cur,
        preferred_regions=tuple(task.preferred_regions),
        preferred_zones=tuple(task.preferred_zones),
        rebalance=task.rebalance,
        cost_first=pl.costFirst,
        workload_class=task.workload_class,
        workload=task.workload,
        datasets=tuple((f"{ns}/{d.name}", d.readGiBPerHour) for d in spec.datasets),
        follow=f"{spec.followUp.namespace or 'default'}/{spec.followUp.name}" if spec.followUp else None,
        affinity_group=_group(ns, spec.affinityGroups.affinityGroup if spec.affinityGroups else None),
        anti_affinity_group=_group(ns, spec.affinityGroups.antiAffinityGroup if spec.affinityGroups else None),
        egress_gib_per_hour=float(net.egressGiBPerHour or 0.0) if net else 0.0,
        min_gpu_perf=res.minGpuPerformance,
        storage_gib=res.storage,
        topology=topology,
        primary=task.primary if topology is not None else None,
        demand=OfferDemand.of(res) if res.gpu or res.storageTier else None,
        users=users_of(pl, task.users),
        latency_slo_ms=pl.latencySLOMs if pl.latencySLOMs is not None else task.latency_slo_ms,
        placement_changed=task.placement_changed,
        evicted=tuple((t.fromCluster, f"moved off it ({t.reason}, {t.producer}) at {t.creationTimestamp}: kept out "
                       "until that move is over") for t in spec.gracefulEvictionTasks),
    )


def _group(namespace: str, group: str | None) -> str | None:
    return f"{namespace}/{group}" if group else None


def users_of(pl: Placement, learned: UserDemand | None) -> UserDemand | None:
    """Declared users first, then those learned from demand."""
    if pl.users:
        return UserDemand.of(((u.kind, u.place, u.weight) for u in pl.users), "declared")
    return learned
