"""A CachePlan as a decision record (X1, `drods.model.decision`): the dataset to copy, where, from which
copy, and the read volume and transfer cost that made the planner want it; the runner-up is to keep
reading from the nearest copy, which lost by what those reads cost beyond ``farCostPerHour``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.model.decision import CACHE_PLAN


def cache_plan_decision(namespace: str, plan: str, spec: dict[str, Any], hot_gib: float,
                        far_cost: float) -> dict[str, Any]:
    cluster = spec["cluster"]
    return {"type": CACHE_PLAN, "subject": {"kind": "Dataset", "namespace": namespace, "name": spec["dataset"]},
            "trigger": {"reason": "HotFarReads"},
            "inputs": {"reads": {"cluster": cluster, "readGiBPerHour": spec.get("readGiBPerHour"),
                                 "hotGiBPerHour": hot_gib},
                       "prices": {"transferCostPerHour": spec.get("transferCostPerHour"),
                                  "farCostPerHour": far_cost}},
            "options": cache_options(spec, far_cost),
            "optionsTopK": None, "optionsOmitted": 0,
            "outcome": {"cachePlan": f"{namespace}/{plan}", "phase": "Proposed"},
            "summary": spec["reason"], "runnerUp": cache_runner_up(spec, far_cost),
            "source": {"journal": "decisions", "cachePlan": f"{namespace}/{plan}"}}


def cache_options(spec: Mapping[str, Any], far_cost: float | None) -> list[dict[str, Any]]:
    """Copy the dataset to the reading cluster (chosen), or keep reading it from the nearest copy."""
    cluster, source = spec.get("cluster"), spec.get("sourceCluster")
    cost = spec.get("transferCostPerHour")
    keep = (f"{cost:.2f}/h of transfer, above farCostPerHour {far_cost:.2f}/h"
            if isinstance(cost, int | float) and far_cost is not None else "above farCostPerHour")
    return [{"name": f"copy to {cluster}", "chosen": True, "feasible": True, "reason": spec.get("reason"),
             "transferCostPerHour": 0.0},
            {"name": f"keep reading from {source or 'nowhere'}", "chosen": False, "feasible": source is not None,
             "reason": keep if source else "no copy to read from", "transferCostPerHour": cost}]


def cache_runner_up(spec: Mapping[str, Any], far_cost: float | None) -> dict[str, Any] | None:
    """Keeping the reads remote, and the cost difference that lost it (None: no copy to read from)."""
    source, cost = spec.get("sourceCluster"), spec.get("transferCostPerHour")
    if not source:
        return None
    if not isinstance(cost, int | float):  # a plan written by hand: no read cost was weighed
        return {"name": f"keep reading from {source}", "against": f"copy to {spec.get('cluster')}", "lostBy": None,
                "differences": {}, "why": f"the plan was approved as written: a copy in {spec.get('cluster')} "
                                          f"reads locally instead of from {source} (no read cost was weighed)"}
    gib = spec.get("readGiBPerHour")
    over = round(float(cost) - float(far_cost or 0.0), 3)
    reads = f"{gib:g} GiB/h " if isinstance(gib, int | float) else ""
    return {"name": f"keep reading from {source}", "against": f"copy to {spec.get('cluster')}", "lostBy": over,
            "differences": {"transferCostPerHour": round(float(cost), 3),
                            **({"farCostPerHour": round(float(far_cost), 3)} if far_cost is not None else {})},
            "why": f"reading {reads}from {source} costs {float(cost):.2f}/h in transfer"
                   + (f", {over:.2f}/h above farCostPerHour {far_cost:.2f}/h" if far_cost is not None else "")
                   + f"; a copy in {spec.get('cluster')} reads locally"}
