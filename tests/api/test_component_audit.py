"""SEC3, nothing dropped: components write faster than the store takes audit records (a slow store
injected under the audit log). The queue never grows past its bound, writers are held back instead,
each write is answered only once its record is in the store, and every record is there in the end —
on SQLite and on etcd."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from drods.api.audit import AuditEntry, AuditFilter, AuditLog, ComponentAudit, utc_now_iso
from drods.model.kinds import SERVICE_ROUTE
from drods.registry import changes
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store import Store

WRITERS = 12
WRITES_EACH = 4
BOUND = 5


class SlowStore:
    """``store`` whose transactions (how audit batches are written) wait for ``gate`` and then take
    ``delay`` seconds; it notes how many records waited in ``audit`` at each one."""

    def __init__(self, store: Store, delay: float) -> None:
        self._store = store
        self.delay = delay
        self.gate = asyncio.Event()
        self.audit: ComponentAudit | None = None
        self.queued_seen: list[int] = []
        self.txns = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def txn(self, *args: Any, **kwargs: Any) -> Any:
        assert self.audit is not None
        self.queued_seen.append(len(self.audit))
        await self.gate.wait()
        await asyncio.sleep(self.delay)
        self.txns += 1
        return await self._store.txn(*args, **kwargs)


def route(name: str) -> dict[str, Any]:
    return {"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind, "metadata": {"name": name},
            "spec": {"serviceId": name, "strategy": "experienceFirst", "routes": []}}


async def test_a_slow_audit_store_holds_writers_back_and_loses_no_record(store: Store, tmp_path: Path) -> None:
    slow = SlowStore(store, delay=0.02)
    audit = slow.audit = ComponentAudit(AuditLog(slow), max_queue=BOUND, replica="replica-a", retry_s=0.05)
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    run = asyncio.create_task(audit.run())
    tag = uuid.uuid4().hex[:8]  # etcd is shared by the session: this test's objects only
    answered: list[str] = []

    async def writer(w: int) -> None:
        changes.COMPONENT.set((f"writer-{w}", audit.submit))  # as the manager sets it for a runnable
        for i in range(WRITES_EACH):
            name = f"r{tag}-{w}-{i}.example"
            await registry.batch_upsert([(SERVICE_ROUTE, route(name))], trusted=True)
            answered.append(name)

    writers = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
    try:
        # The store takes nothing yet: the queue fills to its bound and the other writers wait.
        async with asyncio.timeout(10):
            while audit.held < WRITERS - BOUND:  # noqa: ASYNC110 - a counter of the code under test, with a deadline
                await asyncio.sleep(0.01)
        assert len(audit) == BOUND and not answered  # no write answered before its record is kept
        made = [kv.key for kv in (await store.range(SERVICE_ROUTE.key_prefix()))[0] if tag in kv.key]
        assert len(made) == WRITERS  # each writer made its first change and is held at its record

        slow.gate.set()
        async with asyncio.timeout(30):
            await asyncio.gather(*writers)
    finally:
        for t in writers:
            t.cancel()
        run.cancel()
        await asyncio.gather(run, *writers, return_exceptions=True)

    assert max(slow.queued_seen) <= BOUND
    entries = await AuditLog(store).query(limit=100_000)
    mine = [e for e in entries if tag in str(e.get("object"))]
    assert sorted(str(e["object"]) for e in mine) == sorted(f"ServiceRoute/{n}" for n in answered)
    assert len(mine) == WRITERS * WRITES_EACH
    assert {(e["subject"], e["replica"], e["role"]) for e in mine if e["object"].endswith("-3-0.example")} \
        == {("component:writer-3", "replica-a", "component")}
    assert slow.txns < WRITERS * WRITES_EACH  # written in batches, not one transaction per record
    by_writer = await AuditLog(store).query(limit=100_000, where=AuditFilter(subject="component:writer-0"))
    assert len([e for e in by_writer if tag in str(e.get("object"))]) == WRITES_EACH


async def test_records_wait_out_a_failing_store(store: Store) -> None:
    """A store that refuses audit writes for a while: records stay queued, the writer waits, and
    they are written once it answers again."""
    audit = ComponentAudit(AuditLog(store), max_queue=BOUND, replica="replica-b", retry_s=0.05)
    failures = 3
    real_append = audit.log.append_many

    async def flaky(entries: list[Any]) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise OSError("store unavailable")
        await real_append(entries)

    audit.log.append_many = flaky  # type: ignore[method-assign]
    run = asyncio.create_task(audit.run())
    name = f"flaky-{uuid.uuid4().hex[:8]}"
    try:
        async with asyncio.timeout(10):
            await audit.submit("detector", changes.Change("ServiceRoute", None, name, "create", []))
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert failures == 0
    entries = await AuditLog(store).query(limit=100_000)
    assert [e["subject"] for e in entries if e.get("object") == f"ServiceRoute/{name}"] == ["component:detector"]


async def test_a_components_batch_write_waits_for_one_audit_batch(store: Store, tmp_path: Path) -> None:
    """The records of one transaction's objects are handed over together: a batch of 50 objects
    costs an audit transaction or two, not 50 round trips."""
    slow = SlowStore(store, delay=0.0)
    slow.gate.set()
    audit = slow.audit = ComponentAudit(AuditLog(slow), replica="replica-c")
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    run = asyncio.create_task(audit.run())
    tag = uuid.uuid4().hex[:8]
    token = changes.COMPONENT.set(("steering", audit.submit))
    try:
        async with asyncio.timeout(20):
            await registry.batch_upsert([(SERVICE_ROUTE, route(f"b{tag}-{i}.example")) for i in range(50)],
                                        trusted=True)
    finally:
        changes.COMPONENT.reset(token)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert 1 <= slow.txns <= 2
    entries = await AuditLog(store).query(limit=100_000)
    assert len([e for e in entries if tag in str(e.get("object"))]) == 50


class GatedStore:
    """``store`` whose transactions wait for ``gate`` (or fail while ``failing``), counting them."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.gate = asyncio.Event()
        self.failing = False
        self.txns = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def txn(self, *args: Any, **kwargs: Any) -> Any:
        await self.gate.wait()
        self.txns += 1
        if self.failing:
            raise ConnectionError("store unreachable")
        return await self._store.txn(*args, **kwargs)


async def test_requests_records_written_together_each_answered_once_stored(store: Store) -> None:
    """Group commit of the requests' records: what is appended while a write is in flight goes in
    the next transaction; each append returns only once its own record is stored, and a failed
    write fails each of its appends (their requests answer 503 and change nothing)."""
    gated = GatedStore(store)
    log = AuditLog(gated)  # type: ignore[arg-type]
    tag = uuid.uuid4().hex[:8]

    def entry(i: int) -> AuditEntry:
        return AuditEntry(time=utc_now_iso(), subject=f"group-{tag}", role="admin", verb="POST",
                          path=f"/api/v1/x/{i}", object=f"x/{i}", result=None, id=f"{tag}-{i}", stage="request")

    first = asyncio.create_task(log.append(entry(0)))
    await asyncio.sleep(0)  # the first write is in flight (held at the gate)
    rest = [asyncio.create_task(log.append(entry(i))) for i in range(1, 20)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in [first, *rest])  # nothing answered before it is stored
    gated.gate.set()
    await asyncio.gather(first, *rest)
    assert gated.txns == 2  # the first alone, then the 19 that came while it was written
    found = await log.query(where=AuditFilter(subject=f"group-{tag}"))
    assert sorted(e["id"] for e in found) == sorted(f"{tag}-{i}" for i in range(20))

    gated.failing = True
    outcomes = await asyncio.gather(*(log.append(entry(i)) for i in range(20, 23)), return_exceptions=True)
    assert all(isinstance(o, ConnectionError) for o in outcomes)
    gated.failing = False
    await log.append(entry(23))  # the next write goes through again
    found = await log.query(where=AuditFilter(subject=f"group-{tag}"))
    assert len(found) == 21
