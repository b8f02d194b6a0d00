"""The one decision record (X1): schedule, scaling and route entries read as records, and the
runner-up's loss split into per-plugin contributions that add up to the difference of totals."""

from __future__ import annotations

import json

import pytest

from drods.model.decision import (
    EVICTION,
    PLACEMENT,
    REBALANCE,
    SCALING,
    SOURCES,
    from_operation,
    from_scaling,
    from_schedule,
    runner_up,
    with_why_not,
)
from drods.steering.route_decisions import Evaluated, route_decision

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


def test_a_higher_scored_cluster_the_users_division_held_back_is_said_so() -> None:
    """c scored above the chosen a with room to spare: the users' near-ceiling rule kept it out, and the
    why-not says that rather than naming spread constraints or affinity tiers the binding has none of."""
    options = [{"cluster": "a", "replicas": 2, "total": 80.0, "room": 10, "scores": {"LeastWaterLevel": 90.0}},
               {"cluster": "c", "replicas": 0, "total": 90.0, "room": 10, "scores": {"LeastWaterLevel": 95.0}}]
    held = "the users' nearest clusters took replicas up to water level 0.62 (their group's mean + 0.03); the rest " \
        "went to clusters farther away"
    rec = from_schedule(_entry(options=options, analysis={"users": {"source": "declared", "nearCeiling": held}}))
    assert rec["runnerUp"]["why"] == f"c scored 10.0 points above a but the division by users kept it out: {held}"
    plain = from_schedule(_entry(options=options))
    assert "outside the selection" in plain["runnerUp"]["why"]


def test_a_higher_scored_cluster_left_out_by_cost_first_or_an_affinity_tier_is_said_so() -> None:
    """It said "outside the selection (spread constraints, affinity tier or …)" for a cost-first binding and
    for a reader kept beside its data: the rule that chose is named."""
    options = [{"cluster": "a", "replicas": 2, "total": 50.0, "room": 10, "scores": {"Cost": 100.0}},
               {"cluster": "c", "replicas": 0, "total": 96.8, "room": 10, "scores": {"Cost": 10.0}}]
    cheap = from_schedule(_entry(options=options, division="CostFirst"))
    said = "c received nothing: placement.costFirst fills the cheapest clusters first (a is cheaper or the " \
        "replicas were already placed)"
    assert cheap["runnerUp"]["why"] == said and cheap["inputs"]["division"] == "CostFirst"
    # a lower-scored one too: the prices chose, not the scores (it said "scored 0.7 points below")
    lower = [options[0], {**options[1], "total": 49.3}]
    assert from_schedule(_entry(options=lower, division="CostFirst"))["runnerUp"]["why"] == said
    conc = {"plugins": ["DataLocality"], "kept": 1, "of": 3, "affinitySpread": 100.0, "tierFrom": 99.5}
    data = from_schedule(_entry(options=options, analysis={"concentration": conc}))
    assert data["runnerUp"]["why"] == "c scored 46.8 points above a but the affinity concentration kept the 1 of 3 " \
        "candidates whose DataLocality score is within the best tier (from 99.5)"


def test_the_history_entry_carries_the_record_s_why_not_for_each_unchosen_feasible_cluster() -> None:
    """The dashboard showed its own copy of these rules (and had to be taught each case twice): it now reads
    the sentences the record gives, beside each schedule-history entry."""
    options = [{"cluster": "a", "replicas": 2, "total": 50.0, "room": 10, "scores": {"Cost": 100.0}},
               {"cluster": "c", "replicas": 0, "total": 96.8, "room": 10, "scores": {"Cost": 10.0}}]
    for entry in (_entry(), _entry(options=options, division="CostFirst")):
        rec, shown = from_schedule(entry), with_why_not(entry)
        assert shown["whyNot"] == {o["name"]: o["reason"] for o in rec["options"] if o["feasible"] and not o["chosen"]}
        assert shown["runnerUp"] == rec["runnerUp"] and shown["options"] == entry["options"]
    assert list(with_why_not(_entry())["whyNot"]) == ["b", "c"] and "d" not in with_why_not(_entry())["whyNot"]
    assert "cheapest" in with_why_not(_entry(options=options, division="CostFirst"))["whyNot"]["c"]


def test_an_exact_tie_is_said_as_a_tie_not_a_loss_of_zero_points() -> None:
    """A migration's given target against a cluster scoring the same read "scored 0.0 points below"."""
    options = [{"cluster": "a", "replicas": 2, "total": 70.0, "room": 10, "scores": {"LeastWaterLevel": 70.0}},
               {"cluster": "b", "replicas": 0, "total": 70.02, "room": 10, "scores": {"LeastWaterLevel": 70.02}}]
    why = from_schedule(_entry(options=options))["runnerUp"]["why"]
    assert why == "b tied with a at 70.0 points; the tie went to a", why


def test_a_kept_static_weight_placement_says_d2_not_too_few_replicas() -> None:
    """A policy edit adds m3 at weight 1 beside m2's 1, 4 replicas: the placement stays m2:4 (D2), and the
    why-not said the replicas were 'too few' for m3 to get one where its weight would give it two."""
    options = [{"cluster": "m2", "replicas": 4, "total": 50.0, "room": 20, "scores": {}, "staticWeight": 1},
               {"cluster": "m3", "replicas": 0, "total": 50.0, "room": 20, "scores": {}, "staticWeight": 1}]
    result = {"phase": "Scheduled", "placement": [{"cluster": "m2", "replicas": 4}], "requested": 4, "placed": 4}
    rec = from_schedule(_entry(options=options, scheduleType="ReconcileSchedule", result=result))
    why = rec["runnerUp"]["why"]
    assert why.startswith("m3 has static weight 1 (about 2.0 replicas of the total) but the placement stays") \
        and "D2" in why, why
    first = from_schedule(_entry(options=options, scheduleType="FirstSchedule", result=result))
    assert "too few for it to get one" in first["runnerUp"]["why"]


def test_a_kept_static_weight_placement_its_weights_would_divide_otherwise_is_said_in_the_summary() -> None:
    """Weights 1:1 → 3:1 at 4 replicas left 2:2 (D2): both clusters hold replicas, so no why-not said it."""
    options = [{"cluster": "m1", "replicas": 2, "total": 50.0, "room": 20, "scores": {}, "staticWeight": 3},
               {"cluster": "m2", "replicas": 2, "total": 50.0, "room": 20, "scores": {}, "staticWeight": 1}]
    result = {"phase": "Scheduled", "placement": [{"cluster": "m1", "replicas": 2}, {"cluster": "m2", "replicas": 2}],
              "requested": 4, "placed": 4, "message": "scheduled 4 replicas on 2/2 clusters"}
    rec = from_schedule(_entry(options=options, scheduleType="ReconcileSchedule", result=result))
    assert rec["summary"] == ("scheduled 4 replicas on 2/2 clusters; placement kept: the static weights would give "
                              "m1 3, m2 1; a scale divides what it adds or removes by them, a reschedule every "
                              "replica (docs/karmada.md D2)"), rec["summary"]
    even = [{**o, "staticWeight": 1} for o in options]  # the weights' own division: nothing to say
    assert from_schedule(_entry(options=even, scheduleType="ReconcileSchedule", result=result))["summary"] == \
        "scheduled 4 replicas on 2/2 clusters"


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
    # the bound cut the recommendation: that is the count not taken, and why
    assert rec["runnerUp"] == {"name": "5 replicas", "lostBy": 0.5, "differences": {"cpu": 0.5},
                               "why": "the recommendation 5 was limited (maxReplicas) to 4"}
    up = from_scaling({"workload": "Deployment/default/web", "from": 2, "to": 3, "recommendation": 3,
                       "metrics": [{"name": "cpu", "value": 75.0, "target": 50},
                                   {"type": "Pods", "name": "rps", "value": 0.9, "target": 1.0}]})
    assert up["runnerUp"]["name"] == "2 replicas" and up["runnerUp"]["lostBy"] == 0.5
    assert up["runnerUp"]["why"] == "cpu +50% from its target; rps -10% from its target"
    assert from_scaling({"workload": "Deployment/default/web", "from": 2, "to": 2})["runnerUp"] is None
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
    # not evaluated now: named with what was last published of it, not with the winner's reason
    assert moved["options"][1]["reason"] == "replaced (its metric when last published: 10.0)"


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


def _operation(kind: str, **details: object) -> dict[str, object]:
    return {"time": "2026-11-28T06:00:00.000Z", "kind": kind, "cluster": "c", "reason": "water level 0.92 above the "
            "limit 0.80 since 2026-11-28T05:59:00Z", "details": details}


def test_an_evacuation_is_an_eviction_of_the_cluster_naming_the_bindings_weighed_and_the_water_levels() -> None:
    levels = {"c": {"waterLevel": 0.92, "limit": 0.8}, "a": {"waterLevel": 0.41, "limit": 0.8}}
    rec = from_operation(_operation(
        "Evacuate", action="evacuate", candidates=2, outcome="executed", request={"fraction": 0.25},
        trigger={"value": 0.92, "limit": 0.8, "waterLevels": levels},
        result={"accepted": True, "moved": 6, "message": "rescheduling 1 binding(s)", "bindings": ["web"],
                "considered": [{"binding": "web", "replicas": 6}, {"binding": "db", "replicas": 2},
                               {"binding": "job", "replicas": 1}], "omitted": 4}))
    assert rec["type"] == EVICTION and rec["subject"] == {"kind": "Cluster", "namespace": "", "name": "c"}
    assert rec["inputs"]["waterLevels"] == levels and rec["inputs"]["candidates"] == {"belowLimit": 2}
    assert rec["inputs"]["policy"] == {"fraction": 0.25} and rec["inputs"]["value"] == 0.92
    assert [(o["name"], o["chosen"], o["replicas"]) for o in rec["options"]] == [
        ("web", True, 6), ("db", False, 2), ("job", False, 1)]
    assert rec["optionsOmitted"] == 4 and rec["optionsTopK"] == 10
    assert rec["runnerUp"]["name"] == "db" and rec["runnerUp"]["differences"] == {"replicas": 4}
    assert rec["runnerUp"]["why"].startswith("db has 2 replica(s) there against 6 for web")
    assert rec["summary"].startswith("executed: water level 0.92") and rec["outcome"]["bindings"] == ["web"]


def test_a_skipped_operation_says_why_and_monitoring_events_are_not_decisions() -> None:
    rec = from_operation(_operation("Restore", action="restore", candidates=0, outcome="skipped",
                                    skipReason="cooldown: 300s left", trigger={"waterLevel": 0.3}))
    assert rec["type"] == REBALANCE and rec["summary"].endswith("— cooldown: 300s left") and rec["runnerUp"] is None
    assert rec["inputs"]["candidates"] == {"belowLimit": 0}
    ops = next(s for s in SOURCES if s.name == "operations")
    assert ops.types(_operation("WaterLevelLimitBreached")) == ""  # the decisions API leaves it out


def test_a_traffic_rebalance_is_about_the_workload_and_says_why_staying_lost() -> None:
    trig = {"binding": "deployment-default-web", "move": True, "peer": "default/db", "costBefore": 4.0,
            "costAfter": 1.5, "costReduction": 0.625, "trafficAffinityBefore": 20.0, "trafficAffinityAfter": 85.0,
            "placement": [{"cluster": "b", "replicas": 2}],
            "workload": {"kind": "Deployment", "namespace": "default", "name": "web"}}
    rec = from_operation({**_operation("TrafficRebalance", action="rebalance", trigger=trig, outcome="executed"),
                          "binding": "deployment-default-web", "cluster": "b"})
    assert rec["type"] == REBALANCE and rec["subject"] == {"kind": "Deployment", "namespace": "default", "name": "web"}
    assert [(o["name"], o["chosen"], o["total"]) for o in rec["options"]] == [("move to b 2", True, 85.0),
                                                                             ("stay", False, 20.0)]
    assert rec["runnerUp"]["lostBy"] == 65.0 and rec["runnerUp"]["differences"] == {"TrafficAffinity": 65.0}
    assert "4.0/h against 1.5/h" in rec["runnerUp"]["why"]
    assert rec["inputs"]["traffic"]["peer"] == "default/db"


def test_the_descheduler_s_reschedules_are_evictions_or_rebalancing() -> None:
    for reason, kind in (("evacuate c: water level 0.92 above the limit", EVICTION),
                         ("preallocate c: forecast water level 0.9", EVICTION),
                         ("restore c: water level 0.30 below the limit", REBALANCE),
                         ("traffic rebalance: 62% less traffic cost", REBALANCE)):
        trig = {"kind": "Reschedule", "reason": reason}
        assert from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=trig))["type"] == kind, reason


def _route(cluster: str, metric: object = 1.0, reason: str = "experienceFirst: best e2eDelay") -> dict[str, object]:
    return {"serviceId": "video.example", "registration": {"name": "video"}, "strategy": "experienceFirst",
            "evaluation": "e2eDelay",
            "routes": [{"clientSite": "LHR", "instances": [{"cluster": cluster, "weight": 1.0, "metric": metric,
                                                            "reason": reason}]}]}


def _now(pairs: dict[str, dict[str, object]]) -> Evaluated:
    return Evaluated(lambda site, cluster: pairs.get(cluster) if site == "LHR" else None)


def test_a_route_change_names_the_measured_delays_and_why_the_replaced_instance_lost() -> None:
    """The runner-up compares the metric the service is evaluated on (here the end-to-end delay:
    network + processing), not the measured network delay: aws-dfw is 1 ms away but 60 ms busy."""
    delays = {("LHR", "aws-dfw"): 1.0, ("LHR", "azure-lhr"): 5.4}
    now = _now({"aws-dfw": {"feasible": True, "metric": 61.0, "key": 61.0, "delayMs": 61.0, "networkMs": 1.0,
                            "processingMs": 60.0},
                "azure-lhr": {"feasible": True, "metric": 10.4, "key": 10.4, "delayMs": 10.4, "networkMs": 5.4,
                              "processingMs": 5.0}})
    moved = route_decision(_route("aws-dfw", 1.5), _route("azure-lhr", 10.4), lambda s, c: delays.get((s, c)), now)
    assert moved is not None
    assert moved["inputs"]["latencies"] == {"LHR → azure-lhr": 5.4, "LHR → aws-dfw": 1.0}
    replaced = moved["options"][1]
    assert (replaced["name"], replaced["feasible"], replaced["metric"]) == ("LHR → aws-dfw", True, 61.0)
    assert replaced["reason"].startswith("lost by 50.6 ms end to end: 61.0 ms against 10.4 ms for LHR → azure-lhr")
    ru = moved["runnerUp"]
    assert ru["name"] == "LHR → aws-dfw" and ru["against"] == "LHR → azure-lhr" and ru["lostBy"] == 50.6
    assert ru["differences"] == {"metric": 50.6, "delayMs": 50.6, "networkMs": -4.4, "processingMs": 55.0}
    assert "lost by 50.6 ms end to end" in ru["why"] and "processing 60.0" in ru["why"]


def test_a_replaced_instance_breaking_the_sla_says_so_with_its_current_metric() -> None:
    """It no longer meets the SLA (158 ms > 120 ms): feasible false, metric MAX, its own reason —
    not the one it was published with, nor the winner's."""
    now = _now({"azure-lhr": {"feasible": False, "metric": "MAX", "key": 158.0, "delayMs": 158.0, "networkMs": 153.0,
                              "processingMs": 5.0, "broken": "delay 158.0 ms > 120 ms"},
                "aws-dfw": {"feasible": True, "metric": 84.2, "key": 84.2, "delayMs": 84.2, "networkMs": 79.2,
                            "processingMs": 5.0}})
    moved = route_decision(_route("azure-lhr", 10.381), _route("aws-dfw", 84.2, "experienceFirst: best e2eDelay; x"),
                           None, now)
    assert moved is not None
    replaced = moved["options"][1]
    assert (replaced["feasible"], replaced["metric"]) == (False, "MAX")
    assert replaced["reason"] == ("breaks the SLA: delay 158.0 ms > 120 ms "
                                  "(delay 158.0 ms = network 153.0 + processing 5.0)")
    assert moved["runnerUp"]["lostBy"] is None and "breaks the SLA" in moved["runnerUp"]["why"]
    gone = route_decision(_route("gcp-sin"), _route("aws-dfw"), None, now)  # no longer an instance at all
    assert gone is not None and gone["options"][1]["feasible"] is False
    assert "not evaluated now" in gone["options"][1]["reason"]


def test_a_route_turning_max_and_back_is_a_decision() -> None:
    turned = route_decision(_route("azure-lhr", 10.0), _route("azure-lhr", "MAX", "MAX: no instance meets the SLA"))
    assert turned is not None and turned["summary"] == "LHR: azure-lhr → azure-lhr (MAX: no instance meets the SLA)"
    assert turned["options"] == [{"name": "LHR → azure-lhr", "chosen": True, "feasible": False, "metric": "MAX",
                                  "weight": 1.0, "reason": "MAX: no instance meets the SLA"}]
    back = route_decision(_route("azure-lhr", "MAX"), _route("azure-lhr", 10.0))
    assert back is not None and back["summary"] == "LHR: azure-lhr → azure-lhr (meets the SLA again)"
    assert route_decision(_route("azure-lhr", "MAX"), _route("azure-lhr", "MAX")) is None


def test_a_placement_names_the_workload_s_measured_usage_when_its_binding_had_one() -> None:
    from drods.schedulerd.history import measured_usage

    usage = {"cpu": {"used": "950m", "requested": "1"}, "pods": 3, "readyPods": 3}
    assert measured_usage(json.dumps({"metadata": {"name": "web"}, "status": {"usage": usage}}).encode()) == usage
    assert measured_usage(b'{"metadata": {"name": "web"}, "status": {}}') is None
    assert from_schedule(_entry(usage=usage))["inputs"]["usage"] == usage
    assert "usage" not in from_schedule(_entry())["inputs"]


def test_a_move_towards_the_users_is_a_rebalance_with_its_gain_and_a_move_that_does_not_pay_is_not() -> None:
    trig = {"kind": "Reschedule", "reason": "users moved: service shop.example's requests now come from west 100%"}
    users = {"source": "learned", "sites": [{"site": "west", "weight": 1.0}], "latencyMs": {"c-west": 4.0}}
    move = {"pays": True, "moved": 3, "gainMs": 50.0, "beforeMs": 55.0, "afterMs": 5.0, "minGainMs": 5.0}
    rec = from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=trig,
                               analysis={"users": users, "usersMove": move}))
    assert rec["type"] == REBALANCE and rec["outcome"]["usersMove"] == move
    assert rec["inputs"]["users"] == users  # the users and each chosen cluster's latency
    stays = from_schedule(_entry(scheduleType="RescheduleTriggered", trigger=trig,
                                 analysis={"users": users, "usersMove": move | {"pays": False, "gainMs": 2.0}}))
    assert stays["type"] == "Reschedule" and stays["outcome"]["usersMove"]["gainMs"] == 2.0
