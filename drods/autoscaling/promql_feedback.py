"""Application feedback read from Prometheus (SPEC H3): the PromQL form of ``PUT /api/v1/feedback``.

A FederatedHPA's ``spec.feedback.promql`` names an instant query per measure (``latencyP99Ms``,
``throughput``, ``errorRate``). The autoscaler evaluates them against
``autoscaling.feedback.prometheusUrl`` at the time of each decision, and the answers drive the same
PI loop (`drods.autoscaling.feedback`) a pushed report does. Each query must answer one number:
a scalar, or a vector of exactly one series — several series are an error (the query should
aggregate: ``max(…)``, ``histogram_quantile(0.99, sum by (le) (…))``), an empty vector is "no
measurement" for that measure.
"""

from __future__ import annotations

import math

import httpx

from drods.autoscaling.feedback import Observation
from drods.model.autoscaling import FeedbackQueries
from drods.monitor.series import PrometheusError, prometheus_api


def one_number(body: dict[str, object], query: str) -> float | None:
    data = body.get("data")
    if not isinstance(data, dict):
        raise PrometheusError(f"no data for {query!r}")
    result = data.get("result")
    if data.get("resultType") == "scalar" and isinstance(result, list) and len(result) == 2:
        value = float(result[1])
    elif data.get("resultType") == "vector" and isinstance(result, list):
        if not result:
            return None
        if len(result) > 1:
            raise PrometheusError(f"{query!r} answered {len(result)} series; aggregate it to one")
        value = float(result[0]["value"][1])
    else:
        raise PrometheusError(f"{query!r} answered a {data.get('resultType')}, not one number")
    return value if math.isfinite(value) else None


class PromQLFeedback:
    def __init__(self, base_url: str, *, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    async def observe(self, queries: FeedbackQueries, at: float) -> Observation:
        """Evaluate the queries at ``at``; raises `PrometheusError` (unreachable, refused, not one number)."""
        values: dict[str, float | None] = {}
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for name in ("latencyP99Ms", "throughput", "errorRate"):
                q = getattr(queries, name)
                if q is None:
                    values[name] = None
                    continue
                body = await prometheus_api(client, self.base_url, "/api/v1/query", {"query": q, "time": f"{at:.3f}"})
                values[name] = one_number(body, q)
        if all(v is None for v in values.values()):
            raise PrometheusError("no query answered a value (no samples yet?)")
        return Observation(values["latencyP99Ms"], values["throughput"], values["errorRate"], at)
