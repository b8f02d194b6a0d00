"""Karmada's ``ClusterTaintPolicy`` (``policy.karmada.io/v1alpha1``, cluster-scoped): taints a
controller adds to the target clusters' ``spec.taints`` while their status conditions match
``addOnConditions`` and removes while they match ``removeOnConditions`` (`drods.controllers.taint_policy`).

As in Karmada: the conditions of a list are ANDed, an empty list never acts, the add-conditions are
judged first, a cluster that stops matching ``targetClusters`` keeps its taints, and deleting the
policy removes nothing. The taints then act as any cluster taint does (NoSchedule keeps new
placements off, NoExecute also evicts what does not tolerate it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.placement import ClusterAffinity


class MatchCondition(BaseModel):
    """One of the cluster's ``status.conditions`` (by type) whose status is (not) among ``statusValues``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    conditionType: str = Field(min_length=1)
    operator: Literal["In", "NotIn"]
    statusValues: list[Literal["True", "False", "Unknown"]] = Field(min_length=1)

    def holds(self, conditions: Sequence[Mapping[str, Any]]) -> bool:
        """A condition the cluster does not report matches neither operator (Karmada's ``conditionMatches``):
        a policy on a condition only some clusters report taints none of the others."""
        status = next((c.get("status") for c in conditions if c.get("type") == self.conditionType), None)
        if status is None:
            return False
        return (status in self.statusValues) == (self.operator == "In")


class PolicyTaint(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: str = Field(min_length=1)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    value: str = ""


class ClusterTaintPolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    targetClusters: ClusterAffinity | None = None
    addOnConditions: list[MatchCondition] = Field(default_factory=list)
    removeOnConditions: list[MatchCondition] = Field(default_factory=list)
    taints: list[PolicyTaint] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_taint_once(self) -> ClusterTaintPolicySpec:
        """One taint per key and effect (Karmada's webhook): the second would silently replace the first."""
        seen: set[tuple[str, str]] = set()
        for i, t in enumerate(self.taints):
            if (t.key, t.effect) in seen:
                raise ValueError(f"taints[{i}]: taint({t.key}:{t.effect}) listed twice")
            seen.add((t.key, t.effect))
        return self


def all_hold(conds: Sequence[MatchCondition], conditions: Sequence[Mapping[str, Any]]) -> bool:
    """ANDed; an empty list never triggers anything."""
    return bool(conds) and all(c.holds(conditions) for c in conds)
