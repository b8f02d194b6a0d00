"""What kube-controller-manager's EndpointSlice controller does, reduced to what DRO-DS observes.

Every Service with a selector gets one ``discovery.k8s.io/v1`` EndpointSlice (``<service>-<hash>``,
labelled ``kubernetes.io/service-name`` and managed by ``endpointslice-controller.k8s.io``) listing
the pods it selects that have an IP: their address, node, and ``ready`` / ``serving`` as the pod's
Ready condition says. Ports are the Service's target ports (a named target port is looked up in the
pods' container ports). Slices other controllers manage (the control plane's derived slices) are
left alone. Pure functions; `drods.sim.controller` does the I/O.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from drods.sim.resources import is_terminal
from drods.sim.workloads import is_ready

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"


def selected(service: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The live pods with an IP the Service's (non-empty) selector matches, by name."""
    selector = (service.get("spec") or {}).get("selector") or {}
    ns = service["metadata"].get("namespace", "default")
    if not selector:
        return []
    out = [p for p in pods if p["metadata"].get("namespace", "default") == ns
           and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
           and not is_terminal(p) and not p["metadata"].get("deletionTimestamp")
           and (p.get("status") or {}).get("podIP")]
    return sorted(out, key=lambda p: str(p["metadata"]["name"]))


def _target_port(port: Obj, pods: list[Obj]) -> int:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for pod in pods:
        for c in (pod.get("spec") or {}).get("containers") or []:
            for cp in c.get("ports") or []:
                if cp.get("name") == target and isinstance(cp.get("containerPort"), int):
                    return int(cp["containerPort"])
    return int(port.get("port") or 0)


def slice_name(service: Obj) -> str:
    meta = service["metadata"]
    return f"{meta['name']}-{zlib.crc32(str(meta.get('uid', meta['name'])).encode()) % 100000:05d}"


def endpoint_slice(service: Obj, pods: Iterable[Obj]) -> Obj | None:
    """The slice a Service with a selector has (None: it has no selector)."""
    meta = service["metadata"]
    if not (service.get("spec") or {}).get("selector"):
        return None
    mine = selected(service, pods)
    endpoints = []
    for pod in mine:
        ready = is_ready(pod)
        ep: Obj = {"addresses": [pod["status"]["podIP"]],
                   "conditions": {"ready": ready, "serving": ready, "terminating": False},
                   "targetRef": {"kind": "Pod", "name": pod["metadata"]["name"],
                                 "namespace": pod["metadata"].get("namespace", "default"),
                                 "uid": pod["metadata"].get("uid", "")}}
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            ep["nodeName"] = node
        endpoints.append(ep)
    ports = [{"name": p.get("name", ""), "port": _target_port(p, mine), "protocol": p.get("protocol", "TCP")}
             for p in (service.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
    owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"], "uid": meta.get("uid", ""),
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": slice_name(service), "namespace": meta.get("namespace", "default"),
                         "labels": {SERVICE_NAME_LABEL: meta["name"], MANAGED_BY_LABEL: CONTROLLER},
                         "ownerReferences": [owner]},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


def same_content(a: Obj, b: Obj) -> bool:
    return all(a.get(k) == b.get(k) for k in ("addressType", "endpoints", "ports")) and \
        (a["metadata"].get("labels") or {}) == (b["metadata"].get("labels") or {})


def managed(obj: Obj) -> bool:
    return (obj["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == CONTROLLER
