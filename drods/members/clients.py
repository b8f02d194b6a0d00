"""One `MemberClient` per push-mode Cluster, built from its decrypted credentials (SEC2) and rebuilt
when the endpoint or the credentials change. Every member controller shares this one cache, so a
cluster has one thread pool, one connection state and one fail-fast gate (SEC4)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from typing import Any

import yaml

from drods.members.client import MemberClient, MemberOptions
from drods.model.kinds import CLUSTER
from drods.registry.objects import ObjectRegistry

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CLOSE_DELAY = 30.0  # seconds a replaced client lives on for the calls still using it


def fingerprint(spec: Obj) -> str:
    """What the client depends on (of a revealed spec: ciphertext changes on every write)."""
    basis = [spec.get("syncMode") or "Push", spec.get("endpoint"), spec.get("credentials")]
    return hashlib.sha256(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_pull(obj: Obj) -> bool:
    return (obj.get("spec") or {}).get("syncMode") == "Pull"


def _ca_pem(data: str) -> bytes:
    """``caData`` as PEM text or base64 of PEM (kubeconfig's certificate-authority-data style)."""
    if "-----BEGIN" in data:
        return data.encode()
    return base64.b64decode(data)


def build_client(name: str, spec: Obj, options: MemberOptions) -> MemberClient | None:
    """From a revealed Cluster spec; None when the cluster gives DRO-DS no way in (pull mode)."""
    if spec.get("syncMode") == "Pull":
        return None
    creds = spec.get("credentials") or {}
    if creds.get("kubeconfig"):
        doc = yaml.safe_load(creds["kubeconfig"])
        if not isinstance(doc, dict):
            raise ValueError("spec.credentials.kubeconfig is not a kubeconfig document")
        return MemberClient.from_kubeconfig(name, doc, context=creds.get("context"), options=options)
    if spec.get("endpoint"):
        ca = creds.get("caData")
        return MemberClient.from_endpoint(name, spec["endpoint"], creds.get("token"),
                                          ca_cert=_ca_pem(ca) if ca else None,
                                          insecure_skip_verify=bool(creds.get("insecureSkipTLSVerify")),
                                          options=options)
    return None


class MemberClients:
    def __init__(self, registry: ObjectRegistry, options: MemberOptions) -> None:
        self.registry = registry
        self.options = options
        self._clients: dict[str, tuple[str, MemberClient | None, str | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _revealed(self, obj: Obj) -> Obj:
        return self.registry.secrets.reveal(dict(obj.get("spec") or {}), CLUSTER.secret_paths)

    def invalidate(self, name: str, obj: Obj | None) -> None:
        """Called with the stored Cluster object on every change (None = deleted)."""
        cur = self._clients.get(name)
        if cur is None:
            return
        try:
            same = obj is not None and fingerprint(self._revealed(obj)) == cur[0]
        except Exception:  # noqa: BLE001 - unreadable credentials: rebuild (and report) on next use
            same = False
        if not same:
            self._clients.pop(name, None)
            old = cur[1]
            if old is not None:  # calls in flight finish first
                loop = asyncio.get_running_loop()
                loop.call_later(CLOSE_DELAY, lambda: loop.create_task(old.close()))

    def cached(self, name: str) -> MemberClient | None:
        cur = self._clients.get(name)
        return cur[1] if cur else None

    async def get(self, name: str) -> tuple[MemberClient | None, str | None]:
        """(client, None), or (None, why there is none)."""
        cur = self._clients.get(name)
        if cur is not None:
            return cur[1], cur[2]
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            cur = self._clients.get(name)
            if cur is not None:
                return cur[1], cur[2]
            obj = await self.registry.try_get(CLUSTER, name, reveal=True)
            if obj is None:
                return None, f"cluster {name} is not registered"
            client: MemberClient | None = None
            why: str | None = None
            try:
                client = build_client(name, obj.get("spec") or {}, self.options)
                if client is None:
                    why = ("pull mode: the cluster's agent pulls its work" if is_pull(obj)
                           else "no endpoint or credentials to reach the cluster")
            except (ValueError, yaml.YAMLError, KeyError, TypeError) as e:
                why = f"unusable credentials: {e}"
                log.warning("cluster %s: %s", name, why)
            except Exception as e:  # noqa: BLE001 - a broken kubeconfig must not stop other clusters
                why = f"unusable credentials: {type(e).__name__}: {e}"
                log.warning("cluster %s: %s", name, why)
            self._clients[name] = (fingerprint(obj.get("spec") or {}), client, why)
            return client, why

    def ready(self, name: str) -> bool | None:
        """The member client's own view (None when there is no client yet)."""
        c = self.cached(name)
        return None if c is None or c.state.condition == "Unknown" else c.state.ready

    async def close(self) -> None:
        clients = [c for _, c, _ in self._clients.values() if c is not None]
        self._clients.clear()
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
