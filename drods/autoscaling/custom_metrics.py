"""A FederatedHPA's ``Pods``, ``Object`` and ``External`` metrics, read from Prometheus (SPEC F5).

Karmada reads these through each member's custom and external metrics APIs; DRO-DS reads them from
the Prometheus that scrapes the members (``autoscaling.customMetrics.prometheusUrl``, by default the
feedback one), with the series conventions of the Prometheus adapter:

* ``Pods`` — ``avg(NAME{namespace="NS", pod=~"<the workload's pods>", <selector>})``: the average
  over the workload's pods in every member. Pods are matched by the names their controller gives
  them (a Deployment's ``NAME-<hash>-<id>``, a StatefulSet's ``NAME-<ordinal>``, any other kind's
  ``NAME-…``); the metric's ``selector`` narrows the series further.
* ``Object`` — ``sum(NAME{namespace="NS", <kind in lower case>="<object name>", <selector>})``.
* ``External`` — ``sum(NAME{<selector>})``.

The HPA rule then reads them as Kubernetes does: ``AverageValue`` and ``Value`` targets compare the
number with the target and scale the ready pods by the ratio; an ``AverageValue`` of an Object or
External metric is the total divided by the pods. A metric without a Prometheus, without series or
with an error is named in ``MetricsUnavailable`` and takes no part in the decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from drods.autoscaling.promql_feedback import one_number
from drods.model.autoscaling import FederatedHPASpec, MetricSelector, MetricSpec, MetricTarget
from drods.monitor.series import PrometheusError, prometheus_api

Obj = dict[str, Any]

POD_NAMES = {"Deployment": "{name}-[a-z0-9]+-[a-z0-9]+", "StatefulSet": "{name}-[0-9]+"}


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _regex(values: list[str]) -> str:
    return "|".join(v.replace(".", "\\.") for v in values)


def matchers(selector: MetricSelector | None) -> list[str]:
    """A metric selector as PromQL label matchers."""
    if selector is None:
        return []
    out = [f"{k}={_quote(v)}" for k, v in sorted(selector.matchLabels.items())]
    for e in selector.matchExpressions:
        out.append({"In": f"{e.key}=~{_quote(_regex(e.values))}", "NotIn": f"{e.key}!~{_quote(_regex(e.values))}",
                    "Exists": f'{e.key}!=""', "DoesNotExist": f'{e.key}=""'}[e.operator])
    return out


def query(metric: MetricSpec, namespace: str, kind: str, name: str) -> str:
    """The PromQL instant query a Pods, Object or External metric is read with."""
    if metric.pods is not None:
        pods = POD_NAMES.get(kind, "{name}-.+").format(name=name.replace(".", "\\."))
        labels = [f"namespace={_quote(namespace)}", f"pod=~{_quote(pods)}", *matchers(metric.pods.metric.selector)]
        return f"avg({metric.pods.metric.name}{{{','.join(labels)}}})"
    if metric.object is not None:
        obj = metric.object.describedObject
        labels = [f"namespace={_quote(namespace)}", f"{obj.kind.lower()}={_quote(obj.name)}",
                  *matchers(metric.object.metric.selector)]
        return f"sum({metric.object.metric.name}{{{','.join(labels)}}})"
    assert metric.external is not None
    return f"sum({metric.external.metric.name}{{{','.join(matchers(metric.external.metric.selector))}}})"


def _quantity(value: float) -> str:
    """A number as Kubernetes writes a quantity (milli-units when not whole)."""
    return str(round(value)) if abs(value - round(value)) < 1e-9 else f"{round(value * 1000)}m"


@dataclass(slots=True)
class CustomObservations:
    """What the HPA rule reads from the custom metrics: ``(value, target)`` pairs over ``base`` pods,
    their ``currentMetrics`` entries, and the metrics that gave nothing (name → why)."""

    observations: list[tuple[float, float]] = field(default_factory=list)
    current: list[Obj] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)


def observe(spec: FederatedHPASpec, readings: dict[int, float | str], base: int) -> CustomObservations:
    """The custom metrics' readings (metric index → number, or why none) as HPA observations."""
    out = CustomObservations()
    for i, m in enumerate(spec.metrics):
        source = m.pods or m.object or m.external
        if source is None or i not in readings:
            continue
        got, ident = readings[i], source.metric
        if isinstance(got, str):
            out.unavailable[f"{m.type} metric {ident.name}"] = got
            continue
        target: MetricTarget = source.target
        total_over_pods = m.type != "Pods" and target.type == "AverageValue"
        value = got / max(base, 1) if total_over_pods else got
        out.observations.append((value, target.amount()))
        current = {"averageValue" if target.type == "AverageValue" else "value": _quantity(value)}
        entry: Obj = {"metric": ident.model_dump(exclude_none=True), "current": current}
        if m.object is not None:
            entry["describedObject"] = m.object.describedObject.model_dump(exclude_none=True)
        out.current.append({"type": m.type, m.type.lower(): entry})
    return out


class CustomMetricsReader:
    def __init__(self, base_url: str | None, *, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.timeout = timeout

    async def read(self, spec: FederatedHPASpec, namespace: str, at: float) -> dict[int, float | str]:
        """Each Pods/Object/External metric's number at ``at`` (by index in ``spec.metrics``), or why none."""
        wanted = [(i, m) for i, m in enumerate(spec.metrics) if m.type != "Resource"]
        if not wanted:
            return {}
        if self.base_url is None:
            return dict.fromkeys((i for i, _ in wanted), "no Prometheus configured "
                                 "(autoscaling.customMetrics.prometheusUrl)")
        ref = spec.scaleTargetRef
        out: dict[int, float | str] = {}
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for i, m in wanted:
                q = query(m, namespace, ref.kind, ref.name)
                try:
                    params = {"query": q, "time": f"{at:.3f}"}
                    body = await prometheus_api(client, self.base_url, "/api/v1/query", params)
                    value = one_number(body, q)
                except PrometheusError as e:
                    out[i] = str(e).splitlines()[0][:300]
                    continue
                out[i] = f"no series answer {q}" if value is None else value
        return out
