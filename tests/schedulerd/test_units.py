"""Units of the running scheduler: status ownership, why a binding is scheduled, the cache's
readiness and assumed-load rules, the detector's request arithmetic and policy precedence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drods.model.annotations import PREALLOCATION
from drods.model.cluster import ClusterSpec, Taint
from drods.model.detection import _Policy, best_policy, binding_name, pod_requests, replicas_of
from drods.model.kinds import PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY, WORKLOAD_KINDS
from drods.model.policy import ResourceSelector
from drods.model.preallocation import PreallocationHold, parse_hold
from drods.model.selector import LabelSelector
from drods.model.timefmt import rfc3339_ms
from drods.schedulerd.cache import ClusterRecord, SchedulerCache, StatusRecord
from drods.schedulerd.records import (
    FIRST,
    MAX_STATUS_REASONS,
    RECONCILE,
    RESCHEDULE,
    SCALE,
    Decision,
    decode_binding,
    merge_status,
    schedule_type,
)


def binding(gen: int = 1, status: dict[str, Any] | None = None, **spec: Any) -> bytes:
    return json.dumps({"metadata": {"name": "b", "generation": gen},
                       "spec": {"replicas": 4, **spec}, "status": status or {}}).encode()


def rec(raw: bytes) -> Any:
    r = decode_binding("/registry/multicluster.io/bindings/b", raw, 7)
    assert r is not None
    return r


def test_records_share_their_requirements_and_phase() -> None:
    """100,000 kept records repeat a few shapes and phases: one object each, not one per record."""
    status = {"phase": "Unschedulable", "message": "m"}
    a = rec(binding(status=status, resources={"cpu": 0.5, "memory": 1.0}))
    b = rec(binding(2, status=status, resources={"cpu": 0.5, "memory": 1.0}))
    c = rec(binding(status=status, resources={"cpu": 2, "memory": 1.0}))
    assert a.requirements == (0.5, 1.0, 0.0, 1.0, 0.0) and a.requirements is b.requirements
    assert c.requirements == (2.0, 1.0, 0.0, 1.0, 0.0)
    assert a.phase == "Unschedulable" and a.phase is b.phase


def test_schedule_type() -> None:
    assert schedule_type(rec(binding())) == FIRST
    done = {"scheduledGeneration": 1, "scheduledTime": rfc3339_ms(100.0), "phase": "Scheduled",
            "placement": [{"cluster": "a", "replicas": 4}]}
    assert schedule_type(rec(binding(status=done))) is None
    old = rec(binding(status=done))
    assert schedule_type(rec(binding(2, done, replicas=6)), old) == SCALE
    assert schedule_type(rec(binding(2, done, priority=3)), old) == RECONCILE
    trig = rec(binding(2, done, rescheduleTriggeredAt=rfc3339_ms(101.0)))
    assert schedule_type(trig, old) == RESCHEDULE
    assert schedule_type(rec(binding(1, done, rescheduleTriggeredAt=rfc3339_ms(99.0)))) is None  # already handled
    deleting = json.loads(binding())
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert schedule_type(rec(json.dumps(deleting).encode())) is None


def test_merge_status_keeps_what_others_own() -> None:
    prop = {"phase": "Running", "placement": [{"cluster": "a", "replicas": 2}], "clusters": [{"name": "a"}],
            "scheduledGeneration": 1}
    same = merge_status(prop, Decision(True, (("a", 2),), "ok", {}, 2, 100.0))
    assert same["phase"] == "Running" and same["clusters"] == [{"name": "a"}] and same["scheduledGeneration"] == 2
    moved = merge_status(prop, Decision(True, (("a", 1), ("b", 1)), "ok", {}, 3, 100.0))
    assert moved["phase"] == "Scheduled" and moved["placement"] == [{"cluster": "a", "replicas": 1},
                                                                     {"cluster": "b", "replicas": 1}]
    assert moved["clusters"] == [{"name": "a"}]
    stuck = merge_status(prop, Decision(False, (("a", 2),), "0/2 clusters available", {"b": "x"}, 4, 100.0))
    assert stuck["phase"] == "Unschedulable" and stuck["placement"] == prop["placement"]
    assert stuck["reasons"] == {"b": "x"} and stuck["scheduledTime"] == rfc3339_ms(100.0)
    assert "reasons" not in merge_status(stuck, Decision(True, (("a", 2),), "ok", {}, 5, 101.0))
    # an Unschedulable decision says which users it knew (USERS read `none` for a workload with declared users)
    users = {"source": "declared", "sites": [{"site": "LHR", "weight": 1.0}], "latencySLOMs": 30}
    stuck = merge_status({}, Decision(False, (), "0/3 clusters available", {}, 6, 102.0, users=users))
    assert stuck["phase"] == "Unschedulable" and stuck["users"] == users
    assert "users" not in merge_status(stuck, Decision(False, (), "invalid binding spec", {}, 7, 103.0))
    # Karmada's schedulerObservingAffinityName: the term of the placement, kept while Unschedulable
    placed = merge_status({}, Decision(True, (("a", 2),), "ok", {}, 8, 104.0, affinity_name="backup"))
    assert placed["schedulerObservingAffinityName"] == "backup"
    held = merge_status(placed, Decision(False, (("a", 2),), "0/2 clusters available", {}, 9, 105.0))
    assert held["schedulerObservingAffinityName"] == "backup"
    assert "schedulerObservingAffinityName" not in merge_status(held, Decision(True, (("a", 2),), "ok", {}, 10, 106.0))


def test_a_status_samples_its_reasons_and_counts_the_rest() -> None:
    reasons = {f"c{i:03d}": "cluster not ready" for i in range(40)}
    d = Decision(False, (), "0/100 clusters available", reasons, 1, 100.0,
                 reason_counts={"cluster not ready": 90, "cluster cordoned (unschedulable)": 10}, dropped=100)
    st = merge_status({}, d)
    assert len(st["reasons"]) == MAX_STATUS_REASONS == 20
    assert st["reasonCounts"] == {"cluster not ready": 90, "cluster cordoned (unschedulable)": 10}
    assert st["reasonsOmitted"] == 80
    # a later decision that dropped nothing leaves no stale explanation behind
    ok = merge_status(st, Decision(True, (("a", 1),), "ok", {}, 2, 101.0))
    assert not {"reasons", "reasonCounts", "reasonsOmitted"} & set(ok)
    # one that names every dropped cluster omits none
    few = merge_status({}, Decision(False, (), "0/2", {"a": "x", "b": "x"}, 1, 100.0, reason_counts={"x": 2},
                                    dropped=2))
    assert few["reasonCounts"] == {"x": 2} and "reasonsOmitted" not in few


def test_merge_status_carries_the_bill_with_its_placement() -> None:
    priced = merge_status({}, Decision(True, (("a", 2),), "ok", {}, 1, 100.0, 0.25))
    assert priced["estimatedHourlyCost"] == 0.25
    # an Unschedulable retry keeps the placement, and so the bill of it
    stuck = merge_status(priced, Decision(False, (("a", 2),), "no room", {}, 2, 101.0))
    assert stuck["estimatedHourlyCost"] == 0.25 and stuck["placement"] == priced["placement"]
    # a new placement on unpriced clusters drops the old bill
    assert "estimatedHourlyCost" not in merge_status(stuck, Decision(True, (("b", 2),), "ok", {}, 3, 102.0))


def _cache(now: list[float]) -> SchedulerCache:
    return SchedulerCache(clock=lambda: now[0], status_max_age=60.0, assume_ttl=30.0)


def _status(cpu_used: float, t: float) -> StatusRecord:
    return StatusRecord("x", {"cpu": {"capacity": 10.0, "used": cpu_used}, "memory": {"capacity": 40.0}}, t)


def test_cache_readiness_rules() -> None:
    now = [1000.0]
    c = _cache(now)
    spec = ClusterSpec()
    c.on_cluster("none", ClusterRecord("none", {}, spec, None))  # no condition, no status: not ready
    c.on_cluster("cond-false", ClusterRecord("cond-false", {}, spec, False))
    c.on_cluster("fresh", ClusterRecord("fresh", {}, spec, None))
    ev = c.on_status("fresh", _status(1, 990.0))
    assert ev.retry and ev.reasons == ["ClusterRecovered"]
    c.on_status("cond-false", _status(1, 999.0))
    snap = c.snap
    ready = {n: bool(snap.ready[snap.index[n]]) for n in ("none", "cond-false", "fresh")}
    assert ready == {"none": False, "cond-false": False, "fresh": True}
    now[0] = 1100.0  # the status is now 110 s old (> 60)
    c.sweep()
    assert not snap.ready[snap.index["fresh"]]
    ev = c.on_status("fresh", _status(1, 1100.0))
    assert ev.retry and snap.ready[snap.index["fresh"]]
    ev = c.on_status("fresh", _status(5, 1101.0))  # busier: nothing to retry
    assert not ev.retry
    ev = c.on_status("fresh", _status(2, 1102.0))  # capacity freed
    assert ev.retry and ev.reasons == ["ClusterCapacityFreed"]



def test_parked_bindings_are_retried_for_a_cluster_change_that_can_admit_them_only() -> None:
    """A taint added or a cordon admits nothing new (a storm taints every cluster that turns NotReady:
    each retried every parked binding); a taint lifted, an uncordon, new labels or capabilities can."""
    c = _cache([1000.0])
    c.on_cluster("a", ClusterRecord("a", {}, ClusterSpec(), True))
    not_ready = Taint(key="cluster.multicluster.io/not-ready", effect="NoExecute")
    steps: list[tuple[dict[str, str], ClusterSpec, bool]] = [
        ({}, ClusterSpec(taints=[not_ready]), False),
        ({}, ClusterSpec(taints=[not_ready], unschedulable=True), False),
        ({}, ClusterSpec(taints=[not_ready], unschedulable=True, waterLevelLimit=0.9), True),
        ({}, ClusterSpec(taints=[not_ready], waterLevelLimit=0.9), True),  # uncordoned
        ({}, ClusterSpec(waterLevelLimit=0.9), True),  # the taint lifted
        ({"gpu": "yes"}, ClusterSpec(waterLevelLimit=0.9), True),
        ({"gpu": "yes"}, ClusterSpec(waterLevelLimit=0.9, capabilities=["fpga"]), True),
        ({"gpu": "yes"}, ClusterSpec(waterLevelLimit=0.9, capabilities=["fpga"], taints=[not_ready]), False),
    ]
    for labels, spec, retried in steps:
        assert c.on_cluster("a", ClusterRecord("a", labels, spec, True)).retry is retried, (labels, spec)

def _empty_pair(now: list[float]) -> SchedulerCache:
    """Clusters a and b, ready, each with an empty status published at 1000."""
    c = _cache(now)
    for n in ("a", "b"):
        c.on_cluster(n, ClusterRecord(n, {}, ClusterSpec(), True))
        c.on_status(n, _status(0, 1000.0))
    return c


def test_assumed_load_grows_only_and_expires_as_status_covers_it() -> None:
    now = [1000.0]
    c = _empty_pair(now)
    req = (1.0, 0.0, 0.0, 1.0, 0.0)
    c.assume_decision("k", (), (("a", 3),), req, 1000.0)
    assert c.assumed("k") == {"a": 3}
    # scale to 5 with a placed on b: only the growth is new
    grown = (("a", 3), ("b", 2))
    c.assume_decision("k", (("a", 3),), grown, req, 1001.0)
    assert c.assumed("k") == {"a": 3, "b": 2}
    assert c.snap.free[c.snap.index["a"], 0] == pytest.approx(7.0)
    now[0] = 1040.0
    c.on_status("a", _status(3, 1040.0))  # a now reports the replicas; b has not reported since
    assert c.expire() == 1 and c.assumed("k") == {"b": 2}  # a's part is in its status now, b's is not
    c.on_status("b", _status(2, 1040.0))
    now[0] = 1060.0
    assert c.expire() == 1 and c.assumed("k") is None
    # A binding seen in the store (another scheduler decided it): adopted unless status covers it.
    c.observe("other", (("a", 1),), 1050.0, req)
    assert c.assumed("other") == {"a": 1}
    c.observe("old", (("a", 1),), 900.0, req)
    assert c.assumed("old") is None


def test_a_shrink_takes_its_replicas_off_the_assumed_ones_and_scaling_in_turn_piles_nothing_up() -> None:
    """An autoscaler or a cron rule scales a binding down and up within the assumption's lifetime: each
    decision refreshes it, so it never expires — it must stay what the placement holds beyond the
    status, not grow with every scale-up after a scale-down (the fleet looked full at ~60 %)."""
    now = [1000.0]
    c = _cache(now)
    c.on_cluster("a", ClusterRecord("a", {}, ClusterSpec(), True))
    c.on_status("a", _status(12, 1000.0))  # the 12 replicas placed before are in the status
    req = (1.0, 0.0, 0.0, 1.0, 0.0)
    free = c.snap.free[c.snap.index["a"], 0]
    c.assume_decision("k", (("a", 12),), (("a", 20),), req, 1001.0)
    assert c.assumed("k") == {"a": 8}
    c.assume_decision("k", (("a", 20),), (("a", 12),), req, 1002.0)  # the 8 new ones go first
    assert c.assumed("k") is None and c.snap.free[c.snap.index["a"], 0] == pytest.approx(free)
    placed = 12
    for t in range(5):  # up and down again and again: never more than what is placed beyond the status
        c.assume_decision("k", (("a", placed),), (("a", 20),), req, 1003.0 + 2 * t)
        assert c.assumed("k") == {"a": 8}
        c.assume_decision("k", (("a", 20),), (("a", 15),), req, 1004.0 + 2 * t)
        assert c.assumed("k") == {"a": 3}
        placed = 15
    c.assume_decision("k", (("a", 15),), (("a", 2),), req, 1020.0)  # below what the status shows
    assert c.assumed("k") is None


def test_each_cluster_that_reported_stops_counting_its_part_of_an_assumption() -> None:
    """One member slow to report kept a binding's replicas on every other cluster counted twice too."""
    now = [1000.0]
    c = _empty_pair(now)
    req = (1.0, 0.0, 0.0, 1.0, 0.0)
    c.assume_decision("k", (), (("a", 3), ("b", 2)), req, 1000.0)
    now[0] = 1070.0
    c.on_status("a", _status(3, 1065.0))  # a reports the replicas; b has not reported since
    assert c.expire() == 1 and c.assumed("k") == {"b": 2}
    assert c.snap.free[c.snap.index["a"], 0] == pytest.approx(7.0)  # counted once: in a's status
    assert c.snap.free[c.snap.index["b"], 0] == pytest.approx(8.0)  # still assumed on b
    now[0] = 1200.0
    c.on_status("b", _status(2, 1190.0))
    assert c.expire() == 1 and c.assumed("k") is None


def test_an_expired_assumption_retries_the_parked_bindings() -> None:
    now = [1000.0]
    c = _cache(now)
    c.on_cluster("a", ClusterRecord("a", {}, ClusterSpec(), True))
    c.on_status("a", _status(0, 1000.0))
    c.assume_decision("k", (), (("a", 3),), (1.0, 0.0, 0.0, 1.0, 0.0), 1000.0)
    assert not c.sweep().retry
    now[0] = 1070.0
    c.on_status("a", _status(3, 1065.0))
    ev = c.sweep()
    assert c.assumed("k") is None and ev.retry and "AssumedLoadExpired" in ev.reasons


def test_an_assumption_goes_once_the_members_show_its_copies_and_their_status_counts_them() -> None:
    """The pods' requests are in a cluster's allocated load from the first status taken after the copy
    showed them: held for the whole ``assume_ttl`` on top of that, a cluster looked full at half its
    capacity, and a scale-up stopped at 28 of 40 on a fleet at 60 %."""
    now = [1000.0]
    c = _empty_pair(now)
    req = (1.0, 0.0, 0.0, 1.0, 0.0)
    c.assume_decision("k", (), (("a", 3), ("b", 2)), req, 1000.0)
    # the members' copies: a's with all 3 replicas at 1002 (b's still creating its pods)
    c.observe("k", (("a", 3), ("b", 2)), 1000.0, req, shown=(("a", 3, 1002.0), ("b", 1, 1002.0)))
    assert c.assumed("k") == {"a": 3, "b": 2}  # no status taken since: it does not count them yet
    ev = c.on_status("a", _status(3, 1005.0))  # a's status taken after its copy showed its pods
    assert c.assumed("k") == {"b": 2} and ev.retry and "AssumedLoadShown" in ev.reasons  # not in 30 s: now
    c.on_status("b", _status(1, 1005.0))
    assert c.snap.free[c.snap.index["a"], 0] == pytest.approx(7.0)  # counted once: in a's status
    c.observe("k", (("a", 3), ("b", 2)), 1000.0, req, shown=(("a", 3, 1002.0), ("b", 2, 1006.0)))
    assert c.assumed("k") == {"b": 2}  # b's status predates its copy's last pod
    assert c.on_status("b", _status(2, 1010.0)).retry and c.assumed("k") is None
    # a copy read before the decision says nothing of its new replicas
    c.assume_decision("j", (), (("a", 2),), req, 1020.0)
    c.on_status("a", _status(5, 1021.0))
    c.observe("j", (("a", 2),), 1020.0, req, shown=(("a", 2, 1019.0),))
    assert c.assumed("j") == {"a": 2}


def test_an_unschedulable_status_adopts_no_assumption() -> None:
    """A decision that placed nothing keeps the placement from before in its status: adopting it
    would count those replicas twice (and, on clusters that never report again, for good)."""
    now = [1000.0]
    c = _cache(now)
    c.on_cluster("a", ClusterRecord("a", {}, ClusterSpec(), True))
    c.on_status("a", _status(1, 990.0))
    req = (1.0, 0.0, 0.0, 1.0, 0.0)
    free = c.snap.free[c.snap.index["a"], 0]
    c.observe("parked", (("a", 1),), 1000.0, req, unschedulable=True)
    assert c.assumed("parked") is None and c.snap.free[c.snap.index["a"], 0] == free
    # an earlier decision's assumption stays until status covers it, not replaced by the failed one
    c.assume_decision("k", (), (("a", 2),), req, 995.0)
    c.observe("k", (("a", 2),), 1000.0, req, unschedulable=True)
    assert c.assumed("k") == {"a": 2}
    assert c.snap.free[c.snap.index["a"], 0] == pytest.approx(free - 2.0)
    c.observe("k", (("a", 2),), 1001.0, req)  # the same placement scheduled by another process
    assert c.assumed("k") == {"a": 2}


def test_pod_requests_follow_kubernetes_rules() -> None:
    tpl = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
                       {"resources": {"limits": {"cpu": "250m", "memory": "0.25Gi", "nvidia.com/gpu": "1"}}},
                       {"resources": {}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "64Mi", "ephemeral-storage": "1Gi"}}}]}}
    assert pod_requests(tpl) == {"cpu": 2.0, "memory": 0.5, "storage": 1.0, "gpu": 1}
    assert pod_requests(None) == {}
    job, deploy = (next(k for k in WORKLOAD_KINDS if k.kind == n) for n in ("Job", "Deployment"))
    assert replicas_of(job, {"spec": {"parallelism": 3, "completions": 10}}) == 3
    assert replicas_of(deploy, {"spec": {}}) == 1
    long = binding_name("Deployment", "n" * 63, "w" * 253)
    assert len(long) <= 253 and long.startswith("deployment-nnn")


def test_policy_precedence() -> None:
    deploy = next(k for k in WORKLOAD_KINDS if k.kind == "Deployment")
    obj = {"metadata": {"name": "web", "namespace": "default", "labels": {"tier": "frontend"}}}

    def pol(kind: Any, name: str, prio: int, sel: ResourceSelector) -> _Policy:
        return _Policy(kind, name, prio, (sel,), {}, (), ())

    broad = pol(PROPAGATION_POLICY, "all", 100, ResourceSelector(kind="Deployment"))
    labelled = pol(PROPAGATION_POLICY, "front", 1, ResourceSelector(
        kind="Deployment", labelSelector=LabelSelector(matchLabels={"tier": "frontend"})))
    named = pol(RESOURCE_PLACEMENT_POLICY, "web", 0, ResourceSelector(apiVersion="apps/v1", kind="Deployment",
                                                                      name="web", namespace="default"))
    other_ns = pol(RESOURCE_PLACEMENT_POLICY, "elsewhere", 50, ResourceSelector(kind="Deployment", namespace="prod"))
    # Karmada's order: explicit priority first, then how specific the selector is, then the name
    m = best_policy([broad, labelled, named, other_ns], deploy, obj)
    assert m is not None and m.name == "all"
    flat = [pol(p.kind, p.name, 0, p.selectors[0]) for p in (broad, labelled, named, other_ns)]
    m = best_policy(flat, deploy, obj)
    assert m is not None and m.name == "web"
    m = best_policy([flat[0], flat[1], flat[3]], deploy, obj)
    assert m is not None and m.name == "front"
    m = best_policy([broad, pol(PROPAGATION_POLICY, "all-2", 200, ResourceSelector(kind="Deployment"))], deploy, obj)
    assert m is not None and m.name == "all-2"
    assert best_policy([other_ns], deploy, obj) is None


def test_preallocation_hold_raises_the_water_level_until_it_expires() -> None:
    now = [1000.0]
    c = _cache(now)
    hold = PreallocationHold(0.9, 1030.0, "forecast peak")
    assert parse_hold({PREALLOCATION: hold.to_annotation()}) == PreallocationHold(0.9, 1030.0, "forecast peak")
    for bad in ("{", '{"waterLevel": "x", "until": "2026-01-01T00:00:00Z"}', '{"waterLevel": 0.5}', 7):
        assert parse_hold({PREALLOCATION: bad}) is None
    c.on_cluster("x", ClusterRecord("x", {}, ClusterSpec(), True))
    c.on_status("x", _status(3, 1000.0))  # cpu 30 %
    snap = c.snap
    assert snap.water_level[snap.index["x"]] == pytest.approx(0.3)
    c.on_cluster("x", ClusterRecord("x", {}, ClusterSpec(), True, hold))
    assert snap.water_level[snap.index["x"]] == pytest.approx(0.9)
    c.on_status("x", _status(4, 1010.0))  # new reports keep the hold's floor …
    assert snap.water_level[snap.index["x"]] == pytest.approx(0.9)
    c.on_status("x", _status(9.5, 1011.0))  # … which never lowers a higher observation
    assert snap.water_level[snap.index["x"]] == pytest.approx(0.95)
    c.on_status("x", _status(4, 1012.0))
    assert not c.sweep().retry
    now[0] = 1030.0  # the hold runs out: the observed level again, and parked bindings are retried
    ev = c.sweep()
    assert ev.retry and ev.reasons == ["PreallocationExpired"]
    assert snap.water_level[snap.index["x"]] == pytest.approx(0.4)
    assert not c.sweep().retry


def test_the_interpreter_places_replicas_and_pod_templates() -> None:
    from drods.model.detection import desired_binding
    from drods.model.interpreter import interpretation
    from drods.model.kinds import TEMPLATE_KINDS

    kinds = {k.kind: k for k in TEMPLATE_KINDS}
    match = best_policy([_Policy(PROPAGATION_POLICY, "p", 0, (ResourceSelector(kind="CronJob"),), {}, (), ())],
                        kinds["CronJob"], {"metadata": {"name": "n", "namespace": "d"}})
    assert match is not None
    cron = {"metadata": {"name": "n", "namespace": "d"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "2"}}}]}}}}}}
    spec = desired_binding(kinds["CronJob"], cron, match)["spec"]
    assert spec["resources"] == {"cpu": 2.0} and spec["replicas"] == 1
    assert spec["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Duplicated"}
    deploy = {"metadata": {"name": "n"}, "spec": {"replicas": 4, "template": {"spec": {"containers": []}}}}
    spec = desired_binding(kinds["Deployment"], deploy, match)["spec"]
    assert spec["replicas"] == 4 and "placement" not in spec
    assert not interpretation("networking.k8s.io/v1", "Ingress").divisible
    assert interpretation("apps/v1", "ReplicaSet").replicas_of({"spec": {"replicas": True}}) == 1


def test_karmada_namespaced_policies_select_their_namespace_and_win() -> None:
    from drods.model.kinds import KARMADA_CLUSTER_PROPAGATION_POLICY, KARMADA_PROPAGATION_POLICY

    deploy = next(k for k in WORKLOAD_KINDS if k.kind == "Deployment")
    obj = {"metadata": {"name": "web", "namespace": "shop"}}
    by_name = ResourceSelector(apiVersion="apps/v1", kind="Deployment", name="web")
    cluster_wide = _Policy(KARMADA_CLUSTER_PROPAGATION_POLICY, "cpp", 1000, (by_name,), {}, (), ())
    ours = _Policy(RESOURCE_PLACEMENT_POLICY, "rpp", 500, (by_name,), {}, (), ())
    team = _Policy(KARMADA_PROPAGATION_POLICY, "team", 0, (ResourceSelector(kind="Deployment"),), {}, (), (), "shop")
    other = _Policy(KARMADA_PROPAGATION_POLICY, "other", 9, (by_name,), {}, (), (), "billing")
    m = best_policy([cluster_wide, ours, team, other], deploy, obj)
    assert m is not None and (m.name, m.namespace) == ("team", "shop")  # kind-only, priority 0, still wins
    m = best_policy([cluster_wide, ours, other], deploy, obj)
    assert m is not None and m.name == "cpp"  # another namespace's policy never selects; then priority
    assert best_policy([other], deploy, obj) is None


def test_policy_datasets_follow_up_and_whole_stateful_sets() -> None:
    """F4/F3: a DRO-DS policy's ``datasets`` and ``followUp`` go into the Binding; a StatefulSet is
    kept on one cluster unless the policy gives a topology."""
    from drods.model.binding import BindingSpec
    from drods.model.detection import decode_policy, desired_binding
    from drods.model.kinds import TEMPLATE_KINDS
    from drods.store import KeyValue

    kinds = {k.kind: k for k in TEMPLATE_KINDS}
    body = {"metadata": {"name": "p"}, "spec": {
        "resourceSelectors": [{"kind": "StatefulSet"}, {"kind": "Deployment"}],
        "datasets": [{"name": "clicks", "readGiBPerHour": 40}],
        "followUp": {"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": "d", "name": "db"}}}
    pol = decode_policy(PROPAGATION_POLICY)(KeyValue("k", json.dumps(body).encode(), 1, 1, 1))
    assert pol is not None
    sts = {"metadata": {"name": "n", "namespace": "d"}, "spec": {"replicas": 3, "template": {"spec": {}}}}
    match = best_policy([pol], kinds["StatefulSet"], sts)
    assert match is not None
    spec = desired_binding(kinds["StatefulSet"], sts, match)["spec"]
    assert spec["datasets"] == [{"name": "clicks", "readGiBPerHour": 40}] and spec["followUp"]["name"] == "db"
    assert spec["placement"]["spreadConstraints"] == [{"spreadByField": "cluster", "maxGroups": 1}]
    BindingSpec.model_validate(spec)  # a valid Binding
    # a Deployment is divided as usual; a StatefulSet whose policy spreads it is spread as told
    dep = desired_binding(kinds["Deployment"], sts, match)["spec"]
    assert "placement" not in dep
    spread = {**body["spec"], "placement": {"spreadConstraints": [{"spreadByField": "region", "minGroups": 2}]}}
    pol2 = decode_policy(PROPAGATION_POLICY)(KeyValue("k", json.dumps({**body, "spec": spread}).encode(), 1, 1, 1))
    assert pol2 is not None
    m2 = best_policy([pol2], kinds["StatefulSet"], sts)
    assert m2 is not None
    assert desired_binding(kinds["StatefulSet"], sts, m2)["spec"]["placement"]["spreadConstraints"] == \
        [{"spreadByField": "region", "minGroups": 2}]


def test_network_changes_that_retry_parked_bindings() -> None:
    from drods.schedulerd.cache import _moved

    assert _moved(None, 5.0) and _moved(5.0, None) and not _moved(None, None)
    assert not _moved(10.0, 10.9) and _moved(10.0, 11.5)  # probes' jitter within 10 % retries nothing


def test_a_restart_listing_is_news_only_to_bindings_decided_before_each_change_in_constant_time() -> None:
    """`refit._Dated`: a binding decided after every listed cluster joined gets nothing (no pass over
    the 10,000 changes of a large fleet's listing), one decided before all of them the shared concern,
    one decided in between only the later ones; a change happening now is news to every binding."""
    from drods.scheduler.selection import ClusterFacts
    from drods.schedulerd.fleet import CLUSTER_ADDED, FleetChange
    from drods.schedulerd.refit import _Dated

    def change(name: str, since: float | None) -> FleetChange:
        return FleetChange(name, (CLUSTER_ADDED,), ClusterFacts.of(name, {}, ClusterSpec()), None, True, since)

    listed = {f"c{i}": change(f"c{i}", 100.0 + i) for i in range(10_000)}
    dated = _Dated.of(listed)
    assert dated.news_to(20_000.0) == {}
    assert dated.news_to(50.0) is listed and dated.news_to(None) is listed
    assert set(dated.news_to(10_097.5)) == {"c9998", "c9999"}
    live = {**listed, "new": change("new", None)}
    assert set(_Dated.of(live).news_to(20_000.0)) == {"new"}
