"""Karmada's ``apps.karmada.io/v1alpha1`` WorkloadRebalancer: a one-shot request to re-place the
listed workloads from scratch, ignoring where they run now.

Creating one (or adding workloads to it) asks for a fresh decision of each listed workload's Binding
(`drods.controllers.rebalancer`); ``status.observedWorkloads`` says, per workload, whether that was
done (``Successful``) or not (``Failed`` with a reason, e.g. ``ReferencedBindingNotFound``), and
``finishTime`` when every workload has its result. ``spec.ttlSecondsAfterFinished`` later the object
deletes itself (never, without it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

REBALANCER_GROUP = "apps.karmada.io"
REBALANCER_VERSION = "v1alpha1"
BINDING_NOT_FOUND = "ReferencedBindingNotFound"


class WorkloadReference(BaseModel):
    """A workload to re-place (Karmada's ObjectReference: namespace empty for a cluster-scoped one)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    namespace: str | None = None  # printed only when given, as Karmada's
    name: str = Field(min_length=1)

    def key(self) -> tuple[str, str, str, str]:
        return self.apiVersion, self.kind, self.namespace or "", self.name


class WorkloadRebalancerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    workloads: list[WorkloadReference] = Field(min_length=1)
    ttlSecondsAfterFinished: int | None = Field(default=None, ge=0)


class ObservedWorkload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    workload: WorkloadReference
    result: Literal["Successful", "Failed"] | None = None
    reason: str | None = None
