"""A workload's measured use in one member cluster, and summed over its clusters (F5).

One document shape, written by whoever reads the member (the work-status controller for push
members, ``drods agent`` for pull members) on the Work's manifest status, rolled up into
``Binding.status.clusters[].usage`` and ``status.usage`` and read by the FederatedHPA:

``{"cpu": {"used": "950m", "requested": "1"}, "memory": {"used": "200Mi", "requested": "256Mi"},
"pods": 3, "readyPods": 3, "observedTime": "…"}`` — Kubernetes quantities. ``used`` and
``requested`` are summed over the workload's *ready* pods that metrics.k8s.io reports (what
Karmada's and Kubernetes' HPA divide); ``pods`` / ``readyPods`` count all its non-terminal pods.
When the member's metrics API is missing or failing, ``used`` is absent (never 0) and
``metricsUnavailable`` says why; ``requested`` is then absent too, as nothing was measured against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.model.autoscaling import ResourceMetricSource
from drods.model.quantity import format_cpu, format_memory, quantity

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory")
MIB = 1024**2


def _fmt(resource: str, value: float) -> str:
    """Millicores and whole mebibytes: a report changes when the use does, not with a byte of noise."""
    return format_cpu(value) if resource == "cpu" else format_memory(round(value / MIB) * MIB)


@dataclass(slots=True)
class WorkloadUsage:
    """Cores and bytes of a workload's ready, measured pods (see the module docstring)."""

    used: dict[str, float] | None = None  # None: not measured
    requested: dict[str, float] | None = None
    pods: int = 0
    ready_pods: int = 0
    unavailable: list[str] = field(default_factory=list)  # why (or which clusters) metrics are missing

    @property
    def measured(self) -> bool:
        return self.used is not None

    def to_doc(self, observed_time: str | None = None) -> Obj:
        doc: Obj = {"pods": self.pods, "readyPods": self.ready_pods}
        if self.used is not None and self.requested is not None:
            for r in RESOURCES:
                doc[r] = {"used": _fmt(r, self.used[r]), "requested": _fmt(r, self.requested[r])}
        if self.unavailable:
            doc["metricsUnavailable"] = "; ".join(self.unavailable)
        if observed_time:
            doc["observedTime"] = observed_time
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any] | None) -> WorkloadUsage | None:
        """The usage a document states; None when there is no (well-formed) document."""
        if not isinstance(doc, Mapping):
            return None
        out = cls(pods=int(doc.get("pods") or 0), ready_pods=int(doc.get("readyPods") or 0))
        if all(isinstance(doc.get(r), Mapping) for r in RESOURCES):
            try:
                out.used = {r: float(quantity(doc[r].get("used"))) for r in RESOURCES}
                out.requested = {r: float(quantity(doc[r].get("requested"))) for r in RESOURCES}
            except (ValueError, ArithmeticError):
                out.used = out.requested = None
        if doc.get("metricsUnavailable"):
            out.unavailable = [str(doc["metricsUnavailable"])]
        return out

    def utilisation(self, resource: str) -> float | None:
        """Used ÷ requested in % — None when unmeasured or nothing is requested."""
        if self.used is None or self.requested is None or self.requested.get(resource, 0.0) <= 0:
            return None
        return 100.0 * self.used[resource] / self.requested[resource]


    def average(self, resource: str) -> float | None:
        """Use per ready pod (cores, bytes) — None when unmeasured or no pod is ready."""
        if self.used is None or self.ready_pods <= 0:
            return None
        return self.used[resource] / self.ready_pods

    def observe(self, metric: ResourceMetricSource) -> tuple[float, float, Obj] | None:
        """A Resource metric as the HPA rule reads it: (value, target, its ``currentMetrics`` entry) —
        utilisation in % against ``averageUtilization``, or use per pod against ``averageValue``."""
        name, target = metric.name, metric.target
        if target.type == "Utilization":
            value = self.utilisation(name)
            if value is None or target.averageUtilization is None:
                return None
            # as the HPA writes it: an int32 percentage (a typed client fails on 59.96) and the use per pod
            current: Obj = {"averageUtilization": int(value)}
            if (per_pod := self.average(name)) is not None:
                current["averageValue"] = _fmt(name, per_pod)
            return value, float(target.averageUtilization), current
        value = self.average(name)
        if value is None:
            return None
        return value, target.amount(), {"averageValue": _fmt(name, value)}


def total(per_cluster: Mapping[str, WorkloadUsage]) -> WorkloadUsage:
    """The sum over clusters: measured parts add up, clusters without metrics are named."""
    out = WorkloadUsage()
    for cluster, u in sorted(per_cluster.items()):
        out.pods += u.pods
        out.ready_pods += u.ready_pods
        if u.used is None or u.requested is None:
            if u.pods or u.unavailable:  # pods there, unmeasured (none there: nothing to measure)
                out.unavailable.append(cluster)
            continue
        if out.used is None or out.requested is None:
            out.used, out.requested = dict.fromkeys(RESOURCES, 0.0), dict.fromkeys(RESOURCES, 0.0)
        for r in RESOURCES:
            out.used[r] += u.used[r]
            out.requested[r] += u.requested[r]
    return out


def summed_doc(entries: Iterable[Mapping[str, Any]]) -> Obj | None:
    """``status.usage`` from ``status.clusters[]`` entries; None when no entry carries usage."""
    per = {str(e.get("cluster")): u for e in entries if (u := WorkloadUsage.from_doc(e.get("usage"))) is not None}
    if not per:
        return None
    doc = total(per).to_doc()
    if "metricsUnavailable" in doc:
        doc["metricsUnavailable"] = sorted(c for c, u in per.items() if not u.measured and (u.pods or u.unavailable))
    return doc
