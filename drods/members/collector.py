"""A member's resource summary (read through the Kubernetes API) as a monitoring report (F5, S2).

`report_from_summary` turns a `ClusterSummary` into the same `MetricsReport` an agent pushes, so it
goes through monitoring's one pipeline (normalisation, rate control, thresholds, history) with
``source="kubernetes"``. The mapping keeps the water level identical to the summary's:

* ``cpuCapacity`` = allocatable cores and ``cpuUsage`` = max(used, allocated) / allocatable in %;
* ``memoryCapacity`` = allocatable GiB and ``memoryAvailable`` = allocatable − max(used, allocated);
* GPUs the same way from allocated devices; ``pods`` = bound, non-terminal pods;
* ``largestNodeFree`` as is, and the allocation extras the scheduler view documents
  (``cpuAllocatable``/``cpuAllocated``/``memoryAllocatable``/``memoryAllocated``/``gpuAllocatable``/
  ``gpuAllocated``/``podsCapacity``, ``gpuByModel`` from the nodes' ``nvidia.com/gpu.product``
  label), plus inventory extras (nodes, version, topology);
* ``cpuUsed`` (cores) / ``memoryUsed`` (GiB): what metrics.k8s.io measured, only when the member
  serves it — ``cpuUsage`` folds requests in (for the water level), an autoscaler needs the use;
* ``networkIn`` / ``networkOut`` (Mbps): what the kubelets' network counters measured between two
  readings, only when measured (absent, never 0, when unknown).

`KubernetesCollector` is the pull-collector form (``drods.monitor.collectors``) for processes that
want monitoring to pull members on its own schedule; the cluster health controller instead feeds
the summary it reads with every probe, so a push-mode cluster is not read twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from drods.members.client import MemberClient
from drods.members.summary import ClusterSummary
from drods.model.member_status import NodeFree, Resource, zero_if_absent


def _pct(part: float, total: float) -> float:
    return round(min(max(part / total, 0.0), 1.0) * 100.0, 4) if total > 0 else 0.0


def report_from_summary(cluster: str, summary: ClusterSummary, now: float | None = None) -> dict[str, Any]:
    """The report body (``MetricsReport`` fields and documented extras) for ``cluster``."""
    st = summary.member_status
    cpu, mem, gpu = (r or Resource() for r in (st.cpu, st.memory, st.gpu))
    cpu_alloc, mem_alloc, gpu_alloc = (zero_if_absent(r.allocatable) for r in (cpu, mem, gpu))
    ts = datetime.fromtimestamp(now, UTC) if now is not None else datetime.now(UTC)
    report: dict[str, Any] = {
        "cluster": cluster,
        "timestamp": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "cpuCapacity": cpu.allocatable,
        "cpuUsage": _pct(cpu.busy, cpu_alloc),
        "memoryCapacity": mem.allocatable,
        "memoryAvailable": round(max(mem_alloc - mem.busy, 0.0), 6),
        "pods": int(zero_if_absent(st.pods_used)),
        "largestNodeFree": (st.largest_node_free or NodeFree()).to_doc(),
        "cpuAllocatable": cpu.allocatable,
        "cpuAllocated": cpu.allocated,
        "memoryAllocatable": mem.allocatable,
        "memoryAllocated": mem.allocated,
        "podsCapacity": st.pods_capacity,
        "nodes": summary.node_count,
        "readyNodes": summary.ready_nodes,
        "pendingPods": summary.pending_pods,
        "kubernetesVersion": summary.kubernetes_version,
        "topology": summary.topology(),
    }
    if st.network_in_mbps is not None:  # measured from the kubelets' counters; unknown stays absent
        report["networkIn"] = st.network_in_mbps
    if st.network_out_mbps is not None:
        report["networkOut"] = st.network_out_mbps
    for res, extra in ((cpu, "cpuUsed"), (mem, "memoryUsed")):
        if res.measured is not None:
            report[extra] = res.measured
    if gpu_alloc > 0:
        report.update(gpuCapacity=gpu.allocatable, gpuUsage=_pct(zero_if_absent(gpu.allocated), gpu_alloc),
                      gpuAllocatable=gpu.allocatable, gpuAllocated=gpu.allocated)
    if summary.gpu_models:
        report["gpuModels"] = summary.gpu_models
    if summary.gpu_by_model:
        report["gpuByModel"] = summary.gpu_by_model
    return report


class KubernetesCollector:
    """Pull collector for push-mode clusters DRO-DS holds a `MemberClient` for."""

    source = "kubernetes"

    def __init__(self, client_for: Callable[[str], Awaitable[MemberClient | None]]) -> None:
        self.client_for = client_for

    def handles(self, cluster: Any) -> bool:
        spec = getattr(cluster, "spec", {}) or {}
        return spec.get("syncMode", "Push") != "Pull"

    async def collect(self, cluster: Any) -> dict[str, Any] | None:
        client = await self.client_for(cluster.name)
        if client is None:
            return None
        return report_from_summary(cluster.name, await client.summary())

    async def aclose(self) -> None:
        return None
