"""etcd v3 backend: the same contract as the embedded store, over a real etcd cluster.

Client choice: ``aetcd`` 1.0. It works against etcd 3.4 with the installed grpcio/protobuf
(its generated stubs load fine under protobuf 7), it is asyncio-native and its watcher
multiplexes every watch of a client over one gRPC stream. Its high-level helpers drop the
response header revision of transactions and cannot set ``limit``/``prev_kv`` everywhere, so
this module builds the v3 request messages itself (``aetcd.rpc``) and calls aetcd's stubs,
keeping aetcd for the channel, the stubs and the watch stream.

What this layer adds over the raw client:

* Failover: one aetcd client per endpoint; a call that fails with UNAVAILABLE or a timeout moves to
  the next endpoint and retries with backoff until ``deadline`` expires, then raises
  ``Unavailable``; until a member answers again, later calls get one RPC ``timeout`` instead (an
  outage is reported in seconds, not a whole deadline per request). The defaults: ``deadline`` 5 s
  (rides out a leader election or a member restart of a few seconds), ``timeout`` 3 s.
* Reconnection: gRPC reconnects a channel whose member went away with exponential backoff (1 s
  growing ×1.6 to 120 s), so after a 40 s outage its next attempt could be half a minute after etcd
  was back, and every call failed fast meanwhile. The channels here cap that backoff at
  ``reconnect_backoff`` (gRPC's own ``grpc.max_reconnect_backoff_ms``; gRPC resets it on a
  connection): a store is back within about that long of its etcd, however long the outage. A lost answer to a write is
  ambiguous (it may have been applied, e.g. a proposal forwarded to a leader that just died), so
  writes are only blindly retried when doing them twice is harmless (plain put/delete, lease grant).
  A CAS put/delete resolves the doubt by reading the key back; a txn with writes raises
  ``Unavailable`` and leaves the decision to the caller, as etcd's own client does.
* Resumable watch: on a broken stream the watch is re-created on the next endpoint from the last
  delivered revision + 1, so no event is lost or repeated; etcd's compaction answer becomes
  ``Compacted``.
* The clients are bound to the event loop that created them (gRPC aio channels are), so a store
  used from a new loop quietly builds new ones.
* etcd over its backend quota (``--quota-backend-bytes``) raises its NOSPACE alarm and refuses every
  write that stores something ("mvcc: database space exceeded"; deletes still go through): that is
  `WriteFailed` naming the endpoints and what the operator must do, as the embedded store's full disk
  is, and is remembered (`write_failure`, which ``/readyz`` reports) until a write that stores
  something goes through or etcd's alarm list — read every ``ALARM_CHECK_EVERY`` while writes fail
  (Maintenance.Alarm GET: no revision, no watch event) — holds no NOSPACE alarm any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aetcd
import aetcd.exceptions
import aetcd.watcher
import grpc
from aetcd import rpc

from drods.store.base import (
    CasFailed,
    Compacted,
    Compare,
    Delete,
    EventType,
    Get,
    KeyValue,
    Lease,
    LeaseNotFound,
    Put,
    Store,
    StoreError,
    TxnOp,
    TxnResult,
    Unavailable,
    WatchEvent,
    WriteFailed,
)
from drods.store.etcd_watch import WatchStream

T = TypeVar("T")

_CMP_TARGET = {
    "mod": (rpc.Compare.MOD, "mod_revision"),
    "create": (rpc.Compare.CREATE, "create_revision"),
    "version": (rpc.Compare.VERSION, "version"),
    "value": (rpc.Compare.VALUE, "value"),
}
_CMP_OP = {
    "=": rpc.Compare.EQUAL,
    "!=": rpc.Compare.NOT_EQUAL,
    "<": rpc.Compare.LESS,
    ">": rpc.Compare.GREATER,
}
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# Errors that prove the request never reached raft, so even a non-repeatable write may be resent.
_UNSENT = ("failed to connect", "connection refused", "no leader", "too many requests")
_ALL_KEYS = b"\0"
ALARM_CHECK_EVERY = 1.0  # seconds between looks at etcd's alarms while it refuses writes for space
_NOSPACE = "database space exceeded"  # etcd's ErrGRPCNoSpace (quota check, or a member's NOSPACE alarm)
NOSPACE_CAUSE = (
    "etcd's backend quota is exceeded (mvcc: database space exceeded; its NOSPACE alarm is raised) and it "
    "takes no writes until space is reclaimed and the alarm disarmed: compact its history (etcdctl compact "
    "REV), defragment every member (etcdctl defrag --cluster) or give it a larger --quota-backend-bytes, "
    "then etcdctl alarm disarm")


def _kb(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _kv(pb: Any) -> KeyValue:
    return KeyValue(
        pb.key.decode("utf-8", "surrogateescape"),
        bytes(pb.value),
        pb.create_revision,
        pb.mod_revision,
        pb.version,
        pb.lease,
    )


def _range_of(prefix: str) -> tuple[bytes, bytes]:
    """etcd's (key, range_end) for every key under ``prefix``; ``\\0`` means "to the end"."""
    start = _kb(prefix)
    end = bytearray(start)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return start or _ALL_KEYS, bytes(end)
        end.pop()
    return start or _ALL_KEYS, _ALL_KEYS


def _status(exc: BaseException) -> grpc.StatusCode | None:
    """The gRPC status behind an aetcd or grpc error, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, grpc.aio.AioRpcError):
            return seen.code()
        seen = seen.__cause__
    if isinstance(exc, aetcd.exceptions.ConnectionFailedError):
        return grpc.StatusCode.UNAVAILABLE
    if isinstance(exc, aetcd.exceptions.ConnectionTimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return None


def _details(exc: BaseException) -> str:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, grpc.aio.AioRpcError):
            return seen.details() or ""
        seen = seen.__cause__
    return str(exc)


def _translate(exc: BaseException) -> StoreError:
    """Map a non-retryable etcd error onto the contract's exceptions."""
    details = _details(exc)
    if "lease not found" in details:
        return LeaseNotFound(details)
    code = _status(exc)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(details)
    return StoreError(f"etcd: {details}")


class _Ambiguous(Unavailable):
    """A write's answer was lost: it may or may not have been applied."""


@dataclass(frozen=True)
class EtcdTLS:
    """Client TLS towards etcd: the CA that signed etcd's certificate, and this client's certificate
    and key when etcd asks for one (``--client-cert-auth``)."""

    ca: Path
    cert: Path | None = None
    key: Path | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes() if self.key else None,
            certificate_chain=self.cert.read_bytes() if self.cert else None)


class _Client(aetcd.Client):
    """aetcd's client over a TLS channel when ``tls`` is given (aetcd itself only speaks plain gRPC)."""

    def __init__(self, *, tls: EtcdTLS | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tls = tls

    async def connect(self) -> None:
        if self._tls is None or self._connected.is_set() or self._is_connecting:  # type: ignore[has-type]
            await super().connect()
            return
        # aetcd's own connect, over a TLS channel (the one line it does not let us change).
        self._is_connecting = True
        try:
            self.channel = grpc.aio.secure_channel(f"{self._host}:{self._port}", self._tls.credentials(),
                                                   options=list(self._options.items()))
            if self._username is not None and self._password is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                resp = await self.auth_stub.Authenticate(
                    rpc.AuthenticateRequest(name=self._username, password=self._password), timeout=self._timeout)
                self.metadata = (("token", resp.token),)
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = aetcd.watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                                  metadata=self.metadata)
            self._connected.set()
        finally:
            self._is_connecting = False


class EtcdStore(Store):
    """``Store`` over etcd v3; ``endpoints`` are ``host:port`` strings of one cluster."""

    def __init__(
        self, endpoints: list[str], *, timeout: float = 3.0, deadline: float = 5.0, watch_check: float = 5.0,
        reconnect_backoff: float = 1.0, tls: EtcdTLS | None = None, username: str | None = None,
        password: str | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("EtcdStore needs at least one endpoint")
        if (username is None) != (password is None):
            raise ValueError("etcd username and password go together")
        self.tls = tls
        self._auth = (username, password) if username is not None else None
        self._endpoints: list[tuple[str, int]] = []
        for ep in endpoints:
            host, _, port = ep.removeprefix("http://").rstrip("/").rpartition(":")
            self._endpoints.append((host or "127.0.0.1", int(port)))
        self.timeout = timeout  # per RPC
        self.deadline = deadline  # per call, across retries and endpoints
        # A watch quiet for this long checks that its member still answers: a hung or partitioned
        # member keeps the stream open but sends nothing (gRPC keepalive did not catch it).
        self.watch_check = watch_check
        # gRPC's reconnect backoff, capped: a member back after any outage is reconnected within this
        # (± gRPC's 20 % jitter), not after a backoff grown through the outage (up to 120 s by default).
        backoff_ms = max(1, round(reconnect_backoff * 1000))
        self._channel_options = {
            "grpc.initial_reconnect_backoff_ms": min(100, backoff_ms),
            "grpc.max_reconnect_backoff_ms": backoff_ms,
        }
        self._clients: dict[int, aetcd.Client] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._current = 0
        self._seen_rev = 0  # highest revision seen in any response (anchors watch-from-now)
        self._closed = False
        # The last call ran out its deadline with no member answering: until one answers again, a call
        # gets one RPC timeout, not the whole deadline (an outage is reported in seconds, not 15 s each).
        self._unreachable = False
        self._write_failure: WriteFailed | None = None  # etcd refused a write for space (NOSPACE)
        self._alarm_check: asyncio.Task[None] | None = None  # looks at etcd's alarms while it is set

    @property
    def where(self) -> str:
        """The cluster as `WriteFailed` names it: ``etcd://host:port[,host:port]`` (no credentials)."""
        return "etcd://" + ",".join(f"{host}:{port}" for host, port in self._endpoints)

    def write_failure(self) -> WriteFailed | None:
        return self._write_failure

    @property
    def current_endpoint(self) -> str:
        """The member calls go to now (it changes on failover)."""
        host, port = self._endpoints[self._current]
        return f"{host}:{port}"

    # ------------------------------------------------------------------ plumbing

    async def _client(self, index: int) -> aetcd.Client:
        if self._closed:
            raise StoreError("store is closed")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._clients = {}  # the old ones belong to a loop that is gone or elsewhere
            self._loop = loop
        client = self._clients.get(index)
        if client is None:
            host, port = self._endpoints[index]
            client = _Client(host=host, port=port, timeout=None, tls=self.tls, options=self._channel_options,
                             username=self._auth[0] if self._auth else None,
                             password=self._auth[1] if self._auth else None)
            self._clients[index] = client
        await client.connect()
        return client

    async def _drop_client(self, index: int) -> None:
        client = self._clients.pop(index, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _failover(self, index: int) -> None:
        if self._current == index:
            self._current = (index + 1) % len(self._endpoints)

    def _saw(self, header: Any) -> int:
        rev = int(header.revision)
        if rev > self._seen_rev:
            self._seen_rev = rev
        return rev

    async def _call(self, fn: Callable[[aetcd.Client], Awaitable[T]], *, repeatable: bool = True,
                    stores: bool = False) -> T:
        """Run one RPC, failing over between endpoints until ``deadline``.

        ``repeatable``: applying the request twice is as good as once, so it may be resent after
        a lost answer; otherwise only errors proving it was never sent are retried.
        ``stores``: the request stores something (a put, a txn with one, a lease grant), which etcd
        refuses while its NOSPACE alarm stands: its answer clears `write_failure`.
        """
        deadline = time.monotonic() + (min(self.timeout, self.deadline) if self._unreachable else self.deadline)
        backoff = 0.02
        while True:
            index = self._current
            try:
                client = await self._client(index)
                answer = await fn(client)
                self._unreachable = False
                if stores:
                    self._write_failure = None
                return answer
            except (grpc.aio.AioRpcError, aetcd.exceptions.ClientError) as exc:
                if self._auth is not None and "auth token" in _details(exc).lower() and \
                        time.monotonic() < deadline:
                    await self._drop_client(index)  # the auth token expired: authenticate again
                    continue
                if _status(exc) not in _TRANSIENT:
                    raise self._refused(exc) from exc
                self._failover(index)
                if not repeatable and not any(s in _details(exc).lower() for s in _UNSENT):
                    raise _Ambiguous(f"etcd write outcome unknown: {_details(exc)}") from exc
                if time.monotonic() + backoff > deadline:
                    self._unreachable = True
                    raise Unavailable(f"etcd unreachable at {self._endpoints}: {_details(exc)}") from exc
                await asyncio.sleep(backoff)  # let an election finish / the next member answer
                backoff = min(backoff * 2, 0.5)

    def _refused(self, exc: BaseException) -> StoreError:
        """A non-retryable error as the contract's: etcd out of space is `WriteFailed`, remembered until
        a write stores something again or its alarm list shows no NOSPACE alarm."""
        if _NOSPACE not in _details(exc):
            return _translate(exc)
        failed = self._write_failure = WriteFailed(self.where, NOSPACE_CAUSE)
        loop = asyncio.get_running_loop()
        task = self._alarm_check
        if task is None or task.done() or task.get_loop() is not loop:
            self._alarm_check = loop.create_task(self._check_alarms(), name="etcd-nospace-alarm-check")
        return failed

    async def _check_alarms(self) -> None:
        """While `write_failure` is set: every ``ALARM_CHECK_EVERY``, etcd's alarms (a GET of the
        Maintenance Alarm API: no revision, no watch event, unlike a probe write); once no member has a
        NOSPACE alarm (an operator freed space and disarmed it) the failure is cleared."""
        get = rpc.AlarmRequest(action=rpc.AlarmRequest.GET, memberID=0, alarm=rpc.NONE)

        async def alarms(c: aetcd.Client) -> Any:
            return await c.maintenancestub.Alarm(get, timeout=self.timeout, metadata=c.metadata)

        while not self._closed:
            await asyncio.sleep(ALARM_CHECK_EVERY)
            failed = self._write_failure
            if failed is None:
                return
            try:
                resp = await self._call(alarms)
            except Exception:  # noqa: BLE001 - unreachable, or not allowed to look: not known to be fixed
                continue
            if not any(a.alarm == rpc.NOSPACE for a in resp.alarms) and self._write_failure is failed:
                self._write_failure = None  # (a failure newer than the look stands)

    async def _range(self, client: aetcd.Client, req: Any) -> Any:
        resp = await client.kvstub.Range(req, timeout=self.timeout, metadata=client.metadata)
        self._saw(resp.header)
        return resp

    async def _txn(self, client: aetcd.Client, req: Any) -> Any:
        resp = await client.kvstub.Txn(req, timeout=self.timeout, metadata=client.metadata)
        self._saw(resp.header)
        return resp

    @staticmethod
    def _guard_on(key: bytes, expect_revision: int) -> Any:
        if expect_revision == 0:
            return rpc.Compare(
                key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0
            )
        return rpc.Compare(
            key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=expect_revision
        )

    # ------------------------------------------------------------------ reads

    async def get(self, key: str) -> KeyValue | None:
        req = rpc.RangeRequest(key=_kb(key))
        resp = await self._call(lambda c: self._range(c, req))
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        start, end = _range_of(prefix)
        if after and _kb(after) >= start:
            start = _kb(after) + b"\0"  # the first key after it
        req = rpc.RangeRequest(key=start, range_end=end, limit=limit)
        resp = await self._call(lambda c: self._range(c, req))
        return [_kv(kv) for kv in resp.kvs], int(resp.header.revision)

    async def current_revision(self) -> int:
        req = rpc.RangeRequest(key=_ALL_KEYS, count_only=True)
        resp = await self._call(lambda c: self._range(c, req))
        return int(resp.header.revision)

    # ------------------------------------------------------------------ writes

    async def put(
        self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0
    ) -> int:
        kraw = _kb(key)
        put = rpc.PutRequest(key=kraw, value=bytes(value), lease=lease)
        if expect_revision is None:

            async def plain(c: aetcd.Client) -> Any:
                resp = await c.kvstub.Put(put, timeout=self.timeout, metadata=c.metadata)
                self._saw(resp.header)
                return resp

            return int((await self._call(plain, stores=True)).header.revision)  # a resend rewrites the same value
        req = rpc.TxnRequest(
            compare=[self._guard_on(kraw, expect_revision)],
            success=[rpc.RequestOp(request_put=put)],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=kraw))],
        )
        deadline = time.monotonic() + self.deadline
        while True:
            try:
                resp = await self._call(lambda c: self._txn(c, req), repeatable=False, stores=True)
            except _Ambiguous:
                # Did our write land? Read the key back: ours if it moved on and holds what we wrote.
                cur = await self.get(key)
                if cur is not None and cur.mod_revision != expect_revision:
                    if (cur.value, cur.lease) == (put.value, lease):
                        return cur.mod_revision
                    raise CasFailed(key, cur) from None
                if (cur.mod_revision if cur else 0) != expect_revision or time.monotonic() > deadline:
                    raise
                continue  # it did not land: send it again
            if not resp.succeeded:
                kvs = resp.responses[0].response_range.kvs
                raise CasFailed(key, _kv(kvs[0]) if kvs else None)
            return int(resp.header.revision)

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        kraw = _kb(key)
        dele = rpc.DeleteRangeRequest(key=kraw, prev_kv=True)
        if expect_revision is None:

            async def plain(c: aetcd.Client) -> Any:
                resp = await c.kvstub.DeleteRange(dele, timeout=self.timeout, metadata=c.metadata)
                self._saw(resp.header)
                return resp

            resp = await self._call(plain)  # after a lost answer the resend may report None
            return _kv(resp.prev_kvs[0]) if resp.prev_kvs else None
        req = rpc.TxnRequest(
            compare=[self._guard_on(kraw, expect_revision)],
            success=[rpc.RequestOp(request_delete_range=dele)],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=kraw))],
        )
        deadline = time.monotonic() + self.deadline
        while True:
            try:
                tresp = await self._call(lambda c: self._txn(c, req), repeatable=False)
                break
            except _Ambiguous:
                cur = await self.get(key)
                if cur is None:
                    return None  # gone: our delete (or another) landed; what it held is unknown
                if cur.mod_revision != expect_revision:
                    raise CasFailed(key, cur) from None
                if time.monotonic() > deadline:
                    raise
        if not tresp.succeeded:
            kvs = tresp.responses[0].response_range.kvs
            raise CasFailed(key, _kv(kvs[0]) if kvs else None)
        prev = tresp.responses[0].response_delete_range.prev_kvs
        return _kv(prev[0]) if prev else None

    async def delete_prefix(self, prefix: str) -> int:
        start, end = _range_of(prefix)
        req = rpc.DeleteRangeRequest(key=start, range_end=end)

        async def call(c: aetcd.Client) -> Any:
            resp = await c.kvstub.DeleteRange(req, timeout=self.timeout, metadata=c.metadata)
            self._saw(resp.header)
            return resp

        return int((await self._call(call)).deleted)

    @staticmethod
    def _op(op: TxnOp) -> Any:
        if isinstance(op, Put):
            put = rpc.PutRequest(key=_kb(op.key), value=bytes(op.value), lease=op.lease)
            return rpc.RequestOp(request_put=put)
        if isinstance(op, Get):
            if op.prefix:
                start, end = _range_of(op.key)
                return rpc.RequestOp(request_range=rpc.RangeRequest(key=start, range_end=end))
            return rpc.RequestOp(request_range=rpc.RangeRequest(key=_kb(op.key)))
        if isinstance(op, Delete):
            if op.prefix:
                start, end = _range_of(op.key)
                req = rpc.DeleteRangeRequest(key=start, range_end=end, prev_kv=True)
            else:
                req = rpc.DeleteRangeRequest(key=_kb(op.key), prev_kv=True)
            return rpc.RequestOp(request_delete_range=req)
        raise ValueError(f"unknown txn op {op!r}")

    @staticmethod
    def _compare(cmp: Compare) -> Any:
        try:
            target, field = _CMP_TARGET[cmp.target]
            result = _CMP_OP[cmp.op]
        except KeyError:
            raise ValueError(f"bad compare {cmp!r}") from None
        value = cmp.value if cmp.target == "value" else int(cmp.value)
        return rpc.Compare(key=_kb(cmp.key), target=target, result=result, **{field: value})

    async def txn(
        self, compares: Sequence[Compare], success: Sequence[TxnOp], failure: Sequence[TxnOp] = ()
    ) -> TxnResult:
        req = rpc.TxnRequest(
            compare=[self._compare(c) for c in compares],
            success=[self._op(o) for o in success],
            failure=[self._op(o) for o in failure],
        )
        writes = any(isinstance(o, Put | Delete) for o in (*success, *failure))
        stores = any(isinstance(o, Put) for o in (*success, *failure))  # etcd weighs both branches' puts
        resp = await self._call(lambda c: self._txn(c, req), repeatable=not writes, stores=stores)
        ops = success if resp.succeeded else failure
        rev = int(resp.header.revision)
        responses: list[object] = []
        for op, r in zip(ops, resp.responses, strict=True):
            if isinstance(op, Get):
                responses.append([_kv(kv) for kv in r.response_range.kvs])
            elif isinstance(op, Put):
                responses.append(rev)
            else:
                responses.append([_kv(kv) for kv in r.response_delete_range.prev_kvs])
        return TxnResult(bool(resp.succeeded), rev, responses)

    async def compact(self, revision: int) -> None:
        req = rpc.CompactionRequest(revision=revision)

        async def call(c: aetcd.Client) -> Any:
            resp = await c.kvstub.Compact(req, timeout=self.timeout, metadata=c.metadata)
            self._saw(resp.header)
            return resp

        try:
            await self._call(call)
        except StoreError as exc:
            if "compacted" not in str(exc):  # already compacted that far: nothing to do
                raise

    # ------------------------------------------------------------------ leases

    async def grant_lease(self, ttl: int) -> Lease:
        if ttl <= 0:
            raise ValueError("lease TTL must be positive")
        req = rpc.LeaseGrantRequest(TTL=ttl, ID=0)

        async def call(c: aetcd.Client) -> Any:
            resp = await c.leasestub.LeaseGrant(req, timeout=self.timeout, metadata=c.metadata)
            self._saw(resp.header)
            return resp

        resp = await self._call(call, stores=True)  # a duplicate grant just expires unused
        if resp.error:
            raise StoreError(f"etcd: {resp.error}")
        return Lease(int(resp.ID), int(resp.TTL))

    async def keep_alive(self, lease_id: int) -> int:
        async def call(c: aetcd.Client) -> Any:
            stream = c.leasestub.LeaseKeepAlive(
                iter([rpc.LeaseKeepAliveRequest(ID=lease_id)]), timeout=self.timeout, metadata=c.metadata
            )
            try:
                return await stream.read()
            finally:
                stream.cancel()

        resp = await self._call(call)
        if resp is grpc.aio.EOF or resp.TTL <= 0:
            raise LeaseNotFound(f"lease {lease_id} not found")
        return int(resp.TTL)

    async def revoke_lease(self, lease_id: int) -> None:
        req = rpc.LeaseRevokeRequest(ID=lease_id)

        async def call(c: aetcd.Client) -> Any:
            resp = await c.leasestub.LeaseRevoke(req, timeout=self.timeout, metadata=c.metadata)
            self._saw(resp.header)
            return resp

        with contextlib.suppress(LeaseNotFound):  # already expired or revoked: same outcome
            await self._call(call)

    # ------------------------------------------------------------------ watch

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        # "From now" is anchored at the call: anything written through this store after
        # watch() returns is delivered even if iteration starts later.
        anchor = start_revision
        if anchor is None and self._seen_rev:
            anchor = self._seen_rev + 1
        return self._watch(prefix, anchor, strict=start_revision is not None)

    async def _watch(self, prefix: str, next_rev: int | None, *, strict: bool) -> AsyncIterator[WatchEvent]:
        start, end = _range_of(prefix)
        delivered = False
        deadline: float | None = None  # set while reconnecting
        backoff = 0.02
        while True:
            index = self._current
            stream: WatchStream | None = None
            pending: asyncio.Future[Any] | None = None
            try:
                client = await self._client(index)
                stream = WatchStream(client)  # its own stream: see drods.store.etcd_watch
                await asyncio.wait_for(stream.open(start, end, next_rev), self.timeout)
                deadline, backoff = None, 0.02
                while True:
                    if pending is None:
                        pending = asyncio.ensure_future(stream.next())
                    done, _ = await asyncio.wait({pending}, timeout=self.watch_check)
                    if not done:
                        await self._probe(client)  # raises if the member stopped answering
                        continue
                    fut, pending = pending, None
                    try:
                        ev = fut.result()
                    except StopAsyncIteration:
                        return  # the stream ended without an error: the store is closing
                    out = _event(ev)
                    next_rev = out.kv.mod_revision + 1
                    delivered = True
                    yield out
            except aetcd.exceptions.RevisionCompactedError as exc:
                if strict or delivered:
                    raise Compacted(int(exc.compacted_revision)) from None
                next_rev = int(exc.compacted_revision)  # a from-now watch starts at what is kept
            except (grpc.aio.AioRpcError, aetcd.exceptions.ClientError, TimeoutError) as exc:
                if self._closed:
                    return
                if not isinstance(exc, TimeoutError) and _status(exc) not in _TRANSIENT:
                    raise _translate(exc) from exc
                self._failover(index)
                now = time.monotonic()
                deadline = deadline or now + self.deadline
                if now > deadline:
                    raise Unavailable(f"watch lost etcd at {self._endpoints}: {_details(exc)}") from exc
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
            finally:
                if pending is not None:
                    pending.cancel()
                if stream is not None:  # also a creation given up on: its late answer must reach no one
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(stream.close(), self.timeout)

    async def _probe(self, client: aetcd.Client) -> None:
        req = rpc.RangeRequest(key=_ALL_KEYS, count_only=True)
        await client.kvstub.Range(req, timeout=self.timeout, metadata=client.metadata)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        check = self._alarm_check
        if check is not None and check.get_loop() is asyncio.get_running_loop():
            check.cancel()  # (one on a loop that is gone ends with it)
        clients, self._clients = list(self._clients.values()), {}
        if self._loop is not asyncio.get_running_loop():
            return  # they belong to another loop; the process exit releases them
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()


def _event(ev: Any) -> WatchEvent:
    kv = ev.kv
    prev = ev.prev_kv
    prev_kv = (
        KeyValue(
            prev.key.decode("utf-8", "surrogateescape"),
            bytes(prev.value),
            prev.create_revision,
            prev.mod_revision,
            prev.version,
            prev.lease,
        )
        if prev is not None and prev.mod_revision
        else None
    )
    key = kv.key.decode("utf-8", "surrogateescape")
    if ev.kind == "DELETE":
        return WatchEvent(EventType.DELETE, KeyValue(key, b"", 0, kv.mod_revision, 0, 0), prev_kv)
    return WatchEvent(
        EventType.PUT,
        KeyValue(key, bytes(kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease),
        prev_kv,
    )
