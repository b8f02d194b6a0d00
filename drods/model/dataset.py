"""The ``Dataset`` kind (F4): a body of data and where its copies are, so placement can weigh the
cross-domain transfer a workload that reads it would cause."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class DatasetLocation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str = Field(min_length=1)
    kind: Literal["Primary", "Replica", "Cache"] = "Replica"


class DatasetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sizeGiB: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # None: size unknown, no copy charge
    locations: list[DatasetLocation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_primary(self) -> DatasetSpec:
        if sum(1 for loc in self.locations if loc.kind == "Primary") > 1:
            raise ValueError("locations: at most one Primary")
        names = [loc.cluster for loc in self.locations]
        if len(set(names)) != len(names):
            raise ValueError("locations: a cluster is listed twice")
        return self


class DatasetRead(BaseModel):
    """What a workload reads (``datasets`` in its Binding or policy): a Dataset in the workload's
    namespace, and how much of it per hour."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1)
    readGiBPerHour: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class CachePlanSpec(BaseModel):
    """``CachePlan`` (multicluster.io/v1alpha1, namespaced): replicate ``dataset`` to ``cluster`` as a
    Cache copy, and why. Proposed by the cache planner when hot data is read from far away (the
    transfer cost from the nearest copy above the planner's ``farCostPerHour``); with
    ``approved: true`` a copy Job moves the bytes into ``cluster`` and the Dataset gains the Cache
    location once the copy verifies (status.phase Copying → Verifying → Ready, or Failed);
    ``approved: false`` afterwards withdraws it (`drods.controllers.cache_copy`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    dataset: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    sourceCluster: str | None = None  # the nearest copy the cache would be filled from
    readGiBPerHour: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    # what those reads cost per hour from ``sourceCluster`` (egress × link, as DataLocality prices it)
    transferCostPerHour: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reason: str = ""
    approved: bool = False
