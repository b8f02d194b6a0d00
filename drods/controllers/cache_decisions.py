"""A proposed CachePlan as a decision record (X1, `drods.model.decision`): the dataset to copy, where,
from which copy, and the read volume and transfer cost that made the planner want it."""

from __future__ import annotations

from typing import Any

from drods.model.decision import CACHE_PLAN


def cache_plan_decision(namespace: str, plan: str, spec: dict[str, Any], hot_gib: float,
                        far_cost: float) -> dict[str, Any]:
    cluster, source = spec["cluster"], spec.get("sourceCluster")
    return {"type": CACHE_PLAN, "subject": {"kind": "Dataset", "namespace": namespace, "name": spec["dataset"]},
            "trigger": {"reason": "HotFarReads"},
            "inputs": {"reads": {"cluster": cluster, "readGiBPerHour": spec.get("readGiBPerHour"),
                                 "hotGiBPerHour": hot_gib},
                       "prices": {"transferCostPerHour": spec.get("transferCostPerHour"),
                                  "farCostPerHour": far_cost}},
            "options": [{"name": f"copy to {cluster}", "chosen": True, "feasible": True, "reason": spec["reason"]},
                        {"name": f"keep reading from {source or 'nowhere'}", "chosen": False,
                         "feasible": source is not None,
                         "reason": "above farCostPerHour" if source else "no copy to read from"}],
            "optionsTopK": None, "optionsOmitted": 0,
            "outcome": {"cachePlan": f"{namespace}/{plan}", "phase": "Proposed"},
            "summary": spec["reason"], "runnerUp": None,
            "source": {"journal": "decisions", "cachePlan": f"{namespace}/{plan}"}}
