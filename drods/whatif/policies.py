"""The policies a simulation compares: DRO-DS's water level and three Karmada-faithful baselines.

All four run the same real scheduler (`drods.scheduler.Scheduler`); they differ only in profile,
in the binding's ``placement`` and in what the scheduler is shown:

* ``WaterLevel`` — the default profile (water-level limit filter, LeastWaterLevel & co, the
  adjuster, WaterLevel division); the snapshot sees *observed* use, as monitoring reports it; the
  automatic operations (evacuate / restore, `drods.monitor.autoops`) run on top. It is told what
  the product would know: each workload's users — learned from its demand, which the
  scenario gives as the users' region — the latencies between clusters and regions as measured
  (C2), and the scenario's latency SLA as the users' latency SLO.
* ``AvailableReplicas`` — Karmada's dynamic weight: replicas ∝ how many fit in allocatable −
  requested; no load limit, no re-balancing. The snapshot sees *requests*, not use.
* ``Static`` — Karmada's static weight list (each cluster's ``weight`` in the scenario).
* ``Aggregated`` — Karmada's Aggregated division: as few clusters as fit.

Karmada baselines get Karmada's filters (no water-level limit, no network fit) and its one score
plugin, ClusterLocality. Every policy fails over replicas from a failed cluster (Karmada's taint
based eviction does too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drods.scheduler.profile import Profile

KARMADA_FILTERS = ["Readiness", "TargetClusters", "ClusterAffinity", "TaintToleration", "Capability",
                   "ResourceFit", "SpreadConstraint"]
POLICY_NAMES = ("WaterLevel", "AvailableReplicas", "Static", "Aggregated")


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    profile: Profile
    sees_use: bool  # the snapshot shows observed use (True) or requests (False)
    autoops: bool
    knows_users: bool = False  # users learned from demand, measured latency, the latency SLO

    def placement(self, weights: dict[int, list[str]], limit: float) -> dict[str, Any]:
        """The binding's ``placement`` under this policy; ``weights``: weight → cluster names."""
        if self.name == "WaterLevel":
            return {"waterLevelLimit": limit}
        if self.name == "AvailableReplicas":
            return {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                          "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}
        if self.name == "Aggregated":
            return {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                          "replicaDivisionPreference": "Aggregated"}}
        return {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                      "weightPreference": {"staticWeightList": [
                                          {"targetCluster": {"clusterNames": names}, "weight": w}
                                          for w, names in sorted(weights.items())]}}}


def make_policy(name: str, plugin_args: dict[str, dict[str, Any]] | None = None) -> Policy:
    """``plugin_args``: the default profile's pluginArgs for WaterLevel (the scenario's ``pluginArgs``)."""
    if name == "WaterLevel":
        profile = Profile.from_dict({"pluginArgs": plugin_args}) if plugin_args else Profile.default()
        return Policy(name, profile, sees_use=True, autoops=True, knows_users=True)
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    profile = Profile.from_dict({"name": f"karmada-{name}", "filters": KARMADA_FILTERS,
                                 "scores": {"ClusterLocality": 1.0}})
    return Policy(name, profile, sees_use=False, autoops=False)


def parse_policies(text: str | None) -> list[str]:
    """``"WaterLevel,Static"`` → names, checked; None → all four."""
    if not text:
        return list(POLICY_NAMES)
    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in POLICY_NAMES]
    if bad or not names:
        raise ValueError(f"unknown policies {', '.join(bad) or '(none given)'} (known: {', '.join(POLICY_NAMES)})")
    return list(dict.fromkeys(names))
