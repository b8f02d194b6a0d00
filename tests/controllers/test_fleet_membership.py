"""The fleet's membership counter moves only when the per-cluster loops may have to change: a cluster
joins or leaves or changes its sync mode, or gets its first or loses its last Work. A cluster's report
does not move it, so the health probes' and work-status pollers' owners do not look at every cluster
each second."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from drods.controllers.fleet import MemberFleet
from drods.controllers.work_record import Ref, WorkRecord
from drods.model.kinds import CLUSTER, WORK


def _cluster(name: str, *, pull: bool = False, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"syncMode": "Pull" if pull else "Push"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def _work(binding: str, cluster: str) -> WorkRecord:
    return cast(WorkRecord, SimpleNamespace(binding=binding, cluster=cluster, deleting=False,
                                            refs=(Ref("v1", "ConfigMap", "default", binding),)))


def test_membership_moves_on_joins_modes_and_first_or_last_works_only() -> None:
    informers = SimpleNamespace(clusters=None, bindings=None, works=None, cleanups=None)
    fleet = MemberFleet(None, None, informers, SimpleNamespace(invalidate=lambda *_: None))  # type: ignore[arg-type]
    seen = fleet.membership

    def moved() -> bool:
        nonlocal seen
        before, seen = seen, fleet.membership
        return before != seen

    fleet._on_cluster(CLUSTER.key("a"), None, _cluster("a"))
    assert moved()  # joined
    fleet._on_cluster(CLUSTER.key("a"), _cluster("a"), _cluster("a", ready="False"))
    assert not moved()  # a report, a health write
    fleet._on_cluster(CLUSTER.key("a"), _cluster("a", ready="False"), _cluster("a", pull=True))
    assert moved()  # its sync mode
    fleet._on_work(WORK.key("w1"), None, _work("b1", "a"))
    assert moved()  # its first Work
    fleet._on_work(WORK.key("w2"), None, _work("b2", "a"))
    fleet._on_work(WORK.key("w2"), _work("b2", "a"), _work("b2", "a"))
    assert not moved()
    fleet._on_work(WORK.key("w1"), _work("b1", "a"), None)
    assert not moved()  # it still holds w2
    fleet._on_work(WORK.key("w2"), _work("b2", "a"), None)
    assert moved()  # its last Work
    fleet._on_cluster(CLUSTER.key("a"), _cluster("a", pull=True), None)
    assert moved()  # left
