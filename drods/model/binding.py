"""The ``Binding`` kind: one scheduling task and its result (SPEC S1-S7, API5).

It is the contract between the scheduler (writes ``status.placement``) and the propagation
controller (turns the placement into per-cluster manifests).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    storage: float = Field(default=0.0, ge=0)
    storageTier: str | None = None


class NetworkRequirements(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    identifier: str | None = None
    maxLatencyMs: float | None = Field(default=None, ge=0)
    minBandwidthMbps: float | None = Field(default=None, ge=0)


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


class TargetCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str
    replicas: int = Field(ge=0)


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
