"""The ``Binding`` kind: one scheduling task and its result (SPEC S1-S7, API5).

It is the contract between the scheduler (writes ``status.placement``) and the member controllers
(turn the placement into one Work per cluster and roll the Works' status back up). Who writes which
status field is in the code: `BindingStatus.SCHEDULER_FIELDS` and `BindingStatus.CONTROLLER_FIELDS`,
enforced by `owned_status`, which every writer of a Binding's status goes through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from drods.model.app_failover import FailoverBehavior, GracefulEvictionTask, without_evicted
from drods.model.dataset import DatasetRead
from drods.model.dispatch import ConflictResolution, Suspension
from drods.model.placement import Placement

BindingPhase = Literal["Pending", "Scheduled", "Unschedulable", "Propagated", "Running", "Failed"]


class ObjectReference(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None


class ReplicaRequirements(BaseModel):
    """Per-replica demand: cpu in cores, memory and storage in GiB."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cpu: float = Field(default=0.0, ge=0)
    memory: float = Field(default=0.0, ge=0)
    gpu: int = Field(default=0, ge=0)
    gpuModel: str | None = None
    # F1: a GPU at least this fast relative to the reference GPU (of ``gpuModel`` when named)
    minGpuPerformance: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    storage: float = Field(default=0.0, ge=0)
    storageTier: str | None = None


class NetworkRequirements(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    identifier: str | None = None
    maxLatencyMs: float | None = Field(default=None, ge=0)
    minBandwidthMbps: float | None = Field(default=None, ge=0)
    # F6: traffic one replica sends out of its cluster per hour, priced at the cluster's egressGiB
    egressGiBPerHour: float | None = Field(default=None, ge=0)


class BindingAffinityGroups(BaseModel):
    """The groups ``placement.workloadAffinity`` put the workload in, each ``<labelKey>=<labelValue>``
    of its template (Karmada's ``affinityGroups``); groups are scoped to the workload's namespace."""

    model_config = ConfigDict(extra="forbid", strict=True)

    affinityGroup: str | None = Field(default=None, min_length=1)
    antiAffinityGroup: str | None = Field(default=None, min_length=1)


class BindingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    resource: ObjectReference | None = None
    replicas: int = Field(default=1, ge=0)
    priority: int = 0
    resources: ReplicaRequirements = Field(default_factory=ReplicaRequirements)
    network: NetworkRequirements | None = None
    capabilities: list[str] = Field(default_factory=list)
    placement: Placement = Field(default_factory=Placement)
    targetClusters: list[str] = Field(default_factory=list)
    regions: list[str] = Field(default_factory=list)
    providers: list[str] = Field(default_factory=list)
    zones: list[str] = Field(default_factory=list)
    cities: list[str] = Field(default_factory=list)
    policyRef: ObjectReference | None = None
    rescheduleTriggeredAt: str | None = None
    # F4: the Datasets (in the workload's namespace) it reads, and how much of each per hour
    datasets: list[DatasetRead] = Field(default_factory=list)
    # F3: the workload this one follows: placed where that one runs (or nearest), moved when it moves
    followUp: ObjectReference | None = None
    # Karmada's dispatch controls, copied from its propagation policy (drods.model.dispatch)
    conflictResolution: ConflictResolution = "Abort"
    suspension: Suspension | None = None
    preserveResourcesOnDeletion: bool = False  # member copies released, not deleted (drods.model.dispatch)
    # Karmada 1.17: written by the resource detector from placement.workloadAffinity and the labels
    affinityGroups: BindingAffinityGroups | None = None
    # Karmada's application failover, copied from its propagation policy (drods.model.app_failover)
    failover: FailoverBehavior | None = None
    # the clusters it was moved off (written by the application failover controller; kept by the detector)
    gracefulEvictionTasks: list[GracefulEvictionTask] = Field(default_factory=list)
    # the labels finished moves preserved (their tasks gone): the copies go on carrying them
    preservedLabelState: dict[str, str] = Field(default_factory=dict)


StatefulRole = Literal["Primary", "Replica"]


class TargetCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str
    replicas: int = Field(ge=0)
    role: StatefulRole | None = None  # F3: with a statefulTopology, which cluster holds the primary


# While a Binding has Works the member controllers keep it (and clean the members) before it goes.
PROPAGATION_FINALIZER = "multicluster.io/propagation"
SCHEDULER_PHASES = frozenset({"Pending", "Scheduled", "Unschedulable"})
# The phases the member controllers move a scheduled placement through (Scheduled → Propagated →
# Running, or Failed); they never write the scheduler's phases other than Scheduled.
PROPAGATING_PHASES = frozenset({"Scheduled", "Propagated", "Running", "Failed"})


class ClusterStatus(BaseModel):
    """One cluster's copy of the workload, as its Work reports it (``status.clusters[]``)."""

    model_config = ConfigDict(extra="allow")

    cluster: str
    replicas: int = 0
    applied: bool = False
    resources: list[str] = Field(default_factory=list)
    observedReplicas: int | None = None
    readyReplicas: int | None = None
    availableReplicas: int | None = None
    updatedReplicas: int | None = None
    complete: bool | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    lastError: str | None = None
    observedTime: str | None = None
    removing: bool = False  # left the placement; emptied once the new placement covers it
    removingSince: str | None = None
    # the workload's measured use in this cluster (`drods.model.workload_usage`), as last reported
    usage: dict[str, Any] | None = None
    # where the copy runs (the Cluster's spec: M1)
    city: str | None = None
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    # a Pod copy's own (the template Pod's status keeps to PodStatus: `drods.controllers.pod_status`)
    phase: str | None = None
    hostIP: str | None = None
    podIP: str | None = None


class BindingStatus(BaseModel):
    """A Binding's status. Each field has one writer; the phase is shared by the rule above."""

    model_config = ConfigDict(extra="allow")

    SCHEDULER_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"phase", "placement", "message", "reasons", "reasonCounts", "reasonsOmitted", "scheduledGeneration",
         "scheduledTime", "estimatedHourlyCost", "users", "schedulerObservingAffinityName"})
    CONTROLLER_FIELDS: ClassVar[frozenset[str]] = frozenset({"phase", "clusters", "conditions", "usage"})

    # the scheduler's (drods.schedulerd.records)
    phase: BindingPhase = "Pending"
    placement: list[TargetCluster] = Field(default_factory=list)
    message: str | None = None
    # a sample of the dropped clusters with their reason (at most ``MAX_STATUS_REASONS``, a few per
    # verdict), every dropped cluster counted by verdict, and how many the sample leaves out
    reasons: dict[str, str] = Field(default_factory=dict)
    reasonCounts: dict[str, int] = Field(default_factory=dict)
    reasonsOmitted: int = 0
    scheduledGeneration: int | None = None
    scheduledTime: str | None = None
    # the name of the clusterAffinities term the placement came from (Karmada's field; none without names)
    schedulerObservingAffinityName: str | None = None
    estimatedHourlyCost: float | None = None  # F6: the placement at the clusters' prices
    # the users the last decision used — source (declared / learned), sites, latency SLO and
    # each chosen cluster's latency from them; absent when it knew none
    users: dict[str, Any] | None = None
    # the member controllers' (drods.controllers.binding)
    clusters: list[ClusterStatus] = Field(default_factory=list)
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] | None = None  # clusters[].usage summed (`drods.model.workload_usage`)


def owned_status(current: Mapping[str, Any], new: Mapping[str, Any], owner: frozenset[str]) -> dict[str, Any]:
    """``new`` as a status write by the owner of ``owner``'s fields: raises ValueError when it changes a
    field someone else owns, so an ownership slip fails in tests instead of fighting in production."""
    keys = set(current) | set(new)
    foreign = sorted(k for k in keys if k not in owner and current.get(k) != new.get(k))
    if foreign:
        raise ValueError(f"status fields {foreign} are not this writer's")
    if owner is BindingStatus.CONTROLLER_FIELDS and new.get("phase") != current.get("phase") \
            and new.get("phase") not in PROPAGATING_PHASES:
        raise ValueError(f"the member controllers cannot set phase {new.get('phase')!r}")
    return dict(new)


# The explanation of a decision in a status: what caches of many Bindings leave out.
EXPLANATION_FIELDS = frozenset({"reasons", "reasonCounts", "reasonsOmitted"})


def without_reasons(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """``status`` without its explanation (``reasons``, ``reasonCounts``, ``reasonsOmitted``), None when
    it has none. The reasons explain a decision to people, who read them through the API from the
    store; no controller reads them, and every decision writes them anew, so caches of many Bindings
    leave them out."""
    if EXPLANATION_FIELDS.isdisjoint(status):
        return None
    return {k: v for k, v in status.items() if k not in EXPLANATION_FIELDS}


def placeable(spec: BindingSpec, offers: list[str]) -> BindingSpec:
    """The spec the scheduler decides on: ``offers`` added (`with_offers`) and the clusters of its
    graceful eviction tasks excluded (application failover, `drods.model.app_failover`)."""
    out = with_offers(spec, offers)
    evicted = [t.fromCluster for t in spec.gracefulEvictionTasks]
    if not evicted:
        return out
    if out is spec:
        out = spec.model_copy()
    out.placement = without_evicted(out.placement, evicted)
    out.targetClusters = [c for c in out.targetClusters if c not in evicted] or out.targetClusters
    return out


def with_offers(spec: BindingSpec, offers: list[str]) -> BindingSpec:
    """``spec`` with the clusters placement feedback offered (CATS CCC) added wherever it names
    clusters: ``targetClusters`` and affinity ``clusterNames`` when set, and taken out of
    ``exclude``. Label, field and location constraints still hold: an offer widens a list of names,
    it never overrides what the user asked of a cluster."""
    if not offers:
        return spec
    out = spec.model_copy(deep=True)

    def widen(names: list[str]) -> list[str]:
        return names + [c for c in offers if c not in names] if names else names

    out.targetClusters = widen(out.targetClusters)
    pl = out.placement
    for term in [pl.clusterAffinity, *pl.clusterAffinities]:
        if term is None:
            continue
        term.clusterNames = widen(term.clusterNames)
        term.exclude = [c for c in term.exclude if c not in offers]
    return out
