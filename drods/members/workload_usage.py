"""Per-workload use read from a member: its pods (the workload's own selector, in its
member namespace) joined with metrics.k8s.io PodMetrics.

Collection cost is bounded by namespaces, not workloads: `collect` lists pods and PodMetrics once per
namespace that holds tracked workloads, and `measure` matches every workload's selector against that
one listing. The document shape is `drods.model.workload_usage`.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from drods.members.client import MemberClient, MemberError, MemberUnavailable
from drods.members.summary import TERMINAL, pod_requests
from drods.model.quantity import quantity
from drods.model.selector import LabelSelector
from drods.model.workload_usage import RESOURCES, WorkloadUsage

Obj = dict[str, Any]
WorkloadKey = tuple[str, str, str]  # (namespace, kind, name)
# Kinds whose pods are theirs to measure (they select them with ``spec.selector``).
USAGE_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})
NO_METRICS_API = "the cluster serves no metrics.k8s.io API"


def selector_of(workload: Obj) -> LabelSelector | None:
    """The workload's pod selector (``spec.selector``); None when it has none or an invalid one."""
    raw = (workload.get("spec") or {}).get("selector")
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        return LabelSelector.model_validate(raw)
    except ValidationError:
        return None


def pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _metrics_by_pod(items: Iterable[Obj]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for m in items:
        name = str((m.get("metadata") or {}).get("name"))
        used = dict.fromkeys(RESOURCES, 0.0)
        for c in m.get("containers") or []:
            for r in RESOURCES:
                used[r] += float(quantity((c.get("usage") or {}).get(r)))
        out[name] = used
    return out


class _PodIndex:
    """A namespace's live pods indexed by label, so matching N workloads' selectors against M pods
    costs about the pods each selects, not N × M."""

    def __init__(self, pods: list[Obj]) -> None:
        self.pods = pods
        self.labels = [(p.get("metadata") or {}).get("labels") or {} for p in pods]
        self.by_label: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, labels in enumerate(self.labels):
            for kv in labels.items():
                self.by_label[kv].append(i)

    def select(self, sel: LabelSelector) -> list[Obj]:
        candidates: Iterable[int] = range(len(self.pods))
        if sel.matchLabels:
            postings: list[list[int]] = [self.by_label.get(kv, []) for kv in sel.matchLabels.items()]
            candidates = sorted(postings, key=len)[0]
        return [self.pods[i] for i in candidates if sel.matches(self.labels[i])]


def _add_measured(u: WorkloadUsage, mine: list[Obj], metrics: dict[str, dict[str, float]]) -> None:
    """Σ use and Σ requests of the ready pods metrics.k8s.io reports; with none of them reported the
    use stays unmeasured (never a 0 for what was not measured)."""
    used, requested = dict.fromkeys(RESOURCES, 0.0), dict.fromkeys(RESOURCES, 0.0)
    counted = 0
    for p in mine:
        m = metrics.get(str((p.get("metadata") or {}).get("name")))
        if m is None or not pod_ready(p):
            continue  # unready or not yet measured: left out, as the HPA does
        req = pod_requests(p)
        used["cpu"] += m["cpu"]
        used["memory"] += m["memory"]
        requested["cpu"] += req.cpu
        requested["memory"] += req.memory
        counted += 1
    if counted:
        u.used, u.requested = used, requested
    elif mine:
        u.unavailable = ["no ready pod measured yet"]


def measure(workloads: Iterable[Obj], pods: list[Obj], pod_metrics: list[Obj] | None,
            unavailable: str | None = None) -> dict[WorkloadKey, WorkloadUsage]:
    """Each workload's usage from one namespace's pods and PodMetrics (``pod_metrics`` None: the
    metrics API did not answer, ``unavailable`` says why)."""
    metrics = _metrics_by_pod(pod_metrics) if pod_metrics is not None else None
    index = _PodIndex([p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL
                       and not (p.get("metadata") or {}).get("deletionTimestamp")])
    out: dict[WorkloadKey, WorkloadUsage] = {}
    for w in workloads:
        sel = selector_of(w)
        if sel is None:
            continue  # no pods of its own to measure
        mine = index.select(sel)
        u = WorkloadUsage(pods=len(mine), ready_pods=sum(pod_ready(p) for p in mine))
        if metrics is None:
            u.unavailable = [unavailable or "the metrics API did not answer"]
        else:
            _add_measured(u, mine, metrics)
        out[key_of(w)] = u
    return out


async def _namespace(client: MemberClient, namespace: str,
                     workloads: list[Obj]) -> dict[WorkloadKey, WorkloadUsage]:
    """One pods list and one PodMetrics list for ``namespace``; a failing metrics API is reported."""
    pods, metrics = await asyncio.gather(client.pods(namespace), client.pod_metrics(namespace),
                                         return_exceptions=True)
    if isinstance(pods, BaseException):
        raise pods
    if isinstance(metrics, MemberError | MemberUnavailable):
        return measure(workloads, pods, None, f"metrics.k8s.io failed: {metrics}"[:300])
    if isinstance(metrics, BaseException):
        raise metrics
    return measure(workloads, pods, metrics, None if metrics is not None else NO_METRICS_API)


async def collect(client: MemberClient, workloads: Iterable[Obj]) -> dict[WorkloadKey, WorkloadUsage]:
    """Usage of every workload given (member objects), namespace by namespace. Raises the member's
    error when its pods cannot be listed (nothing was measured)."""
    by_ns: dict[str, list[Obj]] = defaultdict(list)
    for w in workloads:
        by_ns[str((w.get("metadata") or {}).get("namespace") or "default")].append(w)
    out: dict[WorkloadKey, WorkloadUsage] = {}
    for ns, ws in sorted(by_ns.items()):
        out.update(await _namespace(client, ns, ws))
    return out


def key_of(obj: Obj) -> WorkloadKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(obj.get("kind")), str(meta.get("name"))


class UsageReader:
    """Reads usage at most every ``interval`` seconds and hands out the last reading in between.

    The reading after the first is due at a point of the interval of the member's own, then every
    interval: members that start together (a fleet joined at once, an agents process) would otherwise
    be read, and their usage written on every Work, all at once every interval."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.read_at: float | None = None
        self.due_at = 0.0
        self.docs: dict[WorkloadKey, Obj] = {}

    async def read(self, client: MemberClient, workloads: Iterable[Obj], now: float) -> dict[WorkloadKey, Obj]:
        """Usage documents by workload; on a member failure, the last reading (nothing new measured)."""
        if self.read_at is not None and self.read_at <= now < self.due_at:
            return self.docs
        try:
            measured = await collect(client, workloads)
        except (MemberUnavailable, MemberError):
            return self.docs
        first = self.read_at is None
        self.read_at, self.docs = now, {k: u.to_doc() for k, u in measured.items()}
        self.due_at = now + (random.uniform(0.0, self.interval) if first else self.interval)
        return self.docs
