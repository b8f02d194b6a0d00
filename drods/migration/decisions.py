"""A MigrationPlan's phase changes as decision records (X1, `drods.model.decision`): the move a plan
makes (source → target, and who chose the target), what triggered it, and each phase it reaches."""

from __future__ import annotations

from typing import Any

from drods.model.decision import MIGRATION
from drods.model.migration import MigrationPlanSpec


def migration_decision(namespace: str, name: str, spec: MigrationPlanSpec, before: str, status: dict[str, Any],
                       chosen_target: str | None, target_note: str | None) -> dict[str, Any]:
    """The record of one phase change (``before`` → ``status["phase"]``)."""
    target = spec.targetCluster or status.get("targetCluster") or chosen_target
    after = str(status.get("phase"))
    options: list[dict[str, Any]] = []
    if target:
        why = "given in the plan" if spec.targetCluster else (target_note or "the scheduler's choice")
        options.append({"name": str(target), "chosen": True, "feasible": True, "reason": why})
    return {"type": MIGRATION,
            "subject": {"kind": spec.workloadRef.kind, "namespace": namespace, "name": spec.workloadRef.name},
            "trigger": {"reason": spec.trigger, **({"detail": spec.reason} if spec.reason else {})},
            "inputs": {"migration": {"plan": f"{namespace}/{name}", "sourceCluster": spec.sourceCluster,
                                     "targetCluster": target, "dataHook": spec.hook is not None}},
            "options": options, "optionsTopK": None, "optionsOmitted": 0,
            "outcome": {"from": before, "to": after, "message": status.get("message")},
            "summary": f"MigrationPlan {namespace}/{name}: {before} → {after}"
                       + (f" ({spec.sourceCluster} → {target})" if target else "")
                       + (f": {status['message']}" if status.get("message") else ""),
            "runnerUp": None, "source": {"journal": "decisions", "migrationPlan": f"{namespace}/{name}"}}
