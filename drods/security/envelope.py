"""Envelope encryption of stored values (SEC2): values are sealed with a 256-bit data key (DEK,
AES-GCM, a random nonce per value), and each value carries its DEK wrapped by a key-encryption key
(KEK, AES-GCM too) from the keyring. As in Kubernetes' KMS v2, a DEK serves many writes (up to
``DEK_USES``, far below AES-GCM's bound for random nonces) and is replaced when the primary KEK
changes, so a write costs one encryption rather than a key generation and a wrap; a reader keeps
the DEKs it has unwrapped, by their wrapped bytes.

The shape of Kubernetes' encryption at rest (a storage transformer per resource, a KMS-style
envelope): what reaches SQLite or etcd — files, WAL, revision history, snapshots — is ciphertext;
the store key is the authenticated data, so a value cannot be moved to another key. Rotation adds
a KEK and makes it primary; old KEKs stay in the keyring to read what they wrapped until
``drods keys rotate`` has re-encrypted every value (`drods.store.encrypted.reencrypt`), and
``drods keys retire`` then drops one that nothing is sealed with any more (`drods.security.rotation`).

Keyring: ``DATA_DIR/keyring.json`` (0600) — ``{"primary": ID, "keys": {ID: base64 key},
"added": {ID: RFC 3339}}`` (``added`` is informational, absent from keyrings written before it) —
or the same document in ``DRODS_KEYRING``; every process over one store must share it. A running
process notices a rotation or a retirement by the file's change (checked at most once a second, and
at once when a value names a KEK it does not know); a KEK gone from the file opens nothing more,
DEKs it unwrapped earlier included.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"\x00drods-env1\x00"
KEYRING_FILE = "keyring.json"
ENV_VAR = "DRODS_KEYRING"
_NONCE = 12
_WRAPPED = _NONCE + 32 + 16


class DecryptionFailed(Exception):
    """A stored value names an unknown KEK or fails authentication (wrong key, tampered value)."""


@dataclass(frozen=True)
class KeyringDoc:
    primary: str
    keys: dict[str, bytes]
    added: dict[str, str] = field(default_factory=dict)  # KEK ID → when it was added (RFC 3339), when known

    def to_json(self) -> str:
        doc: dict[str, object] = {"primary": self.primary,
                                  "keys": {k: base64.b64encode(v).decode() for k, v in self.keys.items()}}
        added = {k: v for k, v in self.added.items() if k in self.keys}
        if added:
            doc["added"] = added
        return json.dumps(doc)

    @classmethod
    def parse(cls, text: str) -> KeyringDoc:
        doc = json.loads(text)
        keys = {str(k): base64.b64decode(v) for k, v in doc["keys"].items()}
        if doc["primary"] not in keys or any(len(v) != 32 for v in keys.values()):
            raise ValueError("keyring: primary must name one of its 32-byte keys")
        added = doc.get("added")
        when = {str(k): str(v) for k, v in added.items() if k in keys} if isinstance(added, dict) else {}
        return cls(str(doc["primary"]), keys, when)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Keyring:
    """The KEKs of one data dir (or of ``DRODS_KEYRING``), reloaded when the file changes."""

    def __init__(self, path: Path | None, doc: KeyringDoc) -> None:
        self.path = path
        self._doc = doc
        self._mtime = path.stat().st_mtime_ns if path is not None and path.exists() else 0
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, data_dir: Path) -> Keyring:
        env = os.environ.get(ENV_VAR)
        if env:
            return cls(None, KeyringDoc.parse(env))
        path = data_dir / KEYRING_FILE
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            first = KeyringDoc("k1", {"k1": secrets.token_bytes(32)}, {"k1": _now()})
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process made it first: use theirs
                pass
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(first.to_json())
        return cls(path, KeyringDoc.parse(path.read_text()))

    def _refresh(self, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._checked < 1.0:
            return
        with self._lock:
            self._checked = now
            try:
                mtime = self.path.stat().st_mtime_ns
                if mtime != self._mtime:
                    self._doc, self._mtime = KeyringDoc.parse(self.path.read_text()), mtime
            except (OSError, ValueError, KeyError):
                return  # keep the keys we have; the next check tries again

    @property
    def primary(self) -> str:
        self._refresh()
        return self._doc.primary

    def key(self, kek_id: str) -> bytes:
        if kek_id not in self._doc.keys:
            self._refresh(force=True)
        try:
            return self._doc.keys[kek_id]
        except KeyError:
            raise DecryptionFailed(f"unknown key-encryption key {kek_id!r}") from None

    def rotate(self) -> str:
        """Add a new KEK and make it primary (the old ones are kept); returns its ID."""
        if self.path is None:
            raise ValueError(f"the keyring comes from {ENV_VAR}: rotate it there")
        with self._lock:
            current = KeyringDoc.parse(self.path.read_text())
            n = 1 + max((int(k[1:]) for k in current.keys if k[1:].isdigit()), default=0)
            new_id = f"k{n}"
            doc = KeyringDoc(new_id, {**current.keys, new_id: secrets.token_bytes(32)},
                             {**current.added, new_id: _now()})
            _write_private(self.path, doc.to_json())
            self._doc, self._mtime = doc, self.path.stat().st_mtime_ns
        return new_id

    def document(self) -> KeyringDoc:
        """The keyring as the file holds it now (what ``drods keys list`` shows)."""
        self._refresh(force=True)
        return self._doc

    def retire(self, kek_id: str) -> KeyringDoc:
        """Remove ``kek_id`` from the keyring file (written whole, then renamed over it: 0600, never
        half-written); returns the keyring as it was, for `restore`. ``KeyError`` for an ID it does
        not hold, ``ValueError`` for the primary or a keyring from ``DRODS_KEYRING``. Checking that
        nothing is still sealed with it is the caller's (`drods.security.rotation.retire`)."""
        if self.path is None:
            raise ValueError(f"the keyring comes from {ENV_VAR}: remove the key there")
        with self._lock:
            current = KeyringDoc.parse(self.path.read_text())
            if kek_id not in current.keys:
                raise KeyError(kek_id)
            if kek_id == current.primary:
                raise ValueError(f"{kek_id!r} is the primary key-encryption key")
            doc = KeyringDoc(current.primary, {k: v for k, v in current.keys.items() if k != kek_id},
                             {k: v for k, v in current.added.items() if k != kek_id})
            _write_private(self.path, doc.to_json())
            self._doc, self._mtime = doc, self.path.stat().st_mtime_ns
        return current

    def restore(self, kek_id: str, before: KeyringDoc) -> None:
        """Put back a KEK `retire` removed (something was sealed with it meanwhile), keeping whatever
        else changed in the file since."""
        if self.path is None:
            return
        with self._lock:
            current = KeyringDoc.parse(self.path.read_text())
            added = {**current.added, **({kek_id: before.added[kek_id]} if kek_id in before.added else {})}
            doc = KeyringDoc(current.primary, {**current.keys, kek_id: before.keys[kek_id]}, added)
            _write_private(self.path, doc.to_json())
            self._doc, self._mtime = doc, self.path.stat().st_mtime_ns


@dataclass
class _DataKey:
    kek_id: str
    header: bytes  # MAGIC, the KEK's ID and the wrapped DEK: what every value sealed with it starts with
    aead: AESGCM
    uses: int = 0


class Envelope:
    """Seals and opens stored values with the keyring's KEKs."""

    DEK_USES = 1 << 20
    OPENED_DEKS = 256  # unwrapped DEKs kept for reading

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self._lock = threading.Lock()
        self._dek: _DataKey | None = None
        self._opened: OrderedDict[bytes, AESGCM] = OrderedDict()  # KEK ID + wrapped DEK → DEK

    def _data_key(self) -> _DataKey:
        kek_id = self.keyring.primary
        with self._lock:
            dek = self._dek
            if dek is None or dek.kek_id != kek_id or dek.uses >= self.DEK_USES:
                key, wrap_nonce = AESGCM.generate_key(bit_length=256), os.urandom(_NONCE)
                wrapped = wrap_nonce + AESGCM(self.keyring.key(kek_id)).encrypt(wrap_nonce, key, kek_id.encode())
                ident = kek_id.encode()
                dek = self._dek = _DataKey(kek_id, MAGIC + bytes([len(ident)]) + ident + wrapped, AESGCM(key))
            dek.uses += 1
            return dek

    def seal(self, value: bytes, aad: bytes) -> bytes:
        dek, nonce = self._data_key(), os.urandom(_NONCE)
        return dek.header + nonce + dek.aead.encrypt(nonce, value, aad)

    def _unwrap(self, kek_id: str, wrapped: bytes) -> AESGCM:
        kek = self.keyring.key(kek_id)  # first: a KEK removed from the keyring opens nothing any more
        ident = kek_id.encode() + b"\x00" + wrapped
        with self._lock:
            aead = self._opened.get(ident)
            if aead is not None:
                self._opened.move_to_end(ident)
                return aead
        aead = AESGCM(AESGCM(kek).decrypt(wrapped[:_NONCE], wrapped[_NONCE:], kek_id.encode()))
        with self._lock:
            self._opened[ident] = aead
            while len(self._opened) > self.OPENED_DEKS:
                self._opened.popitem(last=False)
        return aead

    def open(self, blob: bytes, aad: bytes) -> bytes:
        """The plaintext; a value stored before encryption was enabled is returned as it is."""
        if not blob.startswith(MAGIC):
            return blob
        try:
            at = len(MAGIC)
            n = blob[at]
            kek_id = blob[at + 1:at + 1 + n].decode()
            at += 1 + n
            wrapped, at = blob[at:at + _WRAPPED], at + _WRAPPED
            nonce, body = blob[at:at + _NONCE], blob[at + _NONCE:]
            return self._unwrap(kek_id, wrapped).decrypt(nonce, body, aad)
        except (InvalidTag, IndexError, UnicodeDecodeError) as e:
            raise DecryptionFailed(f"stored value cannot be decrypted ({type(e).__name__})") from e

    def kek_of(self, blob: bytes) -> str | None:
        """The KEK that wrapped ``blob`` (None: stored in plaintext)."""
        if not blob.startswith(MAGIC):
            return None
        n = blob[len(MAGIC)]
        return blob[len(MAGIC) + 1:len(MAGIC) + 1 + n].decode(errors="replace")
