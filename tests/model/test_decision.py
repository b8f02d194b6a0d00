"""The one decision record (X1): schedule, scaling and route entries read as records, and the
runner-up's loss split into per-plugin contributions that add up to the difference of totals."""

from __future__ import annotations

import pytest

from drods.model.decision import EVICTION, PLACEMENT, REBALANCE, SCALING, from_scaling, from_schedule, runner_up
from drods.steering.route_decisions import route_decision

WEIGHTS = {"LeastWaterLevel": 2.0, "BalancedAllocation": 1.0, "Cost": 1.0}  # Cost did not score: skipped


def _entry(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "time": "2026-11-28T06:00:00.000Z", "binding": "deployment-default-web", "scheduleType": "FirstSchedule",
        "workload": {"kind": "Deployment", "namespace": "default", "name": "web"},
        "result": {"phase": "Scheduled", "placement": [{"cluster": "a", "replicas": 2}], "requested": 2, "placed": 2,
                   "message": "scheduled 2 replicas on 1/4 clusters (3 feasible)"},
        "candidates": {"total": 4, "feasible": 3},
        "filters": {"reasonCounts": {"cordoned": 1}, "reasons": {"d": "cordoned"}, "reasonsOmitted": 0},
        "weights": WEIGHTS, "baseWeights": WEIGHTS, "adjuster": {"mode": "spread", "fleetWaterLevel": 0.4},
        "options": [
            {"cluster": "a", "replicas": 2, "total": 80.0, "room": 10,
             "scores": {"LeastWaterLevel": 90.0, "BalancedAllocation": 60.0}},
            {"cluster": "b", "replicas": 0, "total": 70.0, "room": 10,
             "scores": {"LeastWaterLevel": 75.0, "BalancedAllocation": 60.0}},
            {"cluster": "c", "replicas": 0, "total": 90.0, "room": 0,
             "scores": {"LeastWaterLevel": 95.0, "BalancedAllocation": 80.0}},
        ],
        "optionsOmitted": 0,
    }
    base.update(kw)
    return base


def test_a_schedule_entry_names_every_option_and_why_the_runner_up_lost() -> None:
    rec = from_schedule(_entry())
    assert rec["type"] == PLACEMENT and rec["subject"] == {"kind": "Deployment", "namespace": "default", "name": "web"}
    assert [(o["name"], o["chosen"], o["feasible"]) for o in rec["options"]] == [
        ("a", True, True), ("b", False, True), ("c", False, True), ("d", False, False)]
    ru = rec["runnerUp"]
    # c scored higher but had no room; it is the best unchosen, so it is the runner-up, beaten by room
    assert ru["name"] == "c" and ru["lostBy"] == -10.0 and "room for no replica" in ru["why"]
    b = next(o for o in rec["options"] if o["name"] == "b")
    assert b["reason"].startswith("b scored 10.0 points below a (LeastWaterLevel +10.0")
    assert rec["inputs"]["adjuster"]["fleetWaterLevel"] == 0.4 and rec["optionsTopK"] == 10


def test_the_differences_add_up_to_the_loss_over_the_plugins_that_scored() -> None:
    options = [{"name": "a", "chosen": True, "total": 80.0,
                "scores": {"LeastWaterLevel": 90.0, "BalancedAllocation": 60.0}},
               {"name": "b", "chosen": False, "total": 70.0,
                "scores": {"LeastWaterLevel": 75.0, "BalancedAllocation": 60.0}}]
    ru = runner_up(options, WEIGHTS)
    assert ru is not None and ru["lostBy"] == 10.0
    assert ru["differences"] == {"LeastWaterLevel": 10.0, "BalancedAllocation": 0.0}
    assert sum(ru["differences"].values()) == pytest.approx(ru["lostBy"])
    assert runner_up(options[:1], WEIGHTS) is None  # nothing unchosen: no runner-up


def test_fleet_changes_are_rebalancing_or_eviction_and_old_entries_still_read() -> None:
    assert from_schedule(_entry(scheduleType="FleetChanged", trigger={"kind": "ClusterAdded"}))["type"] == REBALANCE
    failover = {"kind": "Reschedule", "reason": "cluster b NotReady since 2026-11-28T06:00:00Z (toleration 30s)"}
    assert from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=failover))["type"] == EVICTION
    drain = {"kind": "Reschedule", "reason": "drain b: maintenance"}
    assert from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=drain))["type"] == EVICTION
    asked = {"kind": "Reschedule", "reason": "dashboard"}
    assert from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=asked))["type"] == "Reschedule"
    old = _entry(options=None, scores={"total": {"a": 80.0}, "LeastWaterLevel": {"a": 90.0}})
    rec = from_schedule(old)
    assert rec["options"][0] == {"name": "a", "chosen": True, "feasible": True, "total": 80.0,
                                 "scores": {"LeastWaterLevel": 90.0}, "replicas": 2}
    assert rec["optionsTopK"] is None and rec["runnerUp"] is None


def test_a_scaling_entry_reads_as_a_decision_with_its_inputs() -> None:
    rec = from_scaling({"time": "2026-11-28T06:00:00.000Z", "autoscaler": "FederatedHPA/default/web",
                        "workload": "Deployment/default/web", "from": 2, "to": 4, "recommendation": 5,
                        "reason": "maxReplicas", "bounds": [1, 4],
                        "metrics": [{"name": "cpu", "value": 90.0, "target": 60}]})
    assert rec["type"] == SCALING and rec["subject"]["name"] == "web" and rec["trigger"] == {"reason": "Metrics"}
    assert rec["inputs"]["metrics"][0]["target"] == 60
    assert rec["outcome"] == {"from": 2, "to": 4, "reason": "maxReplicas"}
    assert [o["name"] for o in rec["options"] if o["chosen"]] == ["4 replicas"] and "2 → 4" in rec["summary"]
    local = from_scaling({"workload": "Deployment/default/web", "from": 2, "to": 3, "cluster": "edge-1", "reason": "x"})
    assert local["trigger"] == {"reason": "LocalDecision", "cluster": "edge-1"}


def test_a_route_change_is_a_decision_and_a_metric_refresh_is_not() -> None:
    def spec(cluster: str, metric: float) -> dict[str, object]:
        return {"serviceId": "video.example", "registration": {"kind": "ServiceRegistration", "namespace": "default",
                                                               "name": "video"},
                "routes": [{"clientSite": "DFW", "instances": [{"cluster": cluster, "weight": 1.0, "metric": metric,
                                                                "reason": f"lowest delay {metric} ms"}]}]}
    first = route_decision(None, spec("aws-dfw", 10.0))
    assert first is not None and first["trigger"]["reason"] == "FirstRoutes" and first["subject"]["name"] == "video"
    assert route_decision(spec("aws-dfw", 10.0), spec("aws-dfw", 11.0)) is None
    moved = route_decision(spec("aws-dfw", 10.0), spec("azure-lhr", 80.0))
    assert moved is not None and moved["summary"] == "DFW: aws-dfw → azure-lhr"
    assert [(o["name"], o["chosen"]) for o in moved["options"]] == [("DFW → azure-lhr", True), ("DFW → aws-dfw", False)]
    assert moved["options"][1]["reason"] == "replaced: lowest delay 80.0 ms"


def test_a_migrations_start_and_end_are_decisions_naming_the_move_and_its_data() -> None:
    from drods.migration.record import migration_record

    plan = {"metadata": {"name": "db-move", "namespace": "default", "uid": "u1"},
            "spec": {"workloadRef": {"kind": "StatefulSet", "name": "db"}, "sourceCluster": "a", "trigger": "Drain"}}
    status = {"phase": "Succeeded", "binding": "default.statefulset.db", "sourceCluster": "a", "targetCluster": "b",
              "message": "moved", "data": {"mover": "VolumeCopy", "lostWrites": 0}}
    rec = from_schedule({**migration_record(plan, status), "time": "2026-11-28T08:00:00Z"})
    assert rec["type"] == "Migration"
    assert rec["subject"] == {"kind": "StatefulSet", "namespace": "default", "name": "db"}
    assert rec["inputs"]["migration"]["sourceCluster"] == "a" and rec["inputs"]["migration"]["targetCluster"] == "b"
    assert rec["inputs"]["migration"]["data"] == {"mover": "VolumeCopy", "lostWrites": 0}
    assert rec["summary"] == "moved"
