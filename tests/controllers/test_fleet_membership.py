"""The fleet's membership counter moves only when the per-cluster loops may have to change: a cluster
joins or leaves or changes its sync mode, or gets its first or loses its last Work. A cluster's report
does not move it, so the health probes' and work-status pollers' owners do not look at every cluster
each second. And a member object's Works are found through an index of their main objects, kept as
Works come, change and go."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from drods.controllers.fleet import MemberFleet
from drods.controllers.work_record import Ref, WorkRecord
from drods.model.kinds import CLUSTER, WORK


def _cluster(name: str, *, pull: bool = False, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"syncMode": "Pull" if pull else "Push"},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def _work(binding: str, cluster: str, *refs: Ref, deleting: bool = False) -> WorkRecord:
    refs = refs or (Ref("v1", "ConfigMap", "default", binding),)
    return cast(WorkRecord, SimpleNamespace(binding=binding, cluster=cluster, deleting=deleting, refs=refs,
                                            main=refs[-1]))


def _fleet(works: dict[str, WorkRecord] | None = None) -> MemberFleet:
    cache = {} if works is None else works
    informers = SimpleNamespace(clusters=None, bindings=None, works=SimpleNamespace(cache=cache), cleanups=None)
    return MemberFleet(None, None, informers, SimpleNamespace(invalidate=lambda *_: None))  # type: ignore[arg-type]


def test_membership_moves_on_joins_modes_and_first_or_last_works_only() -> None:
    fleet = _fleet()
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


def test_an_objects_live_works_are_found_by_their_main_object_as_works_come_change_and_go() -> None:
    web = Ref("apps/v1", "Deployment", "default", "web")
    config = Ref("v1", "ConfigMap", "default", "web-config")
    svc = Ref("v1", "Service", "default", "web")
    cache: dict[str, WorkRecord] = {}
    fleet = _fleet(cache)

    def put(key: str, new: WorkRecord | None) -> None:
        old = cache.pop(WORK.key(key), None)
        if new is not None:
            cache[WORK.key(key)] = new
        fleet._on_work(WORK.key(key), old, new)

    def found(cluster: str, ref: Ref) -> set[str]:
        return {w.binding for w in fleet.live_works_delivering(cluster, ref)}

    put("web.a", _work("web", "a", config, web))
    put("svc.a", _work("svc", "a", web))  # another binding delivering the same object
    put("web.b", _work("web", "b", config, web))
    assert found("a", web) == {"web", "svc"}
    assert found("b", web) == {"web"}
    assert found("a", config) == set()  # a manifest before the last is not the Work's main object
    put("svc.a", _work("svc", "a", svc))  # its main object changed
    assert found("a", web) == {"web"} and found("a", svc) == {"svc"}
    put("web.a", _work("web", "a", config, web, deleting=True))
    assert found("a", web) == set()
    put("web.a", None)
    put("svc.a", None)
    assert found("a", svc) == set() and not fleet._by_main.get("a")
