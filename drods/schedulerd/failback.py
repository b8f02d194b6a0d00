"""The scheduler's side of fail-back (S11): a Binding re-placed because a cluster it failed over
from is Ready again moves only as fast as the fleet's move budget (``fleetChange.maxMovesPerMinute``,
shared with fleet changes and moves towards users) allows; what the budget does not grant now is
decided again after a backoff, so a recovered region does not pull every replica back at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.model.annotations import FAIL_BACK, RESCHEDULE_REASON, annotation
from drods.scheduler.framework import ScheduleResult
from drods.schedulerd.fleet import MoveBudget
from drods.schedulerd.queue import SchedulingQueue
from drods.schedulerd.users import Pairs, moved_replicas


def fails_back(obj: Mapping[str, Any]) -> bool:
    """Was the Binding's last reschedule asked by the descheduler's fail-back?"""
    return (annotation(obj, RESCHEDULE_REASON) or "").startswith(FAIL_BACK)


def within_budget(moves: MoveBudget, queue: SchedulingQueue, name: str, old: Pairs,
                  result: ScheduleResult) -> ScheduleResult | None:
    """``result`` when the budget grants all its moves from ``old`` (taken); else None and the
    binding is queued again after a backoff (none taken)."""
    if result.phase != "Scheduled" or grants(moves, old, result.pairs):
        return result
    queue.retry(name)
    return None


def grants(moves: MoveBudget, old: Pairs, new: Pairs) -> bool:
    """Take every move from ``old`` to ``new`` from the budget, or none (False)."""
    n = moved_replicas(old, new)
    granted = moves.take(n)
    if granted >= n:
        return True
    moves.give_back(granted)
    return False
