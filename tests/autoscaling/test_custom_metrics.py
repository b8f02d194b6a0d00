"""The autoscaling/v2 metric sources a Karmada FederatedHPA uses: validated as Kubernetes does, read
with the Prometheus adapter's series conventions, and turned into the HPA rule's observations."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from drods.autoscaling.custom_metrics import CustomMetricsReader, observe, query
from drods.model.autoscaling import FederatedHPASpec, MetricSpec
from drods.model.scaling import recommend
from drods.model.workload_usage import WorkloadUsage

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _spec(*metrics: dict[str, Any]) -> FederatedHPASpec:
    return FederatedHPASpec.model_validate({"scaleTargetRef": REF, "maxReplicas": 20, "metrics": list(metrics)})


PODS = {"type": "Pods", "pods": {"metric": {"name": "rps", "selector": {"matchExpressions": [
    {"key": "route", "operator": "In", "values": ["/a", "/b.c"]}, {"key": "canary", "operator": "DoesNotExist"}]}},
    "target": {"type": "AverageValue", "averageValue": "500m"}}}
EXTERNAL = {"type": "External", "external": {"metric": {"name": "queue_depth", "selector": {
    "matchLabels": {"queue": 'say "hi"'}}}, "target": {"type": "AverageValue", "averageValue": 30}}}
OBJECT = {"type": "Object", "object": {"describedObject": {"kind": "Ingress", "name": "main"},
                                       "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}}


def test_queries_follow_the_adapter_conventions() -> None:
    spec = _spec(PODS, EXTERNAL, OBJECT)
    assert query(spec.metrics[0], "shop", "Deployment", "web") == \
        'avg(rps{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+",route=~"/a|/b\\\\.c",canary=""})'
    assert query(spec.metrics[0], "shop", "StatefulSet", "db") .startswith('avg(rps{namespace="shop",pod=~"db-[0-9]+"')
    assert query(spec.metrics[1], "shop", "Deployment", "web") == 'sum(queue_depth{queue="say \\"hi\\""})'
    assert query(spec.metrics[2], "shop", "Deployment", "web") == 'sum(hits{namespace="shop",ingress="main"})'


@pytest.mark.parametrize(("metric", "error"), [
    ({"type": "Pods", "resource": {"name": "cpu", "target": {"averageUtilization": 50}}}, "a Pods metric needs pods"),
    ({**PODS, "external": EXTERNAL["external"]}, "sets only pods"),
    ({"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "Value", "value": "1"}}},
     "target is AverageValue"),
    ({"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "lots"}}},
     "not a Kubernetes quantity"),
    ({"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value"}}}, "needs value"),
    ({"type": "External", "external": {"metric": {"name": "q{x=1}"}, "target": {"type": "Value", "value": 1}}},
     "should match pattern"),
    ({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Value", "value": "1"}}},
     "Utilization or AverageValue"),
    ({"type": "ContainerResource", "containerResource": {}}, "Input should be"),
])
def test_bad_metrics_are_refused_with_the_reason(metric: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        MetricSpec.model_validate(metric)


def test_readings_become_the_hpa_rules_observations() -> None:
    spec = _spec(PODS, EXTERNAL, OBJECT)
    seen = observe(spec, {0: 1.5, 1: 240.0, 2: "no series answer sum(hits…)"}, base=4)
    # Pods: the average against 0.5; External AverageValue: the total over the 4 pods against 30
    assert seen.observations == [(1.5, 0.5), (60.0, 30.0)]
    assert recommend(4, seen.observations) == 12  # ceil(4 × 1.5 / 0.5), the larger proposal
    assert seen.current[0] == {"type": "Pods", "pods": {"metric": spec.metrics[0].pods.metric.model_dump(  # type: ignore[union-attr]
        exclude_none=True), "current": {"averageValue": "1500m"}}}
    assert seen.current[1]["external"]["current"] == {"averageValue": "60"}
    assert seen.unavailable == {"Object metric hits": "no series answer sum(hits…)"}


def test_a_resource_metric_with_an_average_value_target() -> None:
    m = MetricSpec.model_validate({"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "AverageValue", "averageValue": "250m"}}})
    usage = WorkloadUsage(used={"cpu": 1.5, "memory": 0.0}, requested={"cpu": 3.0, "memory": 1.0}, pods=3,
                          ready_pods=3)
    assert m.resource is not None
    assert usage.observe(m.resource) == (0.5, 0.25, {"averageValue": "500m"})
    assert WorkloadUsage(pods=2).observe(m.resource) is None  # unmeasured: no observation


async def test_without_a_prometheus_the_metrics_are_unavailable() -> None:
    got = await CustomMetricsReader(None).read(_spec(PODS, {"type": "Resource", "resource": {
        "name": "cpu", "target": {"averageUtilization": 50}}}), "shop", 0.0)
    assert list(got) == [0] and "no Prometheus configured" in str(got[0])
