"""The scheduler's side of a peak shave: the Binding carries the moves the descheduler planned
(``multicluster.io/peak-shave-moves``, with a reschedule whose reason begins "peak shave"); the
scheduler applies exactly those — as far as the replicas are still where they were planned from and
the target is still Ready and schedulable — instead of deciding afresh, within the fleet's move budget
(``fleetChange.maxMovesPerMinute``, shared with fleet changes, users and fail-back). Out of budget
the binding is queued again after a backoff; nothing left to move keeps the placement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from drods.model.annotations import PEAK_SHAVE, PEAK_SHAVE_MOVES, RESCHEDULE_REASON, annotation
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.snapshot import Snapshot
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


def shaved(obj: Mapping[str, Any], rec: BindingRecord, snap: Snapshot, moves: MoveBudget,
           queue: SchedulingQueue) -> ScheduleResult | None:
    """The placement after the planned moves still possible; None: out of budget (queued again)."""
    name, placement, requested = rec.name, rec.placement, rec.replicas
    new = dict(placement)
    for src, dst, k in planned_moves(obj):
        row = snap.index.get(dst)
        k = min(k, new.get(src, 0))
        if k <= 0 or row is None or not snap.ready[row] or snap.unschedulable[row]:
            continue
        new[src] -= k
        new[dst] = new.get(dst, 0) + k
    pairs = tuple(sorted((c, n) for c, n in new.items() if n > 0))
    reason = annotation(obj, RESCHEDULE_REASON) or PEAK_SHAVE
    if pairs == tuple(sorted(placement)):
        reason = f"{reason}; nothing left to move: the placement stays"
    elif not grants(moves, placement, pairs):
        queue.retry(name)
        return None
    return ScheduleResult(name=name, phase="Scheduled", requested=requested, placed=sum(n for _, n in pairs),
                          message=reason, clusters=snap.n, feasible=len(pairs), division="PeakShave", pairs=pairs,
                          analysis={"peakShave": {"moves": [{"from": s, "to": d, "replicas": k}
                                                            for s, d, k in planned_moves(obj)]}})
