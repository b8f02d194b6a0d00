"""The multi-cluster service directory (SPEC F8, KEP-1645).

A ``ServiceExport`` named like a Service (same namespace) exports it. The Service is propagated as
a dependent of every workload it selects (`drods.controllers.manifests.dependents`), so it exists
where those workloads' Bindings place them: those clusters are the export's *providers*, and the
directory lists each with its health — the Cluster's Ready condition and the ready replicas the
propagation controller observed there — and its endpoints: the addresses the member's own
EndpointSlices give for the Service, collected by `drods.steering.endpoints` (a provider that is
NotReady, gone or unreachable has its endpoints listed not ready).

`directory_entries` is pure (the API answers it from a registry listing; `DirectoryController`
from informer caches). The controller keeps, per export, the ``ServiceImport`` (KEP-1645: type,
ports, provider clusters; ``status.clusters`` their health) and what every member cluster receives
so the name resolves everywhere: the derived Service ``derived-<name>`` (the export's ports, no
selector) and, per provider cluster, an EndpointSlice ``derived-<name>-<cluster>`` labelled
``kubernetes.io/service-name: derived-<name>`` and ``multicluster.kubernetes.io/source-cluster:
<cluster>`` with that cluster's endpoint addresses and their readiness.

How they reach the members — the only coupling to propagation: the controller stores each as a
template and gives it a Binding (``derived-<ns>-<name>`` for the Service, ``derived-<ns>-<name>-eps-
<cluster>`` for a slice; Duplicated, ``targetClusters`` = every member cluster, labelled
``multicluster.io/managed-by: service-directory``), so the propagation controller delivers it like
any other object (push: applied to the member; pull: in the member's Work). When a provider's
endpoints change, its slice template changes and propagation updates every member's copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from drods.errors import ApiError
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.machinery.periodic import Periodic
from drods.machinery.shared import decode_template
from drods.machinery.tasks import stop_tasks
from drods.members.clients import MemberClients
from drods.model.annotations import MANAGED_BY
from drods.model.conditions import is_false, is_true
from drods.model.detection import DETECTED_KINDS
from drods.model.keys import ENDPOINTS_PREFIX, endpoints_key
from drods.model.kinds import (
    BINDING,
    CLUSTER,
    MULTI_CLUSTER_SERVICE,
    SERVICE_EXPORT,
    SERVICE_IMPORT,
    TEMPLATE_KINDS,
    WORKLOAD_KINDS,
    Kind,
    by_kind,
)
from drods.model.migration import traffic_withdrawn
from drods.model.remedy import traffic_controlled
from drods.model.selector import selects
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.steering.delivery import duplicated_binding
from drods.steering.endpoints import EndpointCollector, Target
from drods.steering.multicluster_service import mcs_targets

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
KUBERNETES_SERVICE_LABEL = "kubernetes.io/service-name"
SLICE_MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
SLICE_MANAGER = "service-directory.multicluster.io"
DERIVED_PREFIX = "derived-"
ENDPOINT_SLICE = next(k for k in TEMPLATE_KINDS if k.kind == "EndpointSlice")


def _service_kind() -> Kind:
    return next(k for k in WORKLOAD_KINDS if k.kind == "Service")


class TemplateLookup(Protocol):
    """Workload templates by (kind, namespace, name)."""

    def get(self, key: tuple[str, str, str], /) -> Obj | None: ...


class _CachedTemplates:
    """`TemplateLookup` over the template informers, decoding only what is asked for: a recomputation
    reads the templates of the exports' namespaces, not every workload of the fleet."""

    def __init__(self, informers: Iterable[Informer]) -> None:
        by_prefix = {inf.prefix: inf for inf in informers}
        self._by_kind = {k.kind: (k, by_prefix[k.key_prefix()]) for k in DETECTED_KINDS if k.key_prefix() in by_prefix}

    def get(self, key: tuple[str, str, str], /) -> Obj | None:
        kind, ns, name = key
        found = self._by_kind.get(kind)
        if found is None:
            return None
        k, inf = found
        obj: Obj | None = inf.cache.get(k.key(name, ns if k.namespaced else None))
        if obj is not None and not k.namespaced and ns != "default":
            return None  # a cluster-scoped object is found under no namespace but "default"
        return obj


def directory_entries(exports: Iterable[Obj], services: Mapping[tuple[str, str], Obj],
                      bindings: Iterable[Obj], templates: TemplateLookup,
                      clusters: Mapping[str, Obj], endpoints: Mapping[str, Obj] | None = None) -> list[Obj]:
    """One entry per export: ``{name, namespace, type, ports, clusters: [{cluster, healthy,
    clusterReady, replicas, readyReplicas, workloads, endpoints?, readyEndpoints?, endpointPorts?,
    endpointsObservedAt?}], conditions}``; ``endpoints``: the collected documents by store key
    (`drods.steering.endpoints`) — a row has ``endpoints`` once its cluster's were collected."""
    endpoints = endpoints or {}
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
                # a Remedy's TrafficControl keeps traffic off a cluster that is otherwise fine
                ready_cluster = cobj is not None and not is_false(cobj) and not \
                    (cobj.get("metadata") or {}).get("deletionTimestamp") and not traffic_controlled(cobj)
                row = rows.setdefault(c, {"cluster": c, "replicas": 0, "readyReplicas": 0,
                                          "clusterReady": ready_cluster and is_true(cobj), "workloads": []})
                row["replicas"] += int(p.get("replicas") or 0)
                row["readyReplicas"] += int(e.get("readyReplicas") or 0)
                row["workloads"].append(f"{ref.get('kind')}/{ref.get('name')}")
                row["reachable"] = ready_cluster
        for row in rows.values():
            reachable = bool(row.pop("reachable", False))
            row["healthy"] = reachable and row["readyReplicas"] > 0
            doc = endpoints.get(endpoints_key(row["cluster"], ns, name))
            if doc is not None:
                live = reachable and doc.get("reachable") is not False
                row["endpoints"] = [{**e, "ready": bool(e.get("ready")) and live} for e in doc.get("endpoints") or []]
                row["readyEndpoints"] = sum(1 for e in row["endpoints"] if e["ready"])
                # the member's own endpoints outrank the replicas last reported: none ready there (or the
                # member not reached when they were collected) is not healthy, before the cluster turns NotReady
                if doc.get("reachable") is False or (row["endpoints"] and not row["readyEndpoints"]):
                    row["healthy"] = False
                row["endpointPorts"] = doc.get("ports") or []
                row["endpointsObservedAt"] = doc.get("observedAt")
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
    # Only bindings in a namespace that exports something can provide; each request listed every
    # binding at once and read every one's template.
    exporting = {o["metadata"].get("namespace") or "default" for o in exports}
    bindings: list[Obj] = []
    templates: dict[tuple[str, str, str], Obj] = {}
    for b in await registry.scan(BINDING) if exporting else ():
        ref = (b.get("spec") or {}).get("resource") or {}
        ns = str(ref.get("namespace") or "default")
        if ns not in exporting:
            continue
        bindings.append(b)
        kind = by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if kind is None or not ref.get("name"):
            continue
        t = await registry.try_get(kind, str(ref["name"]), ns)
        if t is not None:
            templates[(kind.kind, ns, str(ref["name"]))] = t
    cl, _ = await registry.list(CLUSTER)
    kvs, _rev = await registry.store.range(ENDPOINTS_PREFIX)
    return directory_entries(exports, services, bindings, templates, {o["metadata"]["name"]: o for o in cl},
                             {kv.key: json.loads(kv.value) for kv in kvs})


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
                         "labels": {SERVICE_NAME_LABEL: entry["name"], MANAGED_BY: DIRECTORY_NAME}},
            "spec": spec}


def derived_slices(entry: Obj) -> list[Obj]:
    """Per provider cluster whose endpoints were collected, the EndpointSlice of the derived Service
    with that cluster's addresses (KEP-1645; Karmada labels them with the source cluster)."""
    out: list[Obj] = []
    for row in entry["clusters"]:
        if "endpoints" not in row:
            continue
        eps = [{"addresses": e["addresses"], "conditions": {"ready": e["ready"], "serving": e["ready"],
                                                            "terminating": False}} for e in row["endpoints"]]
        v6 = any(":" in a for e in row["endpoints"] for a in e["addresses"])
        out.append({"apiVersion": ENDPOINT_SLICE.api_version, "kind": ENDPOINT_SLICE.kind,
                    "metadata": {"name": f"{DERIVED_PREFIX}{entry['name']}-{row['cluster']}",
                                 "namespace": entry["namespace"],
                                 "labels": {KUBERNETES_SERVICE_LABEL: f"{DERIVED_PREFIX}{entry['name']}",
                                            SERVICE_NAME_LABEL: entry["name"], SOURCE_CLUSTER_LABEL: row["cluster"],
                                            SLICE_MANAGED_BY_LABEL: SLICE_MANAGER,
                                            MANAGED_BY: DIRECTORY_NAME}},
                    "addressType": "IPv6" if v6 else "IPv4", "endpoints": eps,
                    "ports": row.get("endpointPorts") or []})
    return out


def derived_binding(entry: Obj, clusters: list[str]) -> Obj:
    """The Binding that has propagation deliver `derived_service` to ``clusters``."""
    return duplicated_binding(f"{DERIVED_PREFIX}{entry['namespace']}-{entry['name']}", derived_service(entry),
                              clusters, {MANAGED_BY: DIRECTORY_NAME, SERVICE_NAME_LABEL: entry["name"]})


def slice_binding(entry: Obj, eps: Obj, clusters: list[str]) -> Obj:
    """The Binding that delivers one derived EndpointSlice to ``clusters``."""
    source = eps["metadata"]["labels"][SOURCE_CLUSTER_LABEL]
    return duplicated_binding(f"{DERIVED_PREFIX}{entry['namespace']}-{entry['name']}-eps-{source}", eps, clusters,
                              {MANAGED_BY: DIRECTORY_NAME, SERVICE_NAME_LABEL: entry["name"],
                               SOURCE_CLUSTER_LABEL: source})


def service_import(entry: Obj) -> tuple[Obj, Obj]:
    """The ServiceImport object and its status for one entry."""
    obj = {"apiVersion": SERVICE_IMPORT.api_version, "kind": SERVICE_IMPORT.kind,
           "metadata": {"name": entry["name"], "namespace": entry["namespace"],
                        "labels": {MANAGED_BY: DIRECTORY_NAME}},
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
    multicluster_services: Informer  # their providers' endpoints are collected too (`mcs_targets`)

    @classmethod
    def of(cls, manager: Manager) -> DirectoryInformers:
        return cls(manager.informer(SERVICE_EXPORT.key_prefix(), decode_stored),
                   manager.informer(_service_kind().key_prefix(), decode_template),
                   manager.informer(BINDING.key_prefix(), decode_binding_kept),
                   manager.informer(CLUSTER.key_prefix(), decode_stored),
                   tuple(manager.informer(k.key_prefix(), decode_template) for k in DETECTED_KINDS),
                   manager.informer(MULTI_CLUSTER_SERVICE.key_prefix(), decode_stored))

    def all(self) -> tuple[Informer, ...]:
        return (self.exports, self.services, self.bindings, self.clusters, *self.workloads, self.multicluster_services)

    def entries_for(self, exports: list[Obj], endpoints: Mapping[str, Obj] | None = None) -> list[Obj]:
        """`directory_entries` of ``exports`` (objects naming a Service: ServiceExports, or the backends
        of a MultiClusterIngress) from the informer caches."""
        if not exports:
            return []

        def objs(inf: Informer) -> list[Obj]:
            return [o for o in inf.cache.values() if o]

        services = {(o["metadata"].get("namespace") or "default", o["metadata"]["name"]): o
                    for o in objs(self.services)}
        clusters = {o["metadata"]["name"]: o for o in objs(self.clusters)}
        return directory_entries(exports, services, objs(self.bindings), _CachedTemplates(self.workloads), clusters,
                                 endpoints)


class DirectoryController:
    """Single-active (``/leases/service-directory``): exports → ServiceImports, derived Services and
    derived EndpointSlices, recomputed whenever an export, a Service, a Binding, a Cluster, a
    workload or a provider's collected endpoints change. With member ``clients`` it also runs the
    `EndpointCollector` over the providers of every export."""

    def __init__(self, registry: ObjectRegistry, informers: DirectoryInformers, coalesce_seconds: float = 0.05,
                 clients: MemberClients | None = None, endpoint_poll_seconds: float = 2.0) -> None:
        self.registry = registry
        self.inf = informers
        self.coalesce = coalesce_seconds
        self._wake = asyncio.Event()
        self._written: dict[str, Any] = {}
        self.clients = clients
        self.collector = EndpointCollector(registry.store, clients, self.targets, self._wake.set,
                                           endpoint_poll_seconds) if clients is not None else None

    async def run(self) -> None:
        collecting: asyncio.Task[None] | None = None
        try:
            with subscribed(*((inf, self._wake_on_change) for inf in self.inf.all())):
                await wait_synced(*self.inf.all())
                if self.collector is not None:
                    await self.collector.load()
                    collecting = asyncio.create_task(self.collector.run(), name="endpoint-collector")
                self._wake.set()
                # Only changes wake it (the collector's too); a failed pass ends the run and the
                # manager restarts it, re-reading everything.
                await Periodic(LEASE, self.reconcile, None, wake=self._wake,
                               coalesce_s=self.coalesce, restart_on_failure=True).run()
        finally:
            if collecting is not None:
                await stop_tasks([collecting])
            if self.clients is not None:
                await self.clients.close()

    def _wake_on_change(self, _key: str, _old: Any, _new: Any) -> None:
        self._wake.set()

    def entries(self) -> list[Obj]:
        exports = [o for o in self.inf.exports.cache.values() if o]
        return self.inf.entries_for(exports, self.collector.docs if self.collector is not None else {})

    def targets(self) -> set[Target]:
        """What the endpoint collector polls: every provider cluster of every export and of every
        MultiClusterService (`drods.steering.multicluster_service`)."""
        clusters = [o["metadata"]["name"] for o in self.inf.clusters.cache.values()
                    if o and not o["metadata"].get("deletionTimestamp")]
        mcs = [o for o in self.inf.multicluster_services.cache.values() if o]
        return {Target(row["cluster"], e["namespace"], e["name"]) for e in self.entries() for row in e["clusters"]} \
            | mcs_targets(mcs, clusters)

    async def reconcile(self) -> None:
        entries = self.entries()
        # the fleet's names only for a pass with exports: each cluster's report wakes a pass
        members = sorted(o["metadata"]["name"] for o in self.inf.clusters.cache.values()
                         if o and not (o.get("metadata") or {}).get("deletionTimestamp")) if entries else []
        wanted: set[str] = set()
        slices_wanted: set[tuple[str, str]] = set()
        for e in entries:
            ident = f"{e['namespace']}/{e['name']}"
            wanted.add(ident)
            imp, status = service_import(e)
            derived = derived_service(e) if e["clusters"] and members else None
            binding = derived_binding(e, members) if derived is not None else None
            slices = derived_slices(e) if derived is not None else []
            slices_wanted |= {(e["namespace"], sl["metadata"]["name"]) for sl in slices}
            state = (imp, status, derived, binding, slices, members)
            if self._written.get(ident) == state:
                continue
            batch: list[tuple[Kind, Any]] = [(SERVICE_IMPORT, imp)]
            if derived is not None and binding is not None:
                batch += [(_service_kind(), derived), (BINDING, binding)]
            for sl in slices:
                batch += [(ENDPOINT_SLICE, sl), (BINDING, slice_binding(e, sl, members))]
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
        await self._remove_stale_slices(slices_wanted)

    async def _remove_stale_slices(self, wanted: set[tuple[str, str]]) -> None:
        """Derived slices of providers that are gone (or of exports that are), with their Bindings."""
        prefix = ENDPOINT_SLICE.key_prefix()
        for inf in self.inf.workloads:
            if inf.prefix != prefix:
                continue  # only the slices' informer: the others hold every workload of the fleet
            for o in list(inf.cache.values()):
                if not o or o.get("kind") != ENDPOINT_SLICE.kind:
                    continue
                meta = o["metadata"]
                labels = meta.get("labels") or {}
                ns = meta.get("namespace") or "default"
                if labels.get(MANAGED_BY) != DIRECTORY_NAME or (ns, meta["name"]) in wanted:
                    continue
                with contextlib.suppress(ApiError):
                    await self.registry.delete(BINDING, f"{DERIVED_PREFIX}{ns}-{labels.get(SERVICE_NAME_LABEL)}-eps-"
                                                        f"{labels.get(SOURCE_CLUSTER_LABEL)}")
                with contextlib.suppress(ApiError):
                    await self.registry.delete(ENDPOINT_SLICE, meta["name"], ns)

    async def _remove_derived(self, ns: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            await self.registry.delete(BINDING, f"{DERIVED_PREFIX}{ns}-{name}")
        with contextlib.suppress(ApiError):
            await self.registry.delete(_service_kind(), f"{DERIVED_PREFIX}{name}", ns)
