"""The control plane's object registry with the two rules a real member enforces that DRO-DS's own
API server does not: objects go into namespaces that exist, and new namespaces are Active."""

from __future__ import annotations

import json
from typing import Any

from drods.errors import ApiError, Forbidden, NotFound, conflict, not_found
from drods.model.kinds import Kind
from drods.model.namespaces import labelled
from drods.registry.objects import ObjectRegistry
from drods.sim.kinds import NAMESPACE

Obj = dict[str, Any]
# Held by every namespace until the sim's controller has deleted what it holds (`drods.sim.controller`);
# set at create, so a namespace deleted before the controller's next pass still takes its contents along
NS_FINALIZER = "sim.drods.io/namespace-contents"
# What a real API server answers for a new object: the status fields Kubernetes' types don't omit
# when zero (the official client refuses a StatefulSet status without ``replicas``).
INITIAL_STATUS: dict[str, Obj] = {
    "Namespace": {"phase": "Active"},
    "Deployment": {},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "DaemonSet": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                  "numberReady": 0},
    "Job": {},
    "ReplicaSet": {"replicas": 0},
}


class SimRegistry(ObjectRegistry):
    async def create(self, kind: Kind, obj: Any, namespace: str | None = None, *, dry_run: bool = False) -> Obj:
        if "create" not in kind.verbs:  # metrics.k8s.io is computed, never stored
            raise ApiError(405, "METHOD_NOT_ALLOWED", f"{kind.plural} cannot be created", {"kind": kind.plural})
        if kind.namespaced:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            ns = namespace or (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
            existing = await self.try_get(NAMESPACE, ns)
            if existing is None:
                raise NotFound(f'namespaces "{ns}" not found',
                               {"name": ns, "kind": "namespaces"},
                               code="NAMESPACE_NOT_FOUND")
            if existing["metadata"].get("deletionTimestamp"):
                raise Forbidden(f"unable to create new content in namespace {ns} because it is "
                                "being terminated", {"name": ns, "kind": "namespaces"})
        if isinstance(obj, dict) and kind.kind in INITIAL_STATUS:
            obj = {**obj, "status": dict(INITIAL_STATUS[kind.kind])}  # a create never sets status
        if isinstance(obj, dict) and kind.kind == "Namespace":
            obj = labelled(obj)  # kube-apiserver's name label (1.21+)
            meta = obj["metadata"]
            if NS_FINALIZER not in (meta.get("finalizers") or []):
                obj = {**obj, "metadata": {**meta, "finalizers": [*(meta.get("finalizers") or []), NS_FINALIZER]}}
        return await super().create(kind, obj, namespace, dry_run=dry_run)

    async def put_object(self, kind: Kind, obj: Obj, *, resource_version: str | None = None) -> Obj:
        """Write spec and status together (a controller binding a pod sets both); CAS on the
        revision the caller read, so a concurrent user change is a 409 and the pass retries."""
        meta = obj["metadata"]
        key = kind.key(meta["name"], meta.get("namespace") if kind.namespaced else None)
        kv = await self.store.get(key)
        if kv is None:
            raise not_found(kind.kind, meta["name"])
        if resource_version is not None and str(kv.mod_revision) != str(resource_version):
            raise conflict(kind.kind, meta["name"], str(kv.mod_revision))
        current: Obj = json.loads(kv.value)
        new = dict(obj)
        new["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
        return await self._write(kind, key, new, current, kv.mod_revision)
