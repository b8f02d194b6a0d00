"""Append-only audit log of every change made through the API (SEC3), kept in the store.

Write-ahead: a mutating request is recorded (``stage: request`` — who, role, verb, path) *before*
it runs; when that record cannot be written the request is answered 503 and changes nothing —
``STORE_UNAVAILABLE`` naming the cause when the store is away or its disk refuses writes (`WriteFailed`:
the file and the OS's word, so an operator looks at the disk, not at the log), else ``AUDIT_UNAVAILABLE``.
Its outcome is recorded (``stage: response``: the status and every object change
the registry made for it as a JSON patch with secret values redacted, `drods.registry.changes`)
before the client sees the answer. A query joins the two by ``id``; a request without an outcome
(the process died in between) shows ``result: null``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from drods.api.status import resource_of
from drods.machinery.journal import Journal
from drods.model.keys import AUDIT_PREFIX
from drods.model.timefmt import parse_rfc3339
from drods.registry.changes import Change
from drods.security.tokens import TokenRecord
from drods.store import Store
from drods.store.base import Put

log = logging.getLogger("drods.audit")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    time: str
    subject: str
    role: str
    verb: str
    path: str
    object: str
    result: int | None
    message: str = ""
    id: str = ""
    stage: str = "response"  # request (written ahead) | response (the outcome)
    namespaces: list[str] | None = None  # of the token, when it is namespaced
    changes: list[dict[str, Any]] = field(default_factory=list)
    # a server-side dry run found only once the handler read the body (a DELETE's options): its
    # written-ahead record is dropped from queries with this outcome, as it changed nothing
    dryRun: bool = False
    replica: str | None = None  # a component's change: the process (replica identity) that made it
    sourceIPs: list[str] | None = None  # the caller's address, as Kubernetes' audit events carry it
    userAgent: str | None = None


@dataclass(frozen=True, slots=True)
class AuditFilter:
    subject: str | None = None
    kind: str | None = None
    namespace: str | None = None

    def matches(self, e: dict[str, Any]) -> bool:
        if self.subject is not None and e.get("subject") != self.subject:
            return False
        changes = e.get("changes") or []
        if not changes:  # a refusal (or a request that changed nothing): what its path names
            return self._path_matches(str(e.get("path") or ""))
        if self.kind is not None and not any(str(c.get("kind", "")).lower() == self.kind.lower() for c in changes):
            return False
        return self.namespace is None or any(c.get("namespace") == self.namespace for c in changes)

    def _path_matches(self, path: str) -> bool:
        parts = [p for p in path.split("/") if p]
        if self.namespace is not None and not any(
                p == "namespaces" and parts[i + 1:i + 2] == [self.namespace] for i, p in enumerate(parts)):
            return False
        if self.kind is not None:
            resource = resource_of(path)
            want = self.kind.lower()
            return resource is not None and resource[0] in (want, f"{want}s", f"{want}es")
        return True


_ENTRY_FIELDS = tuple(f.name for f in fields(AuditEntry))


def _record(entry: AuditEntry) -> dict[str, Any]:
    """The entry as its journal record: one level (``dataclasses.asdict`` deep-copies every change,
    a measurable share of each audited write)."""
    return {name: getattr(entry, name) for name in _ENTRY_FIELDS}


class AuditLog:
    """A journal under ``/audit/``, kept (no retention).

    Group commit: `append` returns once its entry is stored, and entries appended while a write is
    in flight go together in the next transaction — one write per burst of concurrent requests, not
    one per record (two per mutating request: its request and its outcome)."""

    def __init__(self, store: Store) -> None:
        self.journal = Journal(store, AUDIT_PREFIX)
        self._waiting: list[tuple[AuditEntry, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, entry: AuditEntry) -> None:
        """Store ``entry``; raises what the store raised when it could not be written."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((entry, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_waiting(), name="audit-group-commit")
        await asyncio.shield(done)  # a cancelled request's record is still written: it may have run

    async def _write_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self.append_many([entry for entry, _ in batch])
            except Exception as e:  # noqa: BLE001 - each request gets the failure (and answers 503)
                for _, done in batch:
                    if not done.done():
                        done.set_exception(e)
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def puts(self, entries: list[AuditEntry]) -> list[Put]:
        """The store writes of ``entries``, for a transaction that makes the change they record."""
        return self.journal.puts((parse_rfc3339(e.time) or time.time(), _record(e)) for e in entries)

    async def append_many(self, entries: list[AuditEntry]) -> None:
        """Write ``entries`` in one transaction: all are recorded or none."""
        await self.journal.store.txn([], self.puts(entries))

    def token_changes(self, actor: str, role: str = "cli") -> Callable[[str, TokenRecord], list[Put]]:
        """The audit writes of a token issued or revoked outside any request (`drods token create`,
        `drods token revoke`, `drods kubeconfig` …), by ``actor``: written in the transaction of the
        token's record (`drods.security.tokens`). The record names the token's ID, subject, role,
        cluster, namespaces and expiry — never the token."""

        def writes(verb: str, rec: TokenRecord) -> list[Put]:
            return self.puts([token_entry(verb, rec, actor, role)])

        return writes

    async def query(
        self, start: datetime | None = None, end: datetime | None = None, limit: int = 1000,
        where: AuditFilter | None = None,
    ) -> list[dict[str, object]]:
        """The newest ``limit`` requests of the window (request and outcome joined), oldest first."""
        lo = start.timestamp() if start else 0.0
        hi = end.timestamp() if end else time.time() + 86_400.0
        page = await self.journal.query(lo, hi, 100_000)
        joined: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for i, e in enumerate(reversed(page.items)):  # oldest first
            key = str(e.get("id") or f"#{i}")
            if key not in joined:
                order.append(key)
                joined[key] = {**e, "result": None} if e.get("stage") == "request" else dict(e)
            else:  # the outcome of a request written ahead: keep the request's time
                joined[key] = {**e, "time": joined[key]["time"]}
            joined[key].pop("stage", None)
            if not joined[key].get("dryRun"):
                joined[key].pop("dryRun", None)  # only a dry run says so
        out = [e for k in order if not _changed_nothing(e := joined[k]) and (where is None or where.matches(e))]
        return out[-limit:]


def _changed_nothing(e: dict[str, Any]) -> bool:
    """A dry run that was answered changed nothing and is left out; one refused is someone trying, and
    is kept with ``dryRun: true``, so it does not read as the change it would have tried."""
    if not e.get("dryRun"):
        return False
    return not (isinstance(e.get("result"), int) and e["result"] >= 400)


class ComponentAudit:
    """Writes the audit records of components' changes (controllers, the scheduler …: writes made
    outside any request) under ``component:<name>`` with the replica (process identity) that made
    them; status-only writes are not recorded.

    Nothing is dropped. Records wait in a bounded queue and are written a batch per transaction; a
    component's write is answered only once its record is in the store, and while ``max_queue``
    records wait, further writers are held before they queue (back-pressure, counted in ``held``).
    A crash therefore loses only records of writes whose component had not been answered yet."""

    max_batch = 200

    def __init__(self, log: AuditLog, max_queue: int = 10_000, *, replica: str | None = None,
                 retry_s: float = 1.0) -> None:
        self.log = log
        self.max_queue = max_queue
        self.replica = replica
        self.retry_s = retry_s
        self.held = 0  # writers that waited for room in the queue
        self._pending: deque[tuple[AuditEntry, asyncio.Future[None]]] = deque()
        self._queued = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def __len__(self) -> int:
        return len(self._pending)

    async def submit(self, component: str, change: Change) -> None:
        """Queue the record of ``change`` and return once it is written (held while the queue is full)."""
        entry = AuditEntry(time=utc_now_iso(), subject=f"component:{component}", role="component",
                           verb=change.verb.upper(), path="", object=f"{change.kind}/{change.name}", result=None,
                           id=uuid.uuid4().hex, changes=[change.to_dict()], replica=self.replica)
        if len(self._pending) >= self.max_queue:
            self.held += 1
            while len(self._pending) >= self.max_queue:
                self._room.clear()
                try:
                    await self._room.wait()
                except asyncio.CancelledError:
                    self._queue(entry)  # the change is made: its record is kept even past the bound
                    raise
        await asyncio.shield(self._queue(entry))

    def _queue(self, entry: AuditEntry) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((entry, done))
        self._queued.set()
        return done

    async def run(self) -> None:
        """Write what is queued, a batch at a time: one transaction (and one key per second the
        entries fall in) for a controller's burst of changes, not one write per change. A batch
        leaves the queue only once written; a failed write is retried."""
        try:
            while True:
                await self._queued.wait()
                if not self._pending:
                    self._queued.clear()
                    continue
                if not await self._write_batch():
                    await asyncio.sleep(self.retry_s)
        finally:  # stopping: one last attempt at what waits (its writers have had no answer)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                while self._pending and await self._write_batch():
                    pass

    async def _write_batch(self) -> bool:
        batch = list(itertools.islice(self._pending, self.max_batch))
        try:
            await self.log.append_many([entry for entry, _ in batch])
        except Exception:  # noqa: BLE001 - kept queued; retried once the store answers again
            log.warning("component audit: %d record(s) wait for the store", len(self._pending), exc_info=True)
            return False
        for _ in batch:
            _, done = self._pending.popleft()
            if not done.done():
                done.set_result(None)
        if len(self._pending) < self.max_queue:
            self._room.set()
        return True


def token_change(verb: str, rec: TokenRecord) -> Change:
    """A token's issue (``create``) or revocation (``revoke``) as an audited change of kind ``Token``."""
    patch: list[dict[str, Any]]
    if verb == "create":
        value = {"subject": rec.subject, "role": rec.role, "cluster": rec.cluster,
                 "namespaces": list(rec.namespaces) if rec.namespaces else None,
                 "issuedAt": rec.issuedAt, "expiresAt": rec.expiresAt}
        patch = [{"op": "add", "path": "", "value": value}]
    else:
        patch = [{"op": "add", "path": "/revokedAt", "value": rec.revokedAt}]
    return Change("Token", None, rec.id, verb, patch)


def token_message(verb: str, rec: TokenRecord) -> str:
    scope = f", cluster {rec.cluster}" if rec.cluster else ""
    scope += f", namespaces {','.join(rec.namespaces)}" if rec.namespaces else ""
    expiry = (datetime.fromtimestamp(rec.expiresAt, UTC).isoformat().replace("+00:00", "Z")
              if rec.expiresAt else "never")
    done = "issued" if verb == "create" else "revoked"
    return f"{done} token {rec.id} (subject {rec.subject}, role {rec.role}{scope}; expires {expiry})"


def token_entry(verb: str, rec: TokenRecord, actor: str, role: str) -> AuditEntry:
    return AuditEntry(time=utc_now_iso(), subject=actor, role=role, verb=verb.upper(), path="",
                      object=f"Token/{rec.id}", result=None, message=token_message(verb, rec),
                      id=uuid.uuid4().hex, changes=[token_change(verb, rec).to_dict()])


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
