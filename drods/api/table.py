"""Server-side printing (``as=Table``) so ``kubectl get`` shows useful columns for our kinds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from drods.model.kinds import Kind

Column = tuple[str, str, str]  # name, type, JSON path within the object (dotted)

_COLUMNS: dict[str, list[Column]] = {
    "Cluster": [("Mode", "string", "spec.syncMode"), ("Region", "string", "spec.region"),
                ("Provider", "string", "spec.provider"), ("City", "string", "spec.city"),
                ("Ready", "string", "status.ready"), ("Version", "string", "status.kubernetesVersion"),
                ("Nodes", "string", "=nodes"), ("CPU(alloc/used)", "string", "=cpu"),
                ("Water", "string", "=water"), ("Heartbeat", "string", "=heartbeat")],
    "Binding": [("Replicas", "integer", "spec.replicas"), ("Phase", "string", "status.phase"),
                ("Clusters", "string", "=placement")],
    "Deployment": [("Ready", "string", "=ready"), ("Up-to-date", "integer", "status.updatedReplicas"),
                   ("Available", "integer", "status.availableReplicas"), ("Clusters", "string", "=clusters")],
}


# What a column shows when the field was left unset (the model's default is not stored).
_DEFAULTS: dict[tuple[str, str], Any] = {("Cluster", "spec.syncMode"): "Push"}


def wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def _get(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _age(created: str | None) -> str:
    if not created:
        return "<unknown>"
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    secs = int((datetime.now(UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"


def _ready(obj: dict[str, Any]) -> str:
    for cond in _get(obj, "status.conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return "Unknown"


def _computed(obj: dict[str, Any], name: str) -> Any:
    """Cells made of several fields (names start with ``=`` in `_COLUMNS`)."""
    if name == "=nodes":
        ns = _get(obj, "status.nodeSummary") or {}
        return f"{ns.get('readyNum', 0)}/{ns.get('totalNum', 0)}" if ns else None
    if name == "=cpu":
        cpu = _get(obj, "status.resourceSummary.cpu") or {}
        return f"{cpu.get('allocated', 0):g}/{cpu.get('used', 0):g} of {cpu.get('allocatable', 0):g}" if cpu else None
    if name == "=water":
        wl = _get(obj, "status.resourceSummary.waterLevel")
        return f"{wl:.0%}" if isinstance(wl, int | float) else None
    if name == "=heartbeat":
        for cond in _get(obj, "status.conditions") or []:
            if cond.get("type") == "Ready" and cond.get("lastHeartbeatTime"):
                return _age(cond["lastHeartbeatTime"])
        return None
    if name == "=ready":
        return f"{_get(obj, 'status.readyReplicas') or 0}/{_get(obj, 'spec.replicas') or 0}"
    if name in ("=clusters", "=placement"):
        rows = _get(obj, "status.clusters" if name == "=clusters" else "status.placement") or []
        return ",".join(f"{r.get('cluster')}:{r.get('replicas', 0)}" for r in rows if isinstance(r, dict)) or None
    return None


def to_table(kind: Kind, items: list[dict[str, Any]], revision: int) -> dict[str, Any]:
    extra = _COLUMNS.get(kind.kind, [])
    columns = [{"name": "Name", "type": "string", "format": "name", "description": "name", "priority": 0}]
    columns += [{"name": n, "type": t, "format": "", "description": p, "priority": 0} for n, t, p in extra]
    columns.append({"name": "Age", "type": "string", "format": "", "description": "age", "priority": 0})
    rows = []
    for obj in items:
        meta = obj["metadata"]
        cells: list[Any] = [meta["name"]]
        for _, _, path in extra:
            value = _ready(obj) if path == "status.ready" else _computed(obj, path) if path.startswith("=") \
                else _get(obj, path)
            if value is None:
                value = _DEFAULTS.get((kind.kind, path))
            cells.append("" if value is None else value)
        cells.append(_age(meta.get("creationTimestamp")))
        rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata",
                                                "apiVersion": "meta.k8s.io/v1", "metadata": meta}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": str(revision)},
            "columnDefinitions": columns, "rows": rows}
