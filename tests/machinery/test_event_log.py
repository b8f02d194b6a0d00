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
