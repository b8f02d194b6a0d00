"""Karmada's policy API as written (``policy.karmada.io/v1alpha1``), so a team moving from Karmada
applies its PropagationPolicy / ClusterPropagationPolicy / OverridePolicy / ClusterOverridePolicy
YAML unchanged. Override policies are applied as DRO-DS's own (`as_override_policy`): cluster-wide
ones first, namespaced ones after (so they win), each group in name order.

The placement vocabulary is DRO-DS's own (`drods.model.placement`, Karmada's with the differences in
docs/karmada.md). Every v1alpha1 propagation field is read with Karmada's meaning: ``preemption``,
``conflictResolution`` and ``suspension`` (`drods.model.dispatch`), ``dependentOverrides``,
``activationPreference: Lazy`` and ``schedulePriority`` (the resource detector acts on them).
Dependents (ConfigMaps, Secrets, ServiceAccounts, PVCs a pod template names) always follow their
workload, so ``propagateDeps`` — and the deprecated ``association`` it replaced, still in Karmada's
API and its own samples — are accepted either way, except that ``failover.application`` needs
``propagateDeps: true`` as Karmada's webhook says. The cross-field rules of that webhook are kept
(`KarmadaPropagationSpec._karmada_webhook_rules`; docs/karmada.md lists them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.app_failover import FailoverBehavior
from drods.model.dispatch import ConflictResolution, Suspension
from drods.model.placement import ClusterAffinity, Placement, karmada_spread_problem
from drods.model.policy import (
    ClusterOverridePolicySpec,
    CommandArgsOverrider,
    FieldOverrider,
    ImageOverrider,
    MapOverrider,
    OverrideClusterSelector,
    OverrideRule,
    PlaintextPatch,
    ResourceSelector,
)

KARMADA_POLICY_GROUP = "policy.karmada.io"
KARMADA_POLICY_VERSION = "v1alpha1"


class SchedulePriority(BaseModel):
    """Where a workload's scheduling priority comes from: a Kubernetes PriorityClass's ``value``
    (the scheduling queue takes higher values first)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    priorityClassSource: Literal["KubePriorityClass"]
    priorityClassName: str = Field(min_length=1)


class KarmadaPropagationSpec(BaseModel):
    """``spec`` of a Karmada PropagationPolicy or ClusterPropagationPolicy."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resourceSelectors: list[ResourceSelector] = Field(min_length=1)
    placement: Placement | None = None
    priority: int = 0
    schedulerName: str | None = None
    propagateDeps: bool = False
    association: bool = False  # deprecated in Karmada for propagateDeps; dependents follow either way
    # Always: may take a resource another (lower-priority) policy has claimed; Never keeps claims
    preemption: Literal["Always", "Never"] = "Never"
    # OverridePolicies (in the policy's namespace) that must exist before the policy takes effect
    dependentOverrides: list[str] = Field(default_factory=list)
    conflictResolution: ConflictResolution = "Abort"
    # Lazy: a policy change reaches a resource it already placed only when the resource changes
    activationPreference: Literal["Lazy"] | None = None
    suspension: Suspension | None = None
    preserveResourcesOnDeletion: bool = False
    schedulePriority: SchedulePriority | None = None
    # application failover (drods.model.app_failover); copied into the Binding
    failover: FailoverBehavior | None = None

    @model_validator(mode="after")
    def _karmada_webhook_rules(self) -> KarmadaPropagationSpec:
        """What Karmada's validating webhook refuses across fields, refused here too (a policy that
        Karmada would not take should not quietly mean something here). Each message names its field
        first, so the API reports it at that field."""
        if self.preemption == "Always":
            for i, sel in enumerate(self.resourceSelectors):
                if not sel.name:
                    raise ValueError(f"resourceSelectors[{i}].name: must be set when preemption is Always; a "
                                     "selector without a name could take over resources other policies claim")
        if self.placement is not None and (problem := karmada_spread_problem(self.placement.spreadConstraints)):
            raise ValueError(f"placement.spreadConstraints: {problem}")
        if self.failover is not None and self.failover.application is not None and not self.propagateDeps:
            raise ValueError("propagateDeps: must be true when failover.application is set (the dependents move "
                             "with the application)")
        return self


class KarmadaClusterAffinity(ClusterAffinity):
    """An override rule's ``targetCluster`` (Karmada's ClusterAffinity): empty means every cluster."""


class KarmadaOverriders(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    plaintext: list[PlaintextPatch] = Field(default_factory=list)
    imageOverrider: list[ImageOverrider] = Field(default_factory=list)
    commandOverrider: list[CommandArgsOverrider] = Field(default_factory=list)
    argsOverrider: list[CommandArgsOverrider] = Field(default_factory=list)
    labelsOverrider: list[MapOverrider] = Field(default_factory=list)
    annotationsOverrider: list[MapOverrider] = Field(default_factory=list)
    fieldOverrider: list[FieldOverrider] = Field(default_factory=list)


class KarmadaOverrideRule(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    targetCluster: KarmadaClusterAffinity | None = None
    overriders: KarmadaOverriders


class KarmadaOverrideSpec(BaseModel):
    """``spec`` of a Karmada OverridePolicy or ClusterOverridePolicy (``overrideRules`` form; the
    deprecated top-level ``targetCluster``/``overriders`` form is refused). No ``resourceSelectors``
    selects every resource (of the policy's namespace, for an OverridePolicy)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resourceSelectors: list[ResourceSelector] = Field(default_factory=list)
    overrideRules: list[KarmadaOverrideRule] = Field(min_length=1)

    def as_override_policy(self, namespace: str | None) -> ClusterOverridePolicySpec:
        """The same overrides in DRO-DS's form; a namespaced policy selects only its namespace (its
        selectors say so, and `apply_overrides` keeps a ``namespace/name`` policy to its namespace)."""
        selectors = [s.model_copy(update={"namespace": namespace}) if namespace else s
                     for s in self.resourceSelectors]
        rules = []
        for r in self.overrideRules:
            target = r.targetCluster or KarmadaClusterAffinity()
            o = r.overriders
            rules.append(OverrideRule(
                clusterSelector=OverrideClusterSelector(names=list(target.clusterNames),
                                                        labelSelector=target.labelSelector,
                                                        exclude=list(target.exclude),
                                                        fieldSelector=target.fieldSelector),
                plaintext=list(o.plaintext),
                imageOverrider=list(o.imageOverrider), commandOverrider=list(o.commandOverrider),
                argsOverrider=list(o.argsOverrider), labelsOverrider=list(o.labelsOverrider),
                annotationsOverrider=list(o.annotationsOverrider), fieldOverrider=list(o.fieldOverrider)))
        return ClusterOverridePolicySpec(resourceSelectors=selectors, overrides=rules)
