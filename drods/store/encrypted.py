"""A store whose values under some key prefixes are encrypted before they reach the backend (SEC2).

It sits between every component of a process and the backend (`drods.assembly`), so informers,
the registry and controllers read plaintext while the SQLite file, its WAL, its revision log and
etcd hold only ciphertext (`drods.security.envelope`). Prefixes: the kinds the configuration's
``encryption`` section names (`drods.security.at_rest`). Writes are sealed under those prefixes
only; reads open every sealed value whatever its key, so a kind taken off the list stays readable
until `reencrypt` has unsealed it, and a value written before its kind was listed is read as it is
(plaintext) until then. ``value`` compares on an encrypted key are refused: ciphertext differs on
every write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from drods.security.envelope import MAGIC, Envelope
from drods.store.base import (
    CasFailed,
    Compare,
    KeyValue,
    Put,
    Store,
    TxnOp,
    TxnResult,
    WatchEvent,
)
from drods.store.delegating import DelegatingStore


class EncryptingStore(DelegatingStore):
    def __init__(self, inner: Store, envelope: Envelope, prefixes: Sequence[str]) -> None:
        super().__init__(inner)
        self.envelope = envelope
        self.prefixes = tuple(prefixes)

    def encrypted(self, key: str) -> bool:
        return key.startswith(self.prefixes)

    def seal(self, key: str, value: bytes) -> bytes:
        return self.envelope.seal(value, key.encode()) if self.encrypted(key) else value

    def _open(self, kv: KeyValue | None) -> KeyValue | None:
        if kv is None or not kv.value.startswith(MAGIC):
            return kv
        return KeyValue(kv.key, self.envelope.open(kv.value, kv.key.encode()), kv.create_revision,
                        kv.mod_revision, kv.version, kv.lease)

    def _open_all(self, kvs: list[KeyValue]) -> list[KeyValue]:
        return [self._open(kv) or kv for kv in kvs]

    def _cas_failed(self, e: CasFailed) -> CasFailed:
        return CasFailed(e.key, self._open(e.current))

    async def get(self, key: str) -> KeyValue | None:
        return self._open(await self.inner.get(key))

    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        kvs, rev = await self.inner.range(prefix, limit=limit, after=after)
        return self._open_all(kvs), rev

    async def put(self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0) -> int:
        try:
            return await self.inner.put(key, self.seal(key, value), expect_revision=expect_revision, lease=lease)
        except CasFailed as e:
            raise self._cas_failed(e) from None

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        try:
            return self._open(await self.inner.delete(key, expect_revision=expect_revision))
        except CasFailed as e:
            raise self._cas_failed(e) from None

    def _op(self, op: TxnOp) -> TxnOp:
        return Put(op.key, self.seal(op.key, op.value), op.lease) if isinstance(op, Put) else op

    async def txn(self, compares: Sequence[Compare], success: Sequence[TxnOp],
                  failure: Sequence[TxnOp] = ()) -> TxnResult:
        for c in compares:
            if c.target == "value" and self.encrypted(c.key):
                raise ValueError(f"value compare on encrypted key {c.key!r}")
        res = await self.inner.txn(compares, [self._op(o) for o in success], [self._op(o) for o in failure])
        ops = success if res.succeeded else failure
        responses: list[object] = []
        for op, out in zip(ops, res.responses, strict=False):
            if isinstance(out, list) and not isinstance(op, Put):
                responses.append(self._open_all(out))
            else:
                responses.append(out)
        responses += res.responses[len(responses):]
        return TxnResult(res.succeeded, res.revision, responses)

    async def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        async for ev in self.inner.watch(prefix, start_revision=start_revision):
            yield WatchEvent(ev.type, self._open(ev.kv) or ev.kv, self._open(ev.prev_kv))


async def reencrypt(store: EncryptingStore, scan: Sequence[str] = ()) -> tuple[int, int, int]:
    """Write every value under an encrypted prefix again, sealed under the primary KEK, and every
    sealed value under the other prefixes of ``scan`` again in plaintext (kinds taken off the list).
    Each write is a compare-and-swap on the value's revision, so a concurrent change wins (its writer
    sealed it, or not, as its list says). Values stored in plaintext before their kind was listed
    are sealed too. Returns (sealed, unsealed, skipped)."""
    primary = store.envelope.keyring.primary
    sealed = unsealed = skipped = 0
    for prefix in outermost([*store.prefixes, *scan]):
        raw, _ = await store.inner.range(prefix)
        for kv in raw:
            kek = store.envelope.kek_of(kv.value)
            listed = store.encrypted(kv.key)
            if (kek == primary) if listed else (kek is None):
                continue
            plain = store.envelope.open(kv.value, kv.key.encode())
            try:
                await store.inner.put(kv.key, store.seal(kv.key, plain), expect_revision=kv.mod_revision,
                                      lease=kv.lease)
            except CasFailed:
                skipped += 1  # changed meanwhile: its writer stored it as it should be
                continue
            if listed:
                sealed += 1
            else:
                unsealed += 1
    return sealed, unsealed, skipped


def outermost(prefixes: Sequence[str]) -> list[str]:
    """``prefixes`` without those inside another (each key is visited once)."""
    out: list[str] = []
    for p in sorted(set(prefixes)):
        if not out or not p.startswith(out[-1]):
            out.append(p)
    return out
