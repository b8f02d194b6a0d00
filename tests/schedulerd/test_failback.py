"""Fail-back moves only as fast as the fleet's move budget grants (S11)."""

from __future__ import annotations

from drods.scheduler.framework import Phase, ScheduleResult
from drods.schedulerd.failback import fails_back, within_budget
from drods.schedulerd.fleet import MoveBudget
from drods.schedulerd.queue import SchedulingQueue


def _result(pairs: list[tuple[str, int]], phase: Phase = "Scheduled") -> ScheduleResult:
    return ScheduleResult(name="web", phase=phase, requested=6, placed=6, message="", clusters=3, feasible=3,
                          division="Weighted", pairs=tuple(pairs))


def test_fail_back_is_granted_by_the_move_budget_all_or_nothing() -> None:
    now = [0.0]
    moves = MoveBudget(4, lambda: now[0])
    queue = SchedulingQueue(clock=lambda: now[0])
    old = [("a", 3), ("b", 3)]
    back = _result([("a", 2), ("b", 1), ("c", 3)])  # 3 replicas start on c
    assert within_budget(moves, queue, "web", old, back) is back
    assert moves.take(4) == 1  # 4 − 3 left
    moves.give_back(1)
    # 3 more moves: 1 token left → none taken, the binding queued again; a minute later it fits
    assert within_budget(moves, queue, "web", old, back) is None and moves.take(1) == 1
    now[0] = 60.0
    assert within_budget(moves, queue, "web", old, back) is back
    # an unschedulable verdict moves nothing: returned as it is, no budget taken
    parked = _result([], "Unschedulable")
    assert within_budget(MoveBudget(0), queue, "web", old, parked) is parked


def test_a_fail_back_is_told_by_its_reschedule_reason() -> None:
    def obj(reason: str) -> dict[str, object]:
        return {"metadata": {"annotations": {"multicluster.io/reschedule-reason": reason}}}

    assert fails_back(obj("fail back to c: cluster c Ready again"))
    assert not fails_back(obj("cluster c NotReady since 2026-01-01T00:00:00Z (toleration 30s)"))
    assert not fails_back({"metadata": {}})
