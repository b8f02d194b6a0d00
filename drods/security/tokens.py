"""The record of issued tokens in the store (``/auth/tokens/<id>``): what ``drods token list`` shows
and how ``drods token revoke ID`` reaches every API server (they follow the prefix with an informer
and refuse a revoked ID at once, whatever the token's expiry). The token itself is never stored.

Every command that signs a token goes through `drods.api.auth.issue_recorded`: the record is written before the
token is handed out, so no token exists that ``drods token revoke`` cannot reach. A record and its audit
record (``audit``: the writes of the audit log's entry for it, SEC3) are written in one transaction."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from drods.model.keys import CLUSTER_CUTOFFS_PREFIX, TOKENS_PREFIX
from drods.store import KeyValue, Store
from drods.store.base import Compare, Put


@dataclass(frozen=True)
class TokenRecord:
    id: str
    subject: str
    role: str
    issuedAt: float
    expiresAt: float | None = None
    cluster: str | None = None
    namespaces: tuple[str, ...] | None = None
    revokedAt: float | None = None

    def live(self, now: float) -> bool:
        return self.revokedAt is None and (self.expiresAt is None or self.expiresAt > now)


# the writes of the audit record of ``verb`` (create | revoke) on a token's record
AuditWrites = Callable[[str, TokenRecord], list[Put]]


def decode_record(kv: KeyValue) -> TokenRecord | None:
    try:
        doc = json.loads(kv.value)
        if doc.get("namespaces") is not None:
            doc["namespaces"] = tuple(doc["namespaces"])
        return TokenRecord(**doc)
    except (ValueError, TypeError):
        return None


def _put(rec: TokenRecord) -> Put:
    return Put(f"{TOKENS_PREFIX}{rec.id}", json.dumps(asdict(rec)).encode())


async def record(store: Store, rec: TokenRecord, audit: AuditWrites | None = None) -> None:
    await store.txn([], [_put(rec), *(audit("create", rec) if audit else ())])


async def revoke(store: Store, token_id: str, now: float | None = None,
                 audit: AuditWrites | None = None) -> TokenRecord | None:
    """Mark ``token_id`` revoked (None: no such token was recorded); a token revoked already is left
    as it is (and not audited again)."""
    key = f"{TOKENS_PREFIX}{token_id}"
    while True:
        kv = await store.get(key)
        rec = decode_record(kv) if kv is not None else None
        if kv is None or rec is None:
            return None
        if rec.revokedAt is not None:
            return rec
        rec = TokenRecord(**{**asdict(rec), "revokedAt": time.time() if now is None else now})
        done = await store.txn([Compare(key, "mod", "=", kv.mod_revision)],
                               [_put(rec), *(audit("revoke", rec) if audit else ())])
        if done.succeeded:
            return rec


async def revoke_cluster_agents(store: Store, cluster: str, now: float | None = None,
                                audit: AuditWrites | None = None) -> list[TokenRecord]:
    """Revoke every live cluster-agent token of ``cluster`` (its Cluster was deleted: a cluster
    registered again under the name must not accept them); the records revoked now."""
    t = time.time() if now is None else now
    out = []
    for rec in await live(store, t):
        if rec.role == "cluster-agent" and rec.cluster == cluster:
            done = await revoke(store, rec.id, t, audit)
            if done is not None and done.revokedAt == t:
                out.append(done)
    return out


async def cut_off_cluster_agents(store: Store, cluster: str, now: float | None = None) -> int:
    """Refuse every ``cluster``-agent token issued before now, recorded or not (one signed with the key
    outside the CLI has no record to revoke). ``iat`` has whole seconds: the cutoff is this second's
    start, so a cluster registered again at once can be given a token in the same second. The cutoff."""
    cutoff = math.floor(time.time() if now is None else now)
    await store.put(f"{CLUSTER_CUTOFFS_PREFIX}{cluster}",
                    json.dumps({"cluster": cluster, "notIssuedBefore": cutoff}).encode())
    return cutoff


def decode_cutoff(kv: KeyValue) -> int | None:
    try:
        return int(json.loads(kv.value)["notIssuedBefore"])
    except (ValueError, TypeError, KeyError):
        return None


async def live(store: Store, now: float | None = None) -> list[TokenRecord]:
    kvs, _ = await store.range(TOKENS_PREFIX)
    t = time.time() if now is None else now
    return [r for kv in kvs if (r := decode_record(kv)) is not None and r.live(t)]


class _Revoking(Protocol):
    revoked: set[str]


class _CuttingOff(Protocol):
    agent_cutoffs: dict[str, int]


def revocations(authority: _Revoking) -> Callable[[str, TokenRecord | None, TokenRecord | None], None]:
    """An informer handler of ``/auth/tokens/`` keeping ``authority.revoked`` (a token authority's)
    equal to the revoked IDs."""

    def changed(key: str, old: TokenRecord | None, new: TokenRecord | None) -> None:
        token_id = key[len(TOKENS_PREFIX):]
        if new is not None and new.revokedAt is not None:
            authority.revoked.add(token_id)
        else:
            authority.revoked.discard(token_id)

    return changed


def cutoffs(authority: _CuttingOff) -> Callable[[str, int | None, int | None], None]:
    """An informer handler of ``/auth/cluster-cutoffs/`` keeping ``authority.agent_cutoffs`` equal to them."""

    def changed(key: str, old: int | None, new: int | None) -> None:
        cluster = key[len(CLUSTER_CUTOFFS_PREFIX):]
        if new is not None:
            authority.agent_cutoffs[cluster] = new
        else:
            authority.agent_cutoffs.pop(cluster, None)

    return changed
