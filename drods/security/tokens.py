"""The record of issued tokens in the store (``/auth/tokens/<id>``): what ``drods token list`` shows
and how ``drods token revoke ID`` reaches every API server (they follow the prefix with an informer
and refuse a revoked ID at once, whatever the token's expiry). The token itself is never stored.

Every command that signs a token goes through `drods.api.auth.issue_recorded`: the record is written before the
token is handed out, so no token exists that ``drods token revoke`` cannot reach."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from drods.model.keys import TOKENS_PREFIX
from drods.store import KeyValue, Store

if TYPE_CHECKING:
    from collections.abc import Callable


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


def decode_record(kv: KeyValue) -> TokenRecord | None:
    try:
        doc = json.loads(kv.value)
        if doc.get("namespaces") is not None:
            doc["namespaces"] = tuple(doc["namespaces"])
        return TokenRecord(**doc)
    except (ValueError, TypeError):
        return None


async def record(store: Store, rec: TokenRecord) -> None:
    await store.put(f"{TOKENS_PREFIX}{rec.id}", json.dumps(asdict(rec)).encode())


async def revoke(store: Store, token_id: str, now: float | None = None) -> TokenRecord | None:
    """Mark ``token_id`` revoked (None: no such token was recorded)."""
    key = f"{TOKENS_PREFIX}{token_id}"
    kv = await store.get(key)
    rec = decode_record(kv) if kv is not None else None
    if rec is None:
        return None
    if rec.revokedAt is None:
        rec = TokenRecord(**{**asdict(rec), "revokedAt": time.time() if now is None else now})
        await store.put(key, json.dumps(asdict(rec)).encode(), expect_revision=kv.mod_revision if kv else None)
    return rec


async def live(store: Store, now: float | None = None) -> list[TokenRecord]:
    kvs, _ = await store.range(TOKENS_PREFIX)
    t = time.time() if now is None else now
    return [r for kv in kvs if (r := decode_record(kv)) is not None and r.live(t)]


class _Revoking(Protocol):
    revoked: set[str]


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
