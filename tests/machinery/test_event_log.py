"""Events written beside a change: leased for their TTL, and never holding up (or failing) the pass that
told them."""

from __future__ import annotations

from drods.machinery.event_log import EventLog
from drods.model import jsondoc
from drods.model.events import EVENT
from drods.store import Store
from tests.monitor_e2e.conftest import eventually

WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop", "uid": "u-1"}


async def test_told_events_are_written_leased_and_a_full_log_drops_rather_than_waits(store: Store) -> None:
    await store.delete_prefix(EVENT.key_prefix())
    log = EventLog(store, "drods-controllers", ttl_s=60)
    log.tell(WEB, "Warning", "SyncFailed", "m1: already exists and is not managed by DRO-DS")
    log.tell(WEB, "Normal", "SyncSucceed", "applied and ready in 2 cluster(s): m1, m2")

    async def written() -> list[dict[str, object]] | None:
        kvs, _ = await store.range(EVENT.key_prefix("shop"))
        return [jsondoc.loads(kv.value) | {"lease": kv.lease} for kv in kvs] if len(kvs) == 2 else None

    events = await eventually(written, what="both events written")
    assert sorted(e["reason"] for e in events) == ["SyncFailed", "SyncSucceed"]
    assert all(e["lease"] != 0 and e["involvedObject"] == WEB and e["source"] == {"component": "drods-controllers"}
               for e in events), events
    log.max_in_flight = 0  # as if that many were under way: the next is dropped, the caller not held
    log.tell(WEB, "Normal", "SyncSucceed", "again")
    assert log.dropped == 1


async def test_an_event_told_again_is_the_same_event_counted(store: Store) -> None:
    """`kubectl describe` shows "x3 over 2s", not three lines (client-go's correlator)."""
    await store.delete_prefix(EVENT.key_prefix())
    log = EventLog(store, "drods-scheduler", ttl_s=60)
    for i in range(3):
        await log.record(WEB, "Normal", "ScheduleBindingSucceed", "Result: {m1:2}", ts=1000.0 + i)
    await log.record(WEB, "Normal", "ScheduleBindingSucceed", "Result: {m1:3}", ts=1004.0)
    await log.record({**WEB, "uid": "u-2"}, "Normal", "ScheduleBindingSucceed", "Result: {m1:3}", ts=1005.0)
    kvs, _ = await store.range(EVENT.key_prefix("shop"))
    events = sorted((jsondoc.loads(kv.value) for kv in kvs), key=lambda e: e["lastTimestamp"])
    assert [(e["message"], e["count"], e["involvedObject"]["uid"]) for e in events] == [
        ("Result: {m1:2}", 3, "u-1"), ("Result: {m1:3}", 1, "u-1"), ("Result: {m1:3}", 1, "u-2")]
    repeated = events[0]
    assert repeated["firstTimestamp"] == "1970-01-01T00:16:40.000Z" == repeated["metadata"]["creationTimestamp"]
    assert repeated["lastTimestamp"] == "1970-01-01T00:16:42.000Z"
    log.remembered = 2  # the oldest forgotten as the correlator's cache forgets: a new Event again
    await log.record(WEB, "Normal", "SyncSucceed", "applied", ts=1006.0)
    await log.record(WEB, "Normal", "ScheduleBindingSucceed", "Result: {m1:2}", ts=1007.0)
    kvs, _ = await store.range(EVENT.key_prefix("shop"))
    assert sorted(jsondoc.loads(kv.value)["count"] for kv in kvs) == [1, 1, 1, 1, 3]
