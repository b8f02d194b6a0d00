"""Encryption at rest for sensitive object fields (SEC2): Cluster credentials.

Fields are sealed with the keyring's envelope (`drods.security.envelope`: a fresh AES-256-GCM data
key per value, wrapped by the primary KEK; the field's path is authenticated) as
``{"encrypted": "env1:<base64>"}``. Values sealed earlier with Fernet (``DATA_DIR/encryption.key``)
are still read, and re-sealed with the envelope by ``drods keys rotate``. Whole objects of some
kinds (Secrets, Works) are encrypted one level down, in the store (`drods.store.encrypted`).
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from drods.keyfile import load_or_create
from drods.security.envelope import DecryptionFailed, Envelope

ENCRYPTED = "encrypted"  # marker key of an encrypted field: {"encrypted": "env1:<base64>" | "<fernet token>"}
ENVELOPE_TAG = "env1:"
REDACTED = "***redacted***"


def load_or_create_key(path: Path) -> bytes:
    """Every API replica must share this key (same data dir, or DRODS_ENCRYPTION_KEY)."""
    return load_or_create(path, "DRODS_ENCRYPTION_KEY", Fernet.generate_key)


class SecretBox:
    """Encrypts and redacts the fields a kind marks secret (dotted paths relative to ``spec``)."""

    def __init__(self, key: bytes, envelope: Envelope | None = None) -> None:
        self._fernet = Fernet(key)  # seals only without an envelope; always reads what it sealed
        self._envelope = envelope

    def _encrypt(self, value: Any, path: str) -> str:
        plain = json.dumps(value).encode()
        if self._envelope is None:
            return self._fernet.encrypt(plain).decode()
        return ENVELOPE_TAG + base64.b64encode(self._envelope.seal(plain, path.encode())).decode()

    def stale_paths(self, spec: dict[str, Any], paths: tuple[str, ...]) -> list[str]:
        """Secret fields not sealed with the envelope's primary KEK (to re-seal on rotation)."""
        if self._envelope is None:
            return []
        primary = self._envelope.keyring.primary
        out = []
        for path in paths:
            parent, leaf = _parent(spec, path)
            sealed = parent.get(leaf) if parent is not None else None
            if not isinstance(sealed, dict) or set(sealed) != {ENCRYPTED}:
                continue
            token = str(sealed[ENCRYPTED])
            if not token.startswith(ENVELOPE_TAG) or \
                    self._envelope.kek_of(base64.b64decode(token[len(ENVELOPE_TAG):])) != primary:
                out.append(path)
        return out

    def seal(self, spec: dict[str, Any], paths: tuple[str, ...], previous: dict[str, Any] | None) -> None:
        """Encrypt in place. Leaves sent back as the redaction marker keep their previous value."""
        for path in paths:
            parent, leaf = _parent(spec, path)
            if parent is None or parent.get(leaf) is None:
                continue
            value = parent[leaf]
            if isinstance(value, dict) and set(value) == {ENCRYPTED}:
                continue
            old = None
            if previous is not None:
                prev_parent, _ = _parent(previous, path)
                if prev_parent is not None and isinstance(prev_parent.get(leaf), dict):
                    old = self._decrypt(prev_parent[leaf], path)
            value = _restore(value, old)
            parent[leaf] = {ENCRYPTED: self._encrypt(value, path)}

    def reveal(self, spec: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
        out = copy.deepcopy(spec)
        for path in paths:
            parent, leaf = _parent(out, path)
            if parent is not None and isinstance(parent.get(leaf), dict):
                parent[leaf] = self._decrypt(parent[leaf], path)
        return out

    def redact(self, spec: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
        """What a GET shows: which secret fields are set, never their values."""
        out = self.reveal(spec, paths)
        for path in paths:
            parent, leaf = _parent(out, path)
            if parent is not None and parent.get(leaf) is not None:
                parent[leaf] = _mask(parent[leaf])
        return out

    def _decrypt(self, sealed: dict[str, Any], path: str) -> Any:
        if set(sealed) != {ENCRYPTED}:
            return sealed
        token = str(sealed[ENCRYPTED])
        try:
            if token.startswith(ENVELOPE_TAG):
                if self._envelope is None:
                    raise DecryptionFailed("no keyring")
                return json.loads(self._envelope.open(base64.b64decode(token[len(ENVELOPE_TAG):]), path.encode()))
            return json.loads(self._fernet.decrypt(token.encode()))
        except (InvalidToken, DecryptionFailed, ValueError) as exc:
            raise RuntimeError(f"cannot decrypt {path}: wrong encryption key") from exc


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, str) and value:
        return REDACTED
    return value


def _restore(value: Any, old: Any) -> Any:
    if value == REDACTED:
        return old
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else {}
        return {k: _restore(v, old_map.get(k)) for k, v in value.items()}
    return value


def _parent(doc: dict[str, Any], path: str) -> tuple[dict[str, Any] | None, str]:
    *heads, leaf = path.split(".")
    cur: Any = doc
    for h in heads:
        cur = cur.get(h) if isinstance(cur, dict) else None
        if cur is None:
            return None, leaf
    return (cur if isinstance(cur, dict) else None), leaf


