"""The ``Cluster`` kind: one member domain (SPEC API1, F1)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect
    timeAdded: str | None = None


class Credentials(BaseModel):
    """How DRO-DS reaches a push-mode member. Encrypted at rest; never returned in full."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kubeconfig: str | None = None
    context: str | None = None
    token: str | None = None
    caData: str | None = None
    insecureSkipTLSVerify: bool = False


class CostModel(BaseModel):
    """Prices in one currency per hour / per GiB; used by cost-aware scoring (F6).

    ``gpuHourByModel`` prices a GPU model (a model not listed costs ``gpuHour``); ``market`` says
    whether the prices are on-demand or spot (interruptible capacity, weighed with a risk premium)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cpuCoreHour: float = Field(default=0.0, ge=0)
    memoryGiBHour: float = Field(default=0.0, ge=0)
    gpuHour: float = Field(default=0.0, ge=0)
    gpuHourByModel: dict[str, float] = Field(default_factory=dict)
    egressGiB: float = Field(default=0.0, ge=0)
    market: Literal["OnDemand", "Spot"] = "OnDemand"

    @field_validator("gpuHourByModel")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, price in v.items() if price < 0)
        if bad:
            raise ValueError(f"gpuHourByModel: negative price for {', '.join(bad)}")
        return v


class NetworkProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    bandwidthMbps: float | None = Field(default=None, ge=0)
    latencyMs: dict[str, float] = Field(default_factory=dict)
    identifier: str | None = None


class GpuOffer(BaseModel):
    """F1: one GPU model a cluster offers, how many, and how fast relative to a reference GPU (1.0)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field(min_length=1)
    count: int = Field(default=0, ge=0)
    relativePerformance: float = Field(default=1.0, gt=0, allow_inf_nan=False)


class StorageOffer(BaseModel):
    """F1: a storage tier a cluster offers and its capacity."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tier: str = Field(min_length=1)
    capacityGiB: float = Field(ge=0, allow_inf_nan=False)


class ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    # Karmada's ``spec.id``: what the member says it is (its kube-system namespace's UID, read at join);
    # one Cluster per member (`drods.registry.cluster_identity`)
    id: str | None = Field(default=None, min_length=1, max_length=253)
    endpoint: str | None = None
    syncMode: Literal["Push", "Pull"] = "Push"
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    city: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    gpuModels: list[str] = Field(default_factory=list)
    storageTiers: list[str] = Field(default_factory=list)
    # F1: GPUs by model (count, relative performance) and storage by tier (capacity); their models
    # and tiers count as offered like ``gpuModels`` / ``storageTiers``
    gpus: list[GpuOffer] = Field(default_factory=list)
    storage: list[StorageOffer] = Field(default_factory=list)
    taints: list[Taint] = Field(default_factory=list)
    credentials: Credentials | None = None
    cost: CostModel | None = None
    network: NetworkProfile | None = None
    waterLevelLimit: float | None = Field(default=None, gt=0, le=1)
    unschedulable: bool = False
    prometheus: str | None = None
