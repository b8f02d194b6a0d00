"""Encryption at rest for sensitive object fields (SEC2), with Fernet (AES-128-CBC + HMAC)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from drods.keyfile import load_or_create

ENCRYPTED = "encrypted"  # marker key of an encrypted field: {"encrypted": "<fernet token>"}
REDACTED = "***redacted***"


def load_or_create_key(path: Path) -> bytes:
    """Every API replica must share this key (same data dir, or DRODS_ENCRYPTION_KEY)."""
    return load_or_create(path, "DRODS_ENCRYPTION_KEY", Fernet.generate_key)


class SecretBox:
    """Encrypts and redacts the fields a kind marks secret (dotted paths relative to ``spec``)."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

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
            parent[leaf] = {ENCRYPTED: self._fernet.encrypt(json.dumps(value).encode()).decode()}

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
        try:
            return json.loads(self._fernet.decrypt(str(sealed[ENCRYPTED]).encode()))
        except InvalidToken as exc:
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


