"""``drods keys rotate``: a new key-encryption key, and everything sealed under an older one sealed
again — while the control plane runs.

1. The keyring gets a new primary KEK (the old ones stay, so nothing becomes unreadable).
2. After ``settle_seconds`` every running process has noticed (they check the keyring file at
   most a second apart) and seals new writes with it.
3. Every object of a kind the ``encryption`` section lists (`drods.security.at_rest`) and every
   sealed Cluster credential not under the new primary is written again with a compare-and-swap on
   its revision — objects stored in plaintext before their kind was listed are sealed now — and
   sealed objects of kinds taken off the list are written again in plaintext. A value changed
   meanwhile was stored by its writer as it should be. Passes repeat until one finds nothing left.

``drods keys retire`` (`retire`) then removes an old KEK from the keyring — one that leaked, say —
once the same scan finds nothing sealed with it: not the primary, no stored value and no Cluster
credential. It scans again after running processes have re-read the keyring (one that had not yet
taken the new primary could have sealed a value with the old one meanwhile: the key is then put
back), and compacts the store's history, whose older revisions may still hold values that KEK
sealed and that no process could open any more (a watch behind them relists instead).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drods.model.kinds import ALL_KINDS
from drods.registry.secrets import ENCRYPTED, ENVELOPE_TAG, SecretBox, load_or_create_key
from drods.security.at_rest import sealable_prefixes
from drods.security.envelope import DecryptionFailed, Envelope
from drods.store import Store
from drods.store.base import CasFailed
from drods.store.encrypted import EncryptingStore, outermost, reencrypt


@dataclass(frozen=True)
class Rotation:
    primary: str
    objects: int  # whole objects sealed again
    unsealed: int  # whole objects of kinds no longer listed, stored in plaintext again
    fields: int  # secret fields (credentials) sealed again
    passes: int


async def reseal_fields(store: Store, secrets: SecretBox) -> int:
    """Secret fields (``Kind.secret_paths``) not sealed with the primary KEK, sealed again."""
    done = 0
    for kind in ALL_KINDS:
        if not kind.secret_paths:
            continue
        kvs, _ = await store.range(kind.key_prefix())
        for kv in kvs:
            obj = json.loads(kv.value)
            spec = obj.get("spec")
            if not isinstance(spec, dict) or not secrets.stale_paths(spec, kind.secret_paths):
                continue
            obj["spec"] = secrets.reveal(spec, kind.secret_paths)
            secrets.seal(obj["spec"], kind.secret_paths, None)
            try:
                await store.put(kv.key, json.dumps(obj, separators=(",", ":")).encode(),
                                expect_revision=kv.mod_revision, lease=kv.lease)
                done += 1
            except CasFailed:
                continue  # rewritten meanwhile, with the new key
    return done


async def rotate(store: EncryptingStore, data_dir: Path, *, settle_seconds: float = 2.0,
                 max_passes: int = 5) -> Rotation:
    keyring = store.envelope.keyring
    primary = keyring.rotate()
    await asyncio.sleep(settle_seconds)
    secrets = SecretBox(load_or_create_key(data_dir / "encryption.key"), Envelope(keyring))
    objects = unsealed = fields = 0
    for n in range(1, max_passes + 1):
        sealed, opened, skipped = await reencrypt(store, sealable_prefixes())
        resealed = await reseal_fields(store, secrets)
        objects, unsealed, fields = objects + sealed, unsealed + opened, fields + resealed
        if not (sealed or opened or skipped or resealed):
            return Rotation(primary, objects, unsealed, fields, n)
    return Rotation(primary, objects, unsealed, fields, max_passes)


@dataclass(frozen=True)
class KekUse:
    """What is still sealed with one KEK."""

    objects: int = 0  # stored values (whole objects, audit records, domain configuration)
    fields: int = 0  # Cluster credentials (secret fields)

    def __bool__(self) -> bool:
        return bool(self.objects or self.fields)


class KeyInUse(Exception):
    """A KEK cannot be retired: it is the primary, or something is still sealed with it."""

    def __init__(self, message: str, uses: dict[str, KekUse]) -> None:
        super().__init__(message)
        self.uses = uses


@dataclass(frozen=True)
class Retirement:
    retired: list[str]
    primary: str
    remaining: list[str]
    compacted_to: int | None  # the revision the store's history was compacted to (None: not compacted)


def _field_keks(envelope: Envelope, spec: Any, path: str) -> str | None:
    """The KEK that sealed the secret field at ``path`` of ``spec`` (None: absent, plaintext or Fernet)."""
    cur: Any = spec
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if not isinstance(cur, dict) or set(cur) != {ENCRYPTED}:
        return None
    token = str(cur[ENCRYPTED])
    if not token.startswith(ENVELOPE_TAG):
        return None
    try:
        return envelope.kek_of(base64.b64decode(token[len(ENVELOPE_TAG):]))
    except (binascii.Error, IndexError):
        return None


async def kek_uses(store: EncryptingStore) -> dict[str, KekUse]:
    """KEK ID → what is sealed with it: every value under the prefixes rotation scans (read as stored,
    without opening it) and every secret field of the kinds that have them."""
    envelope = store.envelope
    objects: Counter[str] = Counter()
    fields: Counter[str] = Counter()
    for prefix in outermost([*store.prefixes, *sealable_prefixes()]):
        raw, _ = await store.inner.range(prefix)
        for kv in raw:
            kek = envelope.kek_of(kv.value)
            if kek is not None:
                objects[kek] += 1
    for kind in ALL_KINDS:
        if not kind.secret_paths:
            continue
        raw, _ = await store.inner.range(kind.key_prefix())
        for kv in raw:
            try:
                obj = json.loads(envelope.open(kv.value, kv.key.encode()))
            except (DecryptionFailed, ValueError):
                continue  # not readable here: counted above under the KEK that sealed it
            spec = obj.get("spec") if isinstance(obj, dict) else None
            for path in kind.secret_paths:
                kek = _field_keks(envelope, spec, path)
                if kek is not None:
                    fields[kek] += 1
    return {k: KekUse(objects[k], fields[k]) for k in set(objects) | set(fields)}


def _in_use_message(uses: dict[str, KekUse]) -> str:
    parts = [f"{k}: {u.objects} stored object(s) and {u.fields} Cluster credential(s)" for k, u in sorted(uses.items())]
    return ("still sealed with " + "; ".join(parts)
            + " — run `drods keys rotate` first (it seals them again with a new primary key), then retire")


async def retire(store: EncryptingStore, kek_ids: list[str], *, settle_seconds: float = 2.0,
                 compact: bool = True) -> Retirement:
    """Remove ``kek_ids`` from the keyring file if none is the primary and nothing is sealed with any
    of them (`KeyInUse` otherwise, the keyring unchanged; ``KeyError`` for an ID it does not hold)."""
    keyring = store.envelope.keyring
    doc = keyring.document()
    unknown = [k for k in kek_ids if k not in doc.keys]
    if unknown:
        raise KeyError(", ".join(unknown))
    if doc.primary in kek_ids:
        raise KeyInUse(f"{doc.primary} is the primary key-encryption key: every new write is sealed with it — "
                       "run `drods keys rotate` first (a new primary), then retire this one", {})
    uses = {k: u for k, u in (await kek_uses(store)).items() if k in kek_ids and u}
    if uses:
        raise KeyInUse(_in_use_message(uses), uses)
    before = {k: keyring.retire(k) for k in kek_ids}
    # a process that had not yet taken the current primary (it re-reads the keyring at most a second
    # apart) may have sealed a value with a retired key meanwhile: look again once they all have
    await asyncio.sleep(settle_seconds)
    uses = {k: u for k, u in (await kek_uses(store)).items() if k in kek_ids and u}
    if uses:
        for k in kek_ids:
            keyring.restore(k, before[k])
        raise KeyInUse(_in_use_message(uses), uses)
    compacted = None
    if compact:
        compacted = await store.current_revision()
        await store.compact(compacted)
    after = keyring.document()
    return Retirement(sorted(kek_ids), after.primary, sorted(after.keys), compacted)
