"""The scheduler's side of a peak shave: the Binding carries the moves the descheduler planned
(``multicluster.io/peak-shave-moves``, with a reschedule whose reason begins "peak shave"); the
scheduler applies exactly those — as far as the replicas are still where they were planned from and
the target is still Ready and schedulable, and, for a workload with users and a latency SLO, still
within that SLO of its users — instead of deciding afresh, within the fleet's move budget
(``fleetChange.maxMovesPerMinute``, shared with fleet changes, users and fail-back). Out of budget
the binding is queued again after a backoff; nothing left to move keeps the placement.

The SLO check reads latency exactly as the ``UserLatencySLO`` filter does (`latency_matrix`): a
measured C2 pair first, then the cluster's declared latency, then local for a cluster in the users'
region or city; unknown counts as beyond. The descheduler plans with the pairs measured at its pass;
a pair measured since that puts a planned target beyond the SLO drops that move.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from drods.model.annotations import PEAK_SHAVE, PEAK_SHAVE_MOVES, RESCHEDULE_REASON, annotation
from drods.scheduler.arrays import BoolArr
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.plugins.user_distance import latency_matrix, within_slo
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.users import UserDemand
from drods.schedulerd.failback import grants
from drods.schedulerd.fleet import MoveBudget
from drods.schedulerd.queue import SchedulingQueue
from drods.schedulerd.records import BindingRecord


def shaving(obj: Mapping[str, Any]) -> bool:
    """Was the Binding's last reschedule asked by a peak shave?"""
    return (annotation(obj, RESCHEDULE_REASON) or "").startswith(PEAK_SHAVE)


def planned_moves(obj: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(from, to, replicas) of the moves on the Binding; unreadable entries are left out."""
    try:
        raw = json.loads(annotation(obj, PEAK_SHAVE_MOVES) or "[]")
    except ValueError:
        return []
    return [(str(m["from"]), str(m["to"]), int(m["replicas"])) for m in raw if isinstance(raw, list)
            and isinstance(m, dict) and isinstance(m.get("from"), str) and isinstance(m.get("to"), str)
            and isinstance(m.get("replicas"), int) and m["replicas"] > 0]


def slo_targets(snap: Snapshot, users: UserDemand | None, slo_ms: float | None) -> BoolArr | None:
    """The clusters within ``slo_ms`` of at least one of the users' places (None: no SLO applies)."""
    if users is None or slo_ms is None:
        return None
    return within_slo(latency_matrix(snap, users), slo_ms)


def shaved(obj: Mapping[str, Any], rec: BindingRecord, snap: Snapshot, moves: MoveBudget,
           queue: SchedulingQueue, users: UserDemand | None = None,
           slo_ms: float | None = None) -> ScheduleResult | None:
    """The placement after the planned moves still possible; None: out of budget (queued again)."""
    name, placement, requested = rec.name, rec.placement, rec.replicas
    near = slo_targets(snap, users, slo_ms)
    new = dict(placement)
    beyond: list[str] = []
    for src, dst, k in planned_moves(obj):
        row = snap.index.get(dst)
        k = min(k, new.get(src, 0))
        if k <= 0 or row is None or not snap.ready[row] or snap.unschedulable[row]:
            continue
        if near is not None and not near[row]:
            beyond.append(dst)
            continue
        new[src] -= k
        new[dst] = new.get(dst, 0) + k
    pairs = tuple(sorted((c, n) for c, n in new.items() if n > 0))
    reason = annotation(obj, RESCHEDULE_REASON) or PEAK_SHAVE
    if beyond:
        reason = f"{reason}; not moved to {', '.join(sorted(set(beyond)))}: beyond the users' latency SLO " \
                 f"of {slo_ms:g} ms as measured"
    if pairs == tuple(sorted(placement)):
        reason = f"{reason}; nothing left to move: the placement stays"
    elif not grants(moves, placement, pairs):
        queue.retry(name)
        return None
    return ScheduleResult(name=name, phase="Scheduled", requested=requested, placed=sum(n for _, n in pairs),
                          message=reason, clusters=snap.n, feasible=len(pairs), division="PeakShave", pairs=pairs,
                          analysis={"peakShave": {"moves": [{"from": s, "to": d, "replicas": k}
                                                            for s, d, k in planned_moves(obj)]}})
