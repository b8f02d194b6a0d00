"""Karmada's ``Remedy`` (``remedy.karmada.io/v1alpha1``, cluster-scoped): actions taken on the clusters
it names while their status conditions match (`drods.controllers.remedy`).

As in Karmada: ``clusterAffinity.clusterNames`` names the clusters (absent: every cluster);
``decisionMatches`` lists cluster-condition matches, any one of which triggers the ``actions`` (none
listed: always — the unconditional form an operator uses before a cluster upgrade); the only action is
``TrafficControl``. The controller keeps each cluster's ``status.remedyActions`` the union of the
actions of every Remedy that holds for it, and traffic leaves a cluster with ``TrafficControl``: the
service directory counts its backends not ready, so a MultiClusterIngress, a ServiceExport or a
MultiClusterService stops sending traffic there until the Remedy no longer holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRAFFIC_CONTROL = "TrafficControl"


class RemedyClusterAffinity(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterNames: list[str] = Field(default_factory=list)


class ClusterConditionMatch(BaseModel):
    """The cluster's condition of ``conditionType`` has (``Equal``) or has not (``NotEqual``) the status."""

    model_config = ConfigDict(extra="forbid", strict=True)

    conditionType: str = Field(min_length=1)
    operator: Literal["Equal", "NotEqual"]
    conditionStatus: str = Field(min_length=1)

    def holds(self, conditions: Sequence[Mapping[str, Any]]) -> bool:
        """A condition the cluster does not report has no status: Equal fails, NotEqual holds."""
        status = next((c.get("status") for c in conditions if c.get("type") == self.conditionType), None)
        return (status == self.conditionStatus) == (self.operator == "Equal")


class DecisionMatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterConditionMatch: ClusterConditionMatch | None = None


class RemedySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterAffinity: RemedyClusterAffinity | None = None
    decisionMatches: list[DecisionMatch] = Field(default_factory=list)
    actions: list[Literal["TrafficControl"]] = Field(default_factory=list)

    def applies(self, cluster: str, conditions: Sequence[Mapping[str, Any]]) -> bool:
        if self.clusterAffinity is not None and cluster not in self.clusterAffinity.clusterNames:
            return False
        if not self.decisionMatches:
            return True
        return any(m.clusterConditionMatch is not None and m.clusterConditionMatch.holds(conditions)
                   for m in self.decisionMatches)


def remedy_actions(cluster: str, conditions: Sequence[Mapping[str, Any]], remedies: Sequence[RemedySpec]) -> list[str]:
    """The actions every Remedy that holds for ``cluster`` asks for, sorted, each once."""
    return sorted({a for r in remedies if r.applies(cluster, conditions) for a in r.actions})


def traffic_controlled(cluster: Mapping[str, Any] | None) -> bool:
    """Whether a Remedy keeps traffic off the cluster (its ``status.remedyActions``)."""
    return TRAFFIC_CONTROL in (((cluster or {}).get("status") or {}).get("remedyActions") or [])
