"""First-fit pod placement by requests, with the kube-scheduler's basic filters (ready, cordoned,
node selector / required node affinity, taints, pod count) and its way of explaining a miss."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drods.model.selector import requirement_matches
from drods.sim.resources import Resources, is_terminal, node_allocatable, node_ready, pod_requests

Obj = dict[str, Any]


@dataclass
class NodeRoom:
    name: str
    node: Obj
    free: Resources
    pods_free: int


def rooms(nodes: list[Obj], pods: list[Obj],
          requests: Callable[[Obj], Resources] = pod_requests) -> dict[str, NodeRoom]:
    """Free room per node: allocatable minus the requests of the non-terminal pods bound to it
    (``requests``: a pod's, as `pod_requests` reads them, or a memo of it)."""
    out: dict[str, NodeRoom] = {}
    for n in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        alloc, max_pods = node_allocatable(n)
        out[n["metadata"]["name"]] = NodeRoom(n["metadata"]["name"], n, alloc, max_pods)
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node in out and not is_terminal(p):
            room = out[node]
            room.free = room.free - requests(p)
            room.pods_free -= 1
    return out


def _expr_matches(expr: Obj, labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", "In"), expr.get("values") or []
    if op in ("In", "NotIn", "Exists", "DoesNotExist"):
        return requirement_matches(labels, key, op, values)
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def selector_matches(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms:  # terms are ORed, expressions within a term ANDed
        return any(all(_expr_matches(e, labels) for e in t.get("matchExpressions") or []) for t in terms)
    return True


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def taints_tolerated(pod: Obj, node: Obj) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def place(pod: Obj, room: dict[str, NodeRoom]) -> tuple[str | None, str]:
    """The first node that fits (its room is taken), or None and the scheduler-style reason."""
    req = pod_requests(pod)
    reasons: Counter[str] = Counter()
    for r in room.values():
        node = r.node
        if not node_ready(node):
            reasons["node(s) were not ready"] += 1
        elif (node.get("spec") or {}).get("unschedulable"):
            reasons["node(s) were unschedulable"] += 1
        elif not selector_matches(pod, node):
            reasons["node(s) didn't match Pod's node affinity/selector"] += 1
        elif not taints_tolerated(pod, node):
            reasons["node(s) had untolerated taint(s)"] += 1
        elif r.pods_free <= 0:
            reasons["Too many pods"] += 1
        elif not req.fits_in(r.free):
            for name in req.short_of(r.free):
                reasons[f"Insufficient {name}"] += 1
        else:
            r.free = r.free - req
            r.pods_free -= 1
            return r.name, ""
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    return None, f"0/{len(room)} nodes are available: {detail}." if detail else "no nodes available to schedule pods"
