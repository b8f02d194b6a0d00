"""Computing-aware traffic steering objects (SPEC C2, C4-C7, F8): what users register, what the
steering controller publishes, and the network status agents report.

* ``ServiceRegistration`` (namespaced) — a Service ID, the workload whose propagated copies are its
  instances, sensitive attributes, SLA thresholds, strategy, evaluation function, client sites.
* ``ServiceRoute`` (cluster-scoped, named by the Service ID) — written by the steering controller
  only: per client site the chosen instance(s) with weights, metric value and reason.
* ``ServiceExport`` / ``ServiceImport`` (namespaced) — KEP-1645's multi-cluster services: exporting a
  Service makes a directory entry; the import is derived from it, with endpoints per cluster.
* `NetworkStatus` — the body of ``PUT /api/v1/network/status``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from drods.model.binding import ObjectReference
from drods.model.meta import check_name
from drods.model.timefmt import parse_rfc3339

Strategy = Literal["experienceFirst", "costFirst", "resourceFirst"]
Output = Literal["preferred", "balanced"]
Attribute = Literal["delay", "jitter", "loss", "bandwidth", "cost", "load"]
Normalisation = Literal["sigmoid", "minMax", "zScore"]

#: How a metric value that breaks an SLA threshold is written (SPEC C6).
MAX = "MAX"


class Sla(BaseModel):
    """SLA thresholds; an unset one is not checked."""

    model_config = ConfigDict(extra="forbid", strict=True)

    maxDelayMs: float | None = Field(default=None, gt=0)
    maxJitterMs: float | None = Field(default=None, ge=0)
    maxLossPercent: float | None = Field(default=None, ge=0, le=100)
    minBandwidthMbps: float | None = Field(default=None, ge=0)
    maxCostPerHour: float | None = Field(default=None, ge=0)
    maxLoadPercent: float | None = Field(default=None, gt=0, le=100)


class Processing(BaseModel):
    """How the processing leg of the end-to-end delay is estimated from the instance cluster's load:
    an M/M/1 queue, ``serviceTimeMs / (1 - utilisation)``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    serviceTimeMs: float = Field(default=5.0, ge=0)
    instanceCores: float = Field(default=1.0, gt=0)  # cost per hour = cores x the cluster's cpuCoreHour


class NormalisationChoice(BaseModel):
    """L1 normalisation per category (the CATS metric-definition draft)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    communication: Normalisation = "sigmoid"
    computing: Normalisation = "minMax"
    service: Normalisation = "sigmoid"


class Affinity(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    timeoutSeconds: float = Field(default=300.0, gt=0)


class ServiceRegistrationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    serviceId: str = Field(min_length=1, max_length=253)
    workload: ObjectReference
    sensitiveAttributes: list[Attribute] = Field(default_factory=lambda: list[Attribute](["delay"]))
    sla: Sla = Field(default_factory=Sla)
    strategy: Strategy = "experienceFirst"
    evaluation: str = Field(default="e2eDelay", min_length=1, max_length=63)
    clientSites: list[str] = Field(min_length=1)
    output: Output = "preferred"
    balancedInstances: int = Field(default=3, ge=1, le=64)  # balanced: at most this many instances per site
    processing: Processing = Field(default_factory=Processing)
    normalisation: NormalisationChoice = Field(default_factory=NormalisationChoice)
    flowAffinity: Affinity = Field(default_factory=Affinity)
    # C1: how often this service needs the status of its client sites' paths; a site pair is
    # measured as often as the strictest service using it asks.
    statusIntervalSeconds: float = Field(default=30.0, ge=1, le=3600)
    # CCC: when no instance meets the SLA for a client site, offer the workload a nearer cluster.
    placementFeedback: bool = True

    @field_validator("serviceId")
    @classmethod
    def _service_id(cls, v: str) -> str:
        return check_name(v)

    @field_validator("clientSites")
    @classmethod
    def _sites(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("client sites must be unique")
        if any(not s or len(s) > 253 for s in v):
            raise ValueError("a client site is 1-253 characters")
        return v


def foreign_workload(registration: Mapping[str, Any]) -> str | None:
    """Why a ServiceRegistration may not steer the workload it names (None: it may). Like any namespaced
    reference, ``spec.workload`` is of the registration's own namespace: naming another one would let a
    tenant of one namespace draw another's workload to clusters its policy does not name (the placement
    feedback offers it nearer clusters)."""
    own = str((registration.get("metadata") or {}).get("namespace") or "default")
    workload = (registration.get("spec") or {}).get("workload")
    named = workload.get("namespace") if isinstance(workload, Mapping) else None
    if named in (None, "", own):
        return None
    return f"spec.workload.namespace: a ServiceRegistration steers a workload of its own namespace ({own}), " \
        f"not of {named}"


def workload_key(registration: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name) of the workload a registration steers: of its own namespace."""
    ref = (registration.get("spec") or {}).get("workload") or {}
    own = str((registration.get("metadata") or {}).get("namespace") or "default")
    return (str(ref.get("apiVersion")), str(ref.get("kind")), str(ref.get("namespace") or own), str(ref.get("name")))


class RouteInstance(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str
    weight: float = Field(ge=0, le=1)
    metric: float | Literal["MAX"]
    reason: str = ""


class ClientRoute(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clientSite: str
    instances: list[RouteInstance] = Field(default_factory=list)
    changedAt: str | None = None  # RFC 3339: when this client site's route last changed
    eligible: list[str] = Field(default_factory=list)  # every instance meeting the SLA now (flow affinity)


class ServiceRouteSpec(BaseModel):
    """Written by the steering controller (like a Work's manifests): what consumers follow."""

    model_config = ConfigDict(extra="forbid", strict=True)

    serviceId: str
    registration: ObjectReference
    strategy: Strategy
    evaluation: str
    output: Output
    routes: list[ClientRoute] = Field(default_factory=list)
    updated: str = ""
    changes: int = Field(default=0, ge=0)  # route changes published so far (C8 shows in this count)


class ServiceExportSpec(BaseModel):
    """KEP-1645: an empty spec; the Service of the same name and namespace is exported."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ServicePort(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = None
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    appProtocol: str | None = None


class ServiceImportSpec(BaseModel):
    """KEP-1645's ServiceImport, derived by the directory from the exports."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["ClusterSetIP", "Headless"] = "ClusterSetIP"
    ports: list[ServicePort] = Field(default_factory=list)
    clusters: list[str] = Field(default_factory=list)


class Measurement(BaseModel):
    """One site-pair measurement of ``PUT /api/v1/network/status``; metrics it does not know are
    ignored (the answer names them), never fatal."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)

    source_site: str = Field(alias="from", min_length=1, max_length=253)
    to: str = Field(min_length=1, max_length=253)
    delayMs: float | None = Field(default=None, ge=0)
    jitterMs: float | None = Field(default=None, ge=0)
    lossPercent: float | None = Field(default=None, ge=0, le=100)
    bandwidthMbps: float | None = Field(default=None, ge=0)
    timestamp: str | None = None
    # ``measured`` (a probe's round trips: `drods.members.probe`) or anything else: who reported it
    source: str | None = Field(default=None, max_length=253)
    rttMs: float | None = Field(default=None, ge=0)  # measured round trip (with source: measured)
    lossRatio: float | None = Field(default=None, ge=0, le=1)
    measuredAt: str | None = None

    @field_validator("delayMs", "jitterMs", "lossPercent", "bandwidthMbps", "rttMs", "lossRatio", mode="before")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        """Before the bounds: NaN was refused as not "greater than or equal to 0", which says nothing
        of what is wrong with it."""
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"must be a finite number, not {v}")
        return v

    @field_validator("timestamp", "measuredAt")
    @classmethod
    def _a_time_not_ahead(cls, v: str | None) -> str | None:
        """RFC 3339, and not more than 5 minutes ahead of this clock (as feedback's): a measurement from the
        future would stay the freshest for as long."""
        if v is None:
            return v
        at = parse_rfc3339(v)
        if at is None:
            raise ValueError("must be an RFC 3339 time")
        if at > time.time() + 300:
            raise ValueError("is more than 5 minutes in the future")
        return v

    @field_validator("source_site", "to")
    @classmethod
    def _no_slash(cls, v: str) -> str:
        if "/" in v:
            raise ValueError("a site name cannot contain '/'")
        return v

    def values(self) -> dict[str, Any]:
        return {k: v for k, v in (("delayMs", self.delayMs), ("jitterMs", self.jitterMs),
                                  ("lossPercent", self.lossPercent), ("bandwidthMbps", self.bandwidthMbps))
                if v is not None}


class NetworkStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    measurements: list[Measurement] = Field(min_length=1, max_length=10000)
