"""The scheduler's batched decision writes, on both stores: many decisions per fenced transaction,
one stale binding retried alone (the others still written), a lost lease writes nothing."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from drods.machinery.fence import Fence
from drods.machinery.journal import Journal
from drods.model import jsondoc
from drods.scheduler.framework import ScheduleResult
from drods.schedulerd.metrics import SchedulerMetrics
from drods.schedulerd.queue import QueueEntry
from drods.schedulerd.records import Decision, decode_binding, encode_object, merge_status
from drods.schedulerd.writer import DecisionWriter, Plan
from drods.store import Store


@pytest.fixture
def ns() -> str:
    return f"/t/{uuid.uuid4().hex[:10]}/"


async def _bindings(store: Store, ns: str, n: int) -> list[str]:
    keys = []
    for i in range(n):
        key = f"{ns}bindings/b{i}"
        obj = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
               "metadata": {"name": f"b{i}", "generation": 1}, "spec": {"replicas": 2}}
        await store.put(key, jsondoc.dumps(obj))
        keys.append(key)
    return keys


async def _plans(store: Store, keys: list[str], now: float) -> list[Plan]:
    plans = []
    for key in keys:
        kv = await store.get(key)
        assert kv is not None
        rec = decode_binding(key, kv.value, kv.mod_revision)
        assert rec is not None
        decision = Decision(True, (("m1", 2),), "placed", {}, generation=1, time=now)
        obj = jsondoc.loads(kv.value)
        value = encode_object({**obj, "status": merge_status(obj.get("status"), decision)})
        result = ScheduleResult(rec.name, "Scheduled", 2, 2, "placed", 1, 1, "Weighted")
        plans.append(Plan(QueueEntry(rec.name, None), rec, result, decision, value, "FirstSchedule", None))
    return plans


async def _writer(store: Store, ns: str) -> tuple[DecisionWriter, str]:
    lease_key = ns + "leases/scheduler"
    rev = await store.put(lease_key, b"me")
    fence = Fence(lease_key, rev)
    writer = DecisionWriter(store, Journal(store, ns + "history/"), SchedulerMetrics(dict), lambda: fence, lease_key)
    return writer, lease_key


async def _status(store: Store, key: str) -> dict[str, Any]:
    kv = await store.get(key)
    assert kv is not None
    status: dict[str, Any] = json.loads(kv.value).get("status") or {}
    return status


async def test_many_decisions_share_one_transaction(store: Store, ns: str) -> None:
    store.max_txn_ops = 41  # a small limit (etcd's default is 128) so two transactions stay quick
    writer, _ = await _writer(store, ns)
    chunk = (store.max_txn_ops - 1) * 3 // 4  # what fits beside the fence and the history entries
    keys = await _bindings(store, ns, chunk + 5)
    plans = await _plans(store, keys, time.time())
    outcomes = await writer.write(plans, [{"binding": p.rec.name} for p in plans])
    assert outcomes == ["ok"] * len(keys)
    revisions = {(await store.get(k)).mod_revision for k in keys}  # type: ignore[union-attr]
    assert len(revisions) == 2  # one transaction per chunk, within the store's max ops per txn
    for k in keys:
        assert (await _status(store, k))["placement"] == [{"cluster": "m1", "replicas": 2}]


async def test_one_stale_binding_is_retried_alone(store: Store, ns: str) -> None:
    writer, _ = await _writer(store, ns)
    keys = await _bindings(store, ns, 6)
    plans = await _plans(store, keys, time.time())
    # Another writer touches b2 (same spec) and bumps b4's spec after the decisions were taken.
    for i, mutate in ((2, {"labels": {"touched": "yes"}}), (4, {"generation": 2})):
        kv = await store.get(keys[i])
        assert kv is not None
        obj = json.loads(kv.value)
        obj["metadata"].update(mutate)
        await store.put(keys[i], jsondoc.dumps(obj))
    outcomes = await writer.write(plans, [{"binding": p.rec.name} for p in plans])
    assert outcomes == ["ok", "ok", "ok", "ok", "stale", "ok"]
    touched = await store.get(keys[2])
    assert touched is not None
    assert json.loads(touched.value)["metadata"]["labels"] == {"touched": "yes"}  # its change kept
    for i in (0, 1, 2, 3, 5):
        assert (await _status(store, keys[i]))["scheduledGeneration"] == 1
    assert await _status(store, keys[4]) == {}  # the newer spec is decided by its own event


async def test_a_deposed_leader_writes_nothing(store: Store, ns: str) -> None:
    writer, lease_key = await _writer(store, ns)
    keys = await _bindings(store, ns, 4)
    plans = await _plans(store, keys, time.time())
    await store.put(lease_key, b"someone else")  # the lease was taken over: a new generation
    before = await store.current_revision()
    outcomes = await writer.write(plans, [{"binding": p.rec.name} for p in plans])
    assert outcomes == ["not-leader"] * len(keys)
    assert await store.current_revision() == before
    for k in keys:
        assert await _status(store, k) == {}
