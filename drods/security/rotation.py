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
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

from drods.model.kinds import ALL_KINDS
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.security.at_rest import sealable_prefixes
from drods.security.envelope import Envelope
from drods.store import Store
from drods.store.base import CasFailed
from drods.store.encrypted import EncryptingStore, reencrypt


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
