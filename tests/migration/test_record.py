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
    refused = {"phase": "Failed", "message": "keeps its data…", "completionTime": "2027-01-15T08:00:00.000Z",
               "conditions": [{"type": "Failed", "status": "True", "reason": "NoDataStep"}]}
    assert migration_record(PLAN, refused)["migration"]["reason"] == "NoDataStep"
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
