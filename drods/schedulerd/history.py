"""Schedule history (API9): one journal entry per decision, explaining it; bounded by lease TTL.

A `Journal` under ``/history/schedules/`` (`drods.machinery.journal`): the decisions of one
status transaction that fall in the same second share a key, written in that transaction, so a
decided status is always explained and a burst of decisions costs a few history writes.
Retention is a store lease (default one hour). Keep it short on etcd: its backend quota (2 GiB by
default) must hold an entry (≈1–2 KB, plus ≈100 bytes per named option: the chosen clusters and up to 10
unchosen ones, X1) for every decision in that window.

An entry (``decision_record``)::

    {"time", "binding", "workload"? ({kind, namespace, name} of spec.resource),
     "generation", "scheduleType", "scheduler", "profile", "trigger"? (a fleet change:
     {"kind": ClusterAdded | ClusterReady | ClusterLabelsChanged | …, "kinds", "clusters", "reason",
      "moves": [{cluster, from, to}]}),
     "result": {"phase", "placement": [{cluster, replicas}], "requested", "placed", "partial", "message"},
     "candidates": {"total", "feasible"}, "unknownClusters" (registered, neither a status nor a Ready condition yet),
     "filters": {"reasonCounts": {reason: n}, "reasons": {cluster: reason} (≤ 50, ≤ 10 a verdict),
                 "reasonsOmitted"},
     "scores": {plugin: {cluster: score}} for the clusters that received replicas, plus "total",
     "options" (X1): [{cluster, replicas, total, room, scores: {plugin: score}}] — the chosen clusters, then the
       best ``OPTIONS_TOP_K`` feasible clusters that received nothing; "optionsOmitted": feasible ones not named,
     "weights": {plugin: weight this cycle}, "baseWeights": {plugin: profile weight},
     "adjuster": {"mode": "spread"|"pack"|"blend", "spread": σ, "fleetWaterLevel", "surge"},
     "division" (or "CostFirst"), "estimatedHourlyCost" (F6, null without prices),
     "dataMovedGiBPerHour" (F4: dataset reads from another cluster, null without datasets), "affinityTerm",
     "topology"? (F3, a stateful topology: {"primary", "replicas", "primaryChosenBy": current | promoted |
     affinity | score, "promotedFrom"?}; each placement row then has its "role": Primary | Replica),
     "analysis": {storageTier, networkIdentifier, compute}, "timingsMs",
     "usage"? (the Binding's ``status.usage`` when the decision was taken: the workload's measured use)}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from drods.machinery.journal import Journal
from drods.model import jsondoc
from drods.model.keys import SCHEDULES_PREFIX
from drods.model.timefmt import rfc3339_ms
from drods.scheduler.framework import ScheduleResult
from drods.schedulerd.records import placement_json
from drods.store import Store

# Up to 50 dropped clusters named, at most 10 of any one verdict: a rare verdict (the one capacity
# drop among 900 affinity drops) is shown next to the common one; ``reasonCounts`` counts them all.
MAX_HISTORY_REASONS = 50
HISTORY_REASONS_PER_VERDICT = 10


def measured_usage(raw: bytes) -> dict[str, Any] | None:
    """X1: the workload's measured use as its Binding's ``status.usage`` had it when the decision was
    taken (`drods.model.workload_usage`); the bytes are decoded only when they hold one."""
    if b'"usage"' not in raw:
        return None
    try:
        usage = (jsondoc.loads(raw).get("status") or {}).get("usage")
    except (ValueError, AttributeError):
        return None
    return dict(usage) if isinstance(usage, dict) else None


def adjuster_mode(spread: float) -> str:
    return "spread" if spread >= 1.0 else "pack" if spread <= 0.0 else "blend"


def decision_record(result: ScheduleResult, *, binding: str, generation: int, schedule_type: str, ts: float,
                    scheduler: str, profile: str, base_weights: Mapping[str, float],
                    trigger: Mapping[str, Any] | None = None, unknown_clusters: int = 0,
                    workload: Mapping[str, str] | None = None,
                    usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The explanation of one decision (shape in the module docstring)."""
    shown, total = result.reasons_sample(MAX_HISTORY_REASONS, HISTORY_REASONS_PER_VERDICT)
    placed = result.placed
    rec: dict[str, Any] = {
        "time": rfc3339_ms(ts),
        "binding": binding,
        "generation": generation,
        "scheduleType": schedule_type,
        "scheduler": scheduler,
        "profile": profile,
        "result": {"phase": result.phase, "placement": placement_json(result.pairs, result.roles),
                   "requested": result.requested, "placed": placed, "partial": result.partial,
                   "message": result.message},
        "candidates": {"total": result.clusters, "feasible": result.feasible},
        "unknownClusters": unknown_clusters,
        "filters": {"reasonCounts": result.reason_counts(), "reasons": shown,
                    "reasonsOmitted": max(0, total - len(shown))},
        "scores": result.scores,
        "options": result.options(),
        "optionsOmitted": result.options_omitted,
        "weights": {k: round(v, 4) for k, v in result.weights.items()},
        "baseWeights": dict(base_weights),
        "adjuster": {"mode": adjuster_mode(result.spread) if result.weights else None,
                     "spread": round(result.spread, 4), "fleetWaterLevel": round(result.fleet_water_level, 4),
                     "surge": round(result.surge, 4)},
        "division": result.division,
        "estimatedHourlyCost": result.estimated_hourly_cost,
        "dataMovedGiBPerHour": result.data_moved_gib_per_hour,
        "affinityTerm": result.affinity_term,
        "analysis": result.analysis,
        "timingsMs": {k: round(v, 4) for k, v in result.timings_ms.items()},
    }
    if result.topology is not None:
        rec["topology"] = dict(result.topology)
    if trigger:
        rec["trigger"] = dict(trigger)
    if workload:
        rec["workload"] = dict(workload)
    if usage:
        rec["usage"] = dict(usage)
    return rec


def schedule_history(store: Store, retention_s: float = 3600.0, clock: Callable[[], float] = time.time) -> Journal:
    return Journal(store, SCHEDULES_PREFIX, retention_s=retention_s, clock=clock)


def for_binding(binding: str | None) -> Callable[[dict[str, Any]], bool] | None:
    """A query filter: the entries of one binding (None: every entry)."""
    return None if binding is None else (lambda e: e.get("binding") == binding)
