"""The multi-cluster service directory (SPEC F8, KEP-1645).

A ``ServiceExport`` named like a Service (same namespace) exports it. The Service is propagated as
a dependent of every workload it selects (`drods.controllers.manifests.dependents`), so it exists
where those workloads' Bindings place them: those clusters are the export's *providers*, and the
directory lists each with its health — the Cluster's Ready condition and the ready replicas the
propagation controller observed there — kept current from member status.

`directory_entries` is pure (the API answers it from a registry listing; the directory controller
from informer caches). `derived_manifests` is the one place that says what a consumer cluster
receives: the ``derived-<name>`` Service (KEP-1645's ClusterSetIP analogue, same ports, no
selector) and one EndpointSlice per provider cluster, labelled with the service name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from drods.controllers.manifests import selects
from drods.model.conditions import is_false, is_true
from drods.model.kinds import BINDING, CLUSTER, SERVICE_EXPORT, WORKLOAD_KINDS, by_kind
from drods.registry.objects import ObjectRegistry

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
DERIVED_PREFIX = "derived-"


def _service_kind() -> Any:
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
            for p in status.get("placement") or []:
                if not isinstance(p, dict) or int(p.get("replicas") or 0) <= 0:
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
