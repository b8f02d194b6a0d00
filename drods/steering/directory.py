"""The multi-cluster service directory (SPEC F8, KEP-1645).

A ``ServiceExport`` named like a Service (same namespace) exports it. The Service is propagated as
a dependent of every workload it selects (`drods.controllers.manifests.dependents`), so it exists
where those workloads' Bindings place them: those clusters are the export's *providers*, and the
directory lists each with its health — the Cluster's Ready condition and the ready replicas the
propagation controller observed there — kept current from member status.

`directory_entries` is pure (the API answers it from a registry listing; `DirectoryController`
from informer caches). The controller keeps, per export, the ``ServiceImport`` (KEP-1645: type,
ports, provider clusters; ``status.clusters`` their health) and the derived Service every member
cluster receives so the name resolves everywhere.

How the derived Service reaches the members — the only coupling to propagation: `derived_service`
says what it is (``derived-<name>``, the export's ports, no selector, labelled with the service
name); the controller stores it as a template and gives it a Binding (``derived-<ns>-<name>``,
Duplicated, ``targetClusters`` = every member cluster, labelled ``multicluster.io/managed-by:
service-directory``), so the propagation controller delivers it like any other object (push: applied
to the member; pull: in the member's Work). Endpoint addresses are not collected from members, so
no EndpointSlice is derived: the directory lists endpoints per cluster with their health.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.controllers.detector import DETECTED_KINDS, decode_object
from drods.controllers.manifests import selects
from drods.errors import ApiError
from drods.machinery.informer import Informer
from drods.machinery.manager import Manager
from drods.model.conditions import is_false, is_true
from drods.model.kinds import BINDING, CLUSTER, SERVICE_EXPORT, SERVICE_IMPORT, WORKLOAD_KINDS, Kind, by_kind
from drods.model.migration import traffic_withdrawn
from drods.registry.objects import ObjectRegistry
from drods.schedulerd.records import MANAGED_BY_LABEL

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
DERIVED_PREFIX = "derived-"


def _service_kind() -> Kind:
    return next(k for k in WORKLOAD_KINDS if k.kind == "Service")


def directory_entries(exports: Iterable[Obj], services: Mapping[tuple[str, str], Obj],
                      bindings: Iterable[Obj], templates: Mapping[tuple[str, str, str], Obj],
                      clusters: Mapping[str, Obj]) -> list[Obj]:
    """One entry per export: ``{name, namespace, type, ports, clusters: [{cluster, healthy,
    clusterReady, replicas, readyReplicas, workload}], conditions}``."""
    bindings = list(bindings)
    out: list[Obj] = []
    for ex in sorted(exports, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])):
        ns = ex["metadata"].get("namespace") or "default"
        name = ex["metadata"]["name"]
        svc = services.get((ns, name))
        entry: Obj = {"name": name, "namespace": ns, "type": "ClusterSetIP", "ports": [], "clusters": []}
        if svc is None:
            entry["conditions"] = [{"type": "Valid", "status": "False", "reason": "ServiceNotFound",
                                    "message": f"no Service {ns}/{name} to export"}]
            out.append(entry)
            continue
        spec = svc.get("spec") or {}
        if spec.get("clusterIP") == "None":
            entry["type"] = "Headless"
        entry["ports"] = [{k: p[k] for k in ("name", "port", "protocol", "appProtocol") if k in p}
                          for p in spec.get("ports") or [] if isinstance(p, dict) and "port" in p]
        rows: dict[str, Obj] = {}
        for b in bindings:
            ref = (b.get("spec") or {}).get("resource") or {}
            if (ref.get("namespace") or "default") != ns or b["metadata"].get("deletionTimestamp"):
                continue
            template = templates.get((str(ref.get("kind")), ns, str(ref.get("name"))))
            if template is None or not selects(svc, template):
                continue
            status = b.get("status") or {}
            observed = {str(e.get("cluster")): e for e in status.get("clusters") or [] if isinstance(e, dict)}
            withdrawn = traffic_withdrawn(b)  # F3: a migration moved the traffic off these copies
            for p in status.get("placement") or []:
                if not isinstance(p, dict) or int(p.get("replicas") or 0) <= 0 or str(p.get("cluster")) in withdrawn:
                    continue
                c = str(p["cluster"])
                e = observed.get(c) or {}
                cobj = clusters.get(c)
                ready_cluster = cobj is not None and not is_false(cobj) and not \
                    (cobj.get("metadata") or {}).get("deletionTimestamp")
                row = rows.setdefault(c, {"cluster": c, "replicas": 0, "readyReplicas": 0,
                                          "clusterReady": ready_cluster and is_true(cobj), "workloads": []})
                row["replicas"] += int(p.get("replicas") or 0)
                row["readyReplicas"] += int(e.get("readyReplicas") or 0)
                row["workloads"].append(f"{ref.get('kind')}/{ref.get('name')}")
                row["reachable"] = ready_cluster
        for row in rows.values():
            row["healthy"] = bool(row.pop("reachable", False)) and row["readyReplicas"] > 0
        entry["clusters"] = sorted(rows.values(), key=lambda r: r["cluster"])
        entry["conditions"] = [{"type": "Valid", "status": "True", "reason": "Exported",
                                "message": f"{len(rows)} cluster(s) provide it"}]
        out.append(entry)
    return out


async def directory(registry: ObjectRegistry) -> list[Obj]:
    """The directory from a fresh registry listing (what the API answers)."""
    exports, _ = await registry.list(SERVICE_EXPORT)
    service_kind = _service_kind()
    svcs, _ = await registry.list(service_kind)
    services = {(o["metadata"].get("namespace") or "default", o["metadata"]["name"]): o for o in svcs}
    bindings, _ = await registry.list(BINDING)
    templates: dict[tuple[str, str, str], Obj] = {}
    for b in bindings:
        ref = (b.get("spec") or {}).get("resource") or {}
        kind = by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if kind is None or not ref.get("name"):
            continue
        t = await registry.try_get(kind, str(ref["name"]), str(ref.get("namespace") or "default"))
        if t is not None:
            templates[(kind.kind, str(ref.get("namespace") or "default"), str(ref["name"]))] = t
    cl, _ = await registry.list(CLUSTER)
    return directory_entries(exports, services, bindings, templates, {o["metadata"]["name"]: o for o in cl})


DIRECTORY_NAME = "service-directory"
LEASE = "service-directory"


def derived_service(entry: Obj) -> Obj:
    """The Service every member receives for one exported service (KEP-1645's derived service)."""
    ports = [{k: v for k, v in p.items() if k in ("name", "port", "protocol", "appProtocol")}
             for p in entry["ports"]]
    spec: Obj = {"type": "ClusterIP", "ports": ports}
    if entry["type"] == "Headless":
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{DERIVED_PREFIX}{entry['name']}", "namespace": entry["namespace"],
                         "labels": {SERVICE_NAME_LABEL: entry["name"], MANAGED_BY_LABEL: DIRECTORY_NAME}},
            "spec": spec}


def derived_binding(entry: Obj, clusters: list[str]) -> Obj:
    """The Binding that has propagation deliver `derived_service` to ``clusters``."""
    return {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
            "metadata": {"name": f"{DERIVED_PREFIX}{entry['namespace']}-{entry['name']}",
                         "labels": {MANAGED_BY_LABEL: DIRECTORY_NAME, SERVICE_NAME_LABEL: entry["name"]}},
            "spec": {"resource": {"apiVersion": "v1", "kind": "Service", "namespace": entry["namespace"],
                                  "name": f"{DERIVED_PREFIX}{entry['name']}"},
                     "replicas": 1, "targetClusters": sorted(clusters),
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}


def service_import(entry: Obj) -> tuple[Obj, Obj]:
    """The ServiceImport object and its status for one entry."""
    obj = {"apiVersion": SERVICE_IMPORT.api_version, "kind": SERVICE_IMPORT.kind,
           "metadata": {"name": entry["name"], "namespace": entry["namespace"],
                        "labels": {MANAGED_BY_LABEL: DIRECTORY_NAME}},
           "spec": {"type": entry["type"], "ports": entry["ports"],
                    "clusters": [r["cluster"] for r in entry["clusters"]]}}
    status = {"clusters": entry["clusters"], "conditions": entry.get("conditions") or []}
    return obj, status


@dataclass(frozen=True, slots=True)
class DirectoryInformers:
    exports: Informer
    services: Informer
    bindings: Informer
    clusters: Informer
    workloads: tuple[Informer, ...]

    @classmethod
    def of(cls, manager: Manager) -> DirectoryInformers:
        return cls(manager.informer(SERVICE_EXPORT.key_prefix(), decode_object),
                   manager.informer(_service_kind().key_prefix(), decode_object),
                   manager.informer(BINDING.key_prefix(), decode_object),
                   manager.informer(CLUSTER.key_prefix(), decode_object),
                   tuple(manager.informer(k.key_prefix(), decode_object) for k in DETECTED_KINDS))

    def all(self) -> tuple[Informer, ...]:
        return (self.exports, self.services, self.bindings, self.clusters, *self.workloads)


class DirectoryController:
    """Single-active (``/leases/service-directory``): exports → ServiceImports + derived Services,
    recomputed whenever an export, a Service, a Binding, a Cluster or a workload changes."""

    def __init__(self, registry: ObjectRegistry, informers: DirectoryInformers, coalesce_seconds: float = 0.05) -> None:
        self.registry = registry
        self.inf = informers
        self.coalesce = coalesce_seconds
        self._wake = asyncio.Event()
        self._written: dict[str, Any] = {}

    async def run(self) -> None:
        stops = [inf.on_change(lambda _k, _o, _n: self._wake.set()) for inf in self.inf.all()]
        try:
            for inf in self.inf.all():
                await inf.wait_synced()
            self._wake.set()
            while True:
                await self._wake.wait()
                self._wake.clear()
                await asyncio.sleep(self.coalesce)
                await self.reconcile()
        finally:
            for stop in stops:
                stop()

    def entries(self) -> list[Obj]:
        def objs(inf: Informer) -> list[Obj]:
            return [o for o in inf.cache.values() if o]

        exports = objs(self.inf.exports)
        if not exports:
            return []
        services = {(o["metadata"].get("namespace") or "default", o["metadata"]["name"]): o
                    for o in objs(self.inf.services)}
        templates = {(str(o.get("kind")), str(o["metadata"].get("namespace") or "default"),
                      str(o["metadata"]["name"])): o for inf in self.inf.workloads for o in objs(inf)}
        clusters = {o["metadata"]["name"]: o for o in objs(self.inf.clusters)}
        return directory_entries(exports, services, objs(self.inf.bindings), templates, clusters)

    async def reconcile(self) -> None:
        entries = self.entries()
        members = sorted(o["metadata"]["name"] for o in self.inf.clusters.cache.values()
                         if o and not (o.get("metadata") or {}).get("deletionTimestamp"))
        wanted: set[str] = set()
        for e in entries:
            ident = f"{e['namespace']}/{e['name']}"
            wanted.add(ident)
            imp, status = service_import(e)
            derived = derived_service(e) if e["clusters"] and members else None
            binding = derived_binding(e, members) if derived is not None else None
            state = (imp, status, derived, binding)
            if self._written.get(ident) == state:
                continue
            batch: list[tuple[Kind, Any]] = [(SERVICE_IMPORT, imp)]
            if derived is not None and binding is not None:
                batch += [(_service_kind(), derived), (BINDING, binding)]
            await self.registry.batch_upsert(batch)
            await self.registry.update_status(SERVICE_IMPORT, e["name"], status, e["namespace"])
            if derived is None:
                await self._remove_derived(e["namespace"], e["name"])
            self._written[ident] = state
        for ident in [i for i in self._written if i not in wanted]:
            ns, _, name = ident.partition("/")
            with contextlib.suppress(ApiError):
                await self.registry.delete(SERVICE_IMPORT, name, ns)
            await self._remove_derived(ns, name)
            self._written.pop(ident, None)

    async def _remove_derived(self, ns: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            await self.registry.delete(BINDING, f"{DERIVED_PREFIX}{ns}-{name}")
        with contextlib.suppress(ApiError):
            await self.registry.delete(_service_kind(), f"{DERIVED_PREFIX}{name}", ns)
