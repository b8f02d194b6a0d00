"""A plan's start and end in the decision-record journal: what the records say (the data step, the data
lost at the switch as measured, why it failed) and that a repeated pass writes nothing twice."""

from __future__ import annotations

import time
from pathlib import Path

from drods.migration.record import migration_record, record, worth_recording
from drods.model.timefmt import rfc3339_ms
from drods.schedulerd.history import for_binding, schedule_history
from drods.store.sqlite import SqliteStore

PLAN = {"metadata": {"name": "move", "namespace": "shop", "uid": "u-1"},
        "spec": {"workloadRef": {"kind": "StatefulSet", "name": "db"}, "sourceCluster": "a", "targetCluster": "b",
                 "trigger": "Operator"}}
ENDED = {"phase": "Succeeded", "binding": "statefulset-shop-db", "sourceCluster": "a", "targetCluster": "b",
         "sourceReplicas": 2, "originalPlacement": [{"cluster": "a", "replicas": 2}], "message": "moved",
         "startTime": rfc3339_ms(time.time() - 120), "completionTime": rfc3339_ms(time.time() - 60),
         "data": {"mover": "VolumeCopy", "claims": ["data-db-0"], "lostWrites": 0, "lostWritesMeasuredBy": "probe"},
         "freeze": {"stage": "done", "downtimeSeconds": 3.2}, "conditions": []}


def test_what_is_recorded_and_when() -> None:
    rec = migration_record(PLAN, ENDED)
    assert rec["scheduleType"] == "Migration" and rec["binding"] == "statefulset-shop-db"
    assert rec["migration"]["data"]["lostWrites"] == 0 and rec["migration"]["freeze"]["downtimeSeconds"] == 3.2
    assert rec["migration"]["plan"] == "shop/move" and rec["result"]["placed"] == 2
    # what started it, not how it ended (`drods explain` printed "trigger moved 2 replica(s) …")
    assert rec["trigger"] == {"kind": "Migration", "by": "Operator", "reason": "Operator"}
    assert "reason" not in rec["migration"] and "requestReason" not in rec["migration"]  # none: not "None"
    asked = migration_record({**PLAN, "spec": {**PLAN["spec"], "reason": "rack 4 maintenance"}}, ENDED)
    assert asked["trigger"]["reason"] == "Operator: rack 4 maintenance"
    assert asked["migration"]["requestReason"] == "rack 4 maintenance"
    # a plan that succeeded records where the workload runs now; one that did not, where it ran
    assert rec["result"]["placement"] == [{"cluster": "b", "replicas": 2}]
    kept = migration_record(PLAN, {**ENDED, "phase": "RolledBack", "originalPlacement": [
        {"cluster": "a", "replicas": 2}, {"cluster": "c", "replicas": 1}]})
    assert kept["result"]["placement"] == [{"cluster": "a", "replicas": 2}, {"cluster": "c", "replicas": 1}]
    both = migration_record(PLAN, {**ENDED, "originalPlacement": [{"cluster": "a", "replicas": 2},
                                                                  {"cluster": "c", "replicas": 1}]})
    assert both["result"]["placement"] == [{"cluster": "b", "replicas": 2}, {"cluster": "c", "replicas": 1}]
    refused = {"phase": "Failed", "message": "keeps its data…", "completionTime": "2027-01-15T08:00:00.000Z",
               "conditions": [{"type": "Failed", "status": "True", "reason": "NoDataStep"}]}
    assert migration_record(PLAN, refused)["migration"]["reason"] == "NoDataStep"
    # refused before it recorded its Binding: still filed under the workload's, so its history shows it
    assert migration_record(PLAN, refused)["binding"] == "statefulset-shop-db"
    assert worth_recording({"phase": "Pending"}, {"phase": "PrepareTarget"})
    assert worth_recording({"phase": "RollingBack"}, {"phase": "RolledBack"})
    assert not worth_recording({"phase": "CopyData"}, {"phase": "CatchUp"})
    assert not worth_recording({"phase": "Succeeded"}, {"phase": "Succeeded"})


async def test_a_record_is_written_once(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "drods.db"))
    try:
        journal = schedule_history(store)
        assert await record(journal, PLAN, ENDED)
        assert not await record(journal, PLAN, ENDED)  # the same pass again, after a crash
        page = await journal.query(0, time.time() + 60, 10, for_binding("statefulset-shop-db"))
        assert [e["migration"]["data"]["lostWritesMeasuredBy"] for e in page.items] == ["probe"]
    finally:
        await store.close()


def test_the_target_is_weighed_against_the_runner_up() -> None:
    """X1: the record names the other clusters the scheduler weighed and why the best of them lost."""
    from drods.model.decision import from_schedule

    weighed = {"weights": {"WaterLevel": 2.0, "NetworkLocality": 1.0},
               "clusters": [{"cluster": "b", "total": 80.0, "scores": {"WaterLevel": 90.0, "NetworkLocality": 60.0}},
                            {"cluster": "c", "total": 65.0, "scores": {"WaterLevel": 60.0, "NetworkLocality": 75.0},
                             "room": 4}]}
    rec = from_schedule({**migration_record(PLAN, {**ENDED, "targetOptions": weighed}), "time": ENDED["startTime"]})
    assert rec["type"] == "Migration"
    assert [(o["name"], o["chosen"]) for o in rec["options"]] == [("b", True), ("c", False)]
    ru = rec["runnerUp"]
    assert ru["name"] == "c" and ru["against"] == "b" and ru["lostBy"] == 15.0
    assert ru["differences"] == {"WaterLevel": 20.0, "NetworkLocality": -5.0}
    assert ru["why"].startswith("c scored 15.0 points below b (WaterLevel +20.0")
    assert "options" not in migration_record(PLAN, ENDED)  # a plan started before the options were kept


def test_a_cache_plan_names_the_remote_reads_as_runner_up() -> None:
    from drods.controllers.cache_decisions import cache_plan_decision

    spec = {"dataset": "features", "cluster": "sin", "sourceCluster": "dfw", "readGiBPerHour": 120.0,
            "transferCostPerHour": 10.8, "reason": "120 GiB/h read from dfw"}
    rec = cache_plan_decision("shop", "features-sin", spec, 50.0, 1.0)
    assert [(o["name"], o["chosen"], o["feasible"]) for o in rec["options"]] == [
        ("copy to sin", True, True), ("keep reading from dfw", False, True)]
    ru = rec["runnerUp"]
    assert ru["name"] == "keep reading from dfw" and ru["against"] == "copy to sin" and ru["lostBy"] == 9.8
    assert ru["why"] == ("reading 120 GiB/h from dfw costs 10.80/h in transfer, 9.80/h above farCostPerHour "
                         "1.00/h; a copy in sin reads locally")
    assert cache_plan_decision("shop", "x", {**spec, "sourceCluster": None}, 50.0, 1.0)["runnerUp"] is None
    by_hand = cache_plan_decision("shop", "x", {**spec, "transferCostPerHour": None}, 50.0, 1.0)["runnerUp"]
    assert by_hand["name"] == "keep reading from dfw" and "approved as written" in by_hand["why"]
