"""Pull current values from a cluster's Prometheus (``spec.prometheus``) with PromQL templates.

Templates are keyed by `MetricsReport` field (agent vocabulary), so a pulled report is shaped
exactly like a pushed one and takes the same path. ``$cluster`` is replaced by the escaped cluster
name and ``$window`` by the rate window. The defaults expect node-exporter and kube-state-metrics
series carrying a ``cluster`` label (as a federating Prometheus, Thanos or a per-cluster
Prometheus with ``external_labels`` / target labels gives them); override any of them with
``monitoring.promql`` in the configuration file. A template must aggregate to one series; an empty
answer just leaves the field out (partial reports are fine), and values are clamped into what a report may contain.
"""

from __future__ import annotations

import asyncio
import math
import string
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import MetricsReport, Source
from drods.monitor.series import PrometheusError

GIB = "1073741824"
_CPU_IDLE = 'node_cpu_seconds_total{mode="idle",cluster="$cluster"}'
_ALLOC = 'kube_node_status_allocatable{cluster="$cluster",resource="%s"}'
_REQ = 'kube_pod_container_resource_requests{cluster="$cluster",resource="%s"}'

#: Report field → PromQL. Dotted names fill nested fields (``largestNodeFree.cpu``).
DEFAULT_COLLECT_PROMQL: dict[str, str] = {
    "cpuCapacity": f"count({_CPU_IDLE})",
    "cpuUsage": f"100 * (1 - avg(rate({_CPU_IDLE}[$window])))",
    "memoryCapacity": f'sum(node_memory_MemTotal_bytes{{cluster="$cluster"}}) / {GIB}',
    "memoryAvailable": f'sum(node_memory_MemAvailable_bytes{{cluster="$cluster"}}) / {GIB}',
    "storageCapacity": f'sum(node_filesystem_size_bytes{{cluster="$cluster",mountpoint="/"}}) / {GIB}',
    "storageAvailable": f'sum(node_filesystem_avail_bytes{{cluster="$cluster",mountpoint="/"}}) / {GIB}',
    "networkIn": 'sum(rate(node_network_receive_bytes_total{cluster="$cluster",device!="lo"}[$window])) * 8 / 1e6',
    "networkOut": 'sum(rate(node_network_transmit_bytes_total{cluster="$cluster",device!="lo"}[$window])) * 8 / 1e6',
    "pods": 'sum(kube_pod_status_phase{cluster="$cluster",phase="Running"})',
    "podsCapacity": f"sum({_ALLOC % 'pods'})",
    "cpuAllocatable": f"sum({_ALLOC % 'cpu'})",
    "cpuAllocated": f"sum({_REQ % 'cpu'})",
    "memoryAllocatable": f"sum({_ALLOC % 'memory'}) / {GIB}",
    "memoryAllocated": f"sum({_REQ % 'memory'}) / {GIB}",
    "gpuCapacity": 'count(DCGM_FI_DEV_GPU_UTIL{cluster="$cluster"})',
    "gpuUsage": 'avg(DCGM_FI_DEV_GPU_UTIL{cluster="$cluster"})',
    "largestNodeFree.cpu": f"max(sum by (node) ({_ALLOC % 'cpu'}) - sum by (node) ({_REQ % 'cpu'}))",
    "largestNodeFree.memory": f"max(sum by (node) ({_ALLOC % 'memory'}) - sum by (node) ({_REQ % 'memory'})) / {GIB}",
}

_PERCENT = ("cpuUsage", "gpuUsage")
_AVAILABLE = (("memoryAvailable", "memoryCapacity"), ("storageAvailable", "storageCapacity"))


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PrometheusCollector:
    source: Source = "prometheus"

    def __init__(self, templates: Mapping[str, str] | None = None, *, window: str = "2m",
                 client: httpx.AsyncClient | None = None, timeout_s: float = 10.0,
                 clock: Callable[[], float] | None = None) -> None:
        self.templates = dict(DEFAULT_COLLECT_PROMQL if templates is None else templates)
        self.window = window
        self._own = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self._clock = clock

    def handles(self, cluster: ClusterInfo) -> bool:
        return bool(cluster.prometheus)

    def promql(self, field: str, cluster: str) -> str:
        return string.Template(self.templates[field]).safe_substitute(cluster=_escape(cluster), window=self.window)

    async def instant(self, base_url: str, query: str) -> float | None:
        """Value of a one-series instant query (None: no series or not a number)."""
        try:
            resp = await self._client.get(f"{base_url.rstrip('/')}/api/v1/query", params={"query": query})
            body = resp.json()
        except (httpx.HTTPError, ValueError) as e:
            raise PrometheusError(f"prometheus at {base_url} unreachable or not answering JSON: {e}") from e
        if resp.status_code != 200 or body.get("status") != "success":
            raise PrometheusError(f"prometheus error ({resp.status_code}): {body.get('error', body)}")
        data = body.get("data") or {}
        result = data.get("result")
        if data.get("resultType") == "scalar":
            result = [{"value": result}]
        if not result:
            return None
        if len(result) > 1:
            raise PrometheusError(f"query returned {len(result)} series; it must aggregate to one: {query}")
        v = float(result[0]["value"][1])
        return v if math.isfinite(v) else None

    async def collect(self, cluster: ClusterInfo) -> MetricsReport | None:
        url = cluster.prometheus
        if not url:
            return None
        fields = list(self.templates)
        values = await asyncio.gather(*(self.instant(url, self.promql(f, cluster.name)) for f in fields),
                                      return_exceptions=True)
        got: dict[str, float] = {}
        errors = []
        for f, v in zip(fields, values, strict=True):
            if isinstance(v, BaseException):
                errors.append(f"{f}: {v}")
            elif v is not None:
                got[f] = v
        if not got:
            if errors:
                raise PrometheusError("; ".join(errors[:3]))
            return None
        return MetricsReport.model_validate(self.shape(cluster.name, got))

    def shape(self, cluster: str, got: Mapping[str, float]) -> dict[str, Any]:
        """Flat query results → a report body, clamped into what validation accepts."""
        now = self._clock() if self._clock is not None else datetime.now(UTC).timestamp()
        body: dict[str, Any] = {"cluster": cluster, "timestamp": datetime.fromtimestamp(now, UTC).isoformat()}
        for f, v in got.items():
            v = max(v, 0.0)
            if f in _PERCENT:
                v = min(v, 100.0)
            if f == "pods" or f == "podsCapacity":
                v = float(round(v))
            head, _, tail = f.partition(".")
            if tail:
                body.setdefault(head, {})[tail] = v
            else:
                body[f] = int(v) if f == "pods" else v
        for avail, cap in _AVAILABLE:
            if avail in body and cap in body:
                body[avail] = min(body[avail], body[cap])
            elif avail in body:
                del body[avail]  # "available" without a capacity means nothing
        lnf = body.get("largestNodeFree")
        if isinstance(lnf, dict):
            for part, cap in (("cpu", "cpuCapacity"), ("memory", "memoryCapacity"), ("gpu", "gpuCapacity")):
                if part in lnf and cap in body:
                    lnf[part] = min(lnf[part], body[cap])
        return body

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()
