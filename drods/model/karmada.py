"""Karmada's policy API as written (``policy.karmada.io/v1alpha1``), so a team moving from Karmada
applies its PropagationPolicy / ClusterPropagationPolicy YAML unchanged.

The placement vocabulary is DRO-DS's own (`drods.model.placement`, Karmada's with the differences in
docs/karmada.md). Fields DRO-DS does not honour are refused by name rather than silently ignored:
``preemption: Always``, ``conflictResolution: Overwrite``, ``failover``, ``suspension``,
``dependentOverrides``, ``activationPreference``. Dependents (ConfigMaps, Secrets, ServiceAccounts,
PVCs a pod template names) always follow their workload, so ``propagateDeps`` is accepted either way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drods.model.placement import Placement
from drods.model.policy import ResourceSelector

KARMADA_POLICY_GROUP = "policy.karmada.io"
KARMADA_POLICY_VERSION = "v1alpha1"


class KarmadaPropagationSpec(BaseModel):
    """``spec`` of a Karmada PropagationPolicy or ClusterPropagationPolicy."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resourceSelectors: list[ResourceSelector] = Field(min_length=1)
    placement: Placement | None = None
    priority: int = 0
    schedulerName: str | None = None
    propagateDeps: bool = False
    preemption: Literal["Never"] = "Never"
    conflictResolution: Literal["Abort"] = "Abort"
    preserveResourcesOnDeletion: bool = False
