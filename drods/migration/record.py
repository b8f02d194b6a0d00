"""A plan's decisions in the schedule history (``/history/schedules/``, the decision-record journal):
when it starts (how its data moves — or ``data: None``, as declared) and when it ends (the data lost
at the switch, as measured, the freeze, or why it failed or rolled back). ``scheduleType:
Migration``, next to the scheduler's own records for the workload's Binding, so ``GET
/api/v1/history/schedules?binding=…`` tells the whole story of a move.

Each record's time is the transition's time as the plan's status holds it, and its key is derived
from the plan's uid and the phase: a pass repeated after a crash writes nothing twice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.machinery.journal import Journal
from drods.model.detection import binding_name
from drods.model.migration import PREPARE_TARGET, TERMINAL
from drods.model.timefmt import parse_rfc3339

SCHEDULE_TYPE = "Migration"
RECORDER = "migration-controller"


def migration_record(plan: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    meta = plan.get("metadata") or {}
    spec = plan.get("spec") or {}
    ref = spec.get("workloadRef") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    why = conds.get("Failed") or conds.get("RolledBack") or {}
    n = int(status.get("sourceReplicas") or 0)
    target = status.get("targetCluster") or spec.get("targetCluster")
    placement = _after(status, target) if status.get("phase") == "Succeeded" else status.get("originalPlacement") or []
    weighed = status.get("targetOptions") or {}
    # X1: the target against the other clusters the scheduler weighed (a runner-up is derived from them)
    options = [{"cluster": o["cluster"], "replicas": n if o["cluster"] == target else 0, "total": o.get("total"),
                "scores": o.get("scores") or {}, **({"room": o["room"]} if "room" in o else {})}
               for o in weighed.get("clusters") or [] if isinstance(o, dict) and o.get("cluster")]
    # a plan refused at its start never recorded its Binding: named from the workload, it is found with it
    binding = status.get("binding") or binding_name(str(ref.get("kind") or "StatefulSet"),
                                                    str(meta.get("namespace") or "default"), str(ref.get("name")))
    return {"binding": binding, "scheduleType": SCHEDULE_TYPE, "scheduler": RECORDER,
            **({"options": options, "weights": weighed.get("weights") or {}} if options else {}),
            "trigger": _trigger(spec),
            "result": {"phase": status.get("phase"), "placement": list(placement), "requested": n, "placed": n,
                       "message": status.get("message")},
            "workload": {"kind": ref.get("kind") or "StatefulSet", "namespace": meta.get("namespace") or "default",
                         "name": ref.get("name")},
            "migration": {k: v for k, v in {
                "plan": f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
                "workload": f"{ref.get('kind') or 'StatefulSet'}/{ref.get('name')}",
                "sourceCluster": status.get("sourceCluster") or spec.get("sourceCluster"),
                "targetCluster": status.get("targetCluster") or spec.get("targetCluster"),
                "trigger": spec.get("trigger"), "requestReason": spec.get("reason") or None,
                "data": status.get("data"), "estimate": status.get("estimate"),
                "catchUp": status.get("catchUp"), "freeze": status.get("freeze"),
                "reason": why.get("reason")}.items() if v is not None}}


def _trigger(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What started the move: who asked for it (Operator, Drain, Evacuation …) and the reason given on the
    plan (`drods migrate --reason`), not how it ended (the record's result says that)."""
    by, reason = str(spec.get("trigger") or "Operator"), str(spec.get("reason") or "")
    return {"kind": SCHEDULE_TYPE, "by": by, "reason": f"{by}: {reason}" if reason and reason != by else by}


def _after(status: Mapping[str, Any], target: Any) -> list[dict[str, Any]]:
    """Where the workload runs once the plan succeeded: the source's replicas on the target."""
    rows = {str(r["cluster"]): int(r.get("replicas") or 0) for r in status.get("originalPlacement") or []
            if isinstance(r, dict) and r.get("cluster")}
    moved = rows.pop(str(status.get("sourceCluster")), 0)
    if target:
        rows[str(target)] = rows.get(str(target), 0) + moved
    return [{"cluster": c, "replicas": k} for c, k in sorted(rows.items()) if k > 0]


def worth_recording(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """A start (Pending → PrepareTarget) or an end (any terminal phase)."""
    phase = after.get("phase")
    return phase != before.get("phase") and (phase == PREPARE_TARGET or phase in TERMINAL)


async def record(journal: Journal, plan: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    ts = parse_rfc3339(status.get("completionTime") if status.get("phase") in TERMINAL else status.get("startTime"))
    uid = str((plan.get("metadata") or {}).get("uid") or "")
    return await journal.append(migration_record(plan, status), ts=ts, dedup=f"migration-{uid}-{status.get('phase')}")
