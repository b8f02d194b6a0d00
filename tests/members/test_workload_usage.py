"""Per-workload usage from one namespace's pods and PodMetrics: the workload's own selector, ready
measured pods only, and no made-up 0 when the metrics API is missing."""

from __future__ import annotations

from typing import Any

import pytest

from drods.cli.top import workload_rows
from drods.members import workload_usage
from drods.members.workload_usage import UsageReader, measure
from drods.model.workload_usage import WorkloadUsage, summed_doc

Obj = dict[str, Any]


def _deploy(name: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": name}}}}


def _pod(name: str, app: str, cpu: str = "500m", ready: bool = True, phase: str = "Running") -> Obj:
    return {"metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {
                "cpu": cpu, "memory": "256Mi"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _metrics(name: str, cpu: str, memory: str = "128Mi") -> Obj:
    return {"metadata": {"name": name, "namespace": "shop"}, "containers": [{"name": "c", "usage": {
        "cpu": cpu, "memory": memory}}]}


PODS = [_pod("web-1", "web"), _pod("web-2", "web"), _pod("web-3", "web", ready=False),
        _pod("web-0", "web", phase="Succeeded"), _pod("db-1", "db", cpu="2")]
METRICS = [_metrics("web-1", "450m"), _metrics("web-2", "500000000n"), _metrics("web-3", "1"),
           _metrics("db-1", "100m")]


def test_each_workload_reads_its_own_ready_pods() -> None:
    got = measure([_deploy("web"), _deploy("db")], PODS, METRICS)
    web, db = got[("shop", "Deployment", "web")], got[("shop", "Deployment", "db")]
    assert (web.pods, web.ready_pods) == (3, 2)  # the Succeeded pod is not the workload's any more
    assert web.used is not None and web.requested is not None
    assert web.used["cpu"] == 0.95 and web.requested["cpu"] == 1.0  # the unready pod is left out
    assert web.utilisation("cpu") == 95.0 and db.utilisation("cpu") == 5.0
    doc = web.to_doc()
    assert doc == {"pods": 3, "readyPods": 2, "cpu": {"used": "950m", "requested": "1"},
                   "memory": {"used": "256Mi", "requested": "512Mi"}}


def test_no_metrics_api_is_reported_not_zero() -> None:
    got = measure([_deploy("web")], PODS, None, "the cluster serves no metrics.k8s.io API")
    doc = got[("shop", "Deployment", "web")].to_doc()
    assert "cpu" not in doc and doc["metricsUnavailable"] == "the cluster serves no metrics.k8s.io API"
    assert WorkloadUsage.from_doc(doc) is not None and WorkloadUsage.from_doc(doc).utilisation("cpu") is None  # type: ignore[union-attr]


def test_sums_over_clusters_and_names_the_unmeasured() -> None:
    measured = measure([_deploy("web")], PODS, METRICS)[("shop", "Deployment", "web")].to_doc()
    missing = measure([_deploy("web")], PODS, None, "down")[("shop", "Deployment", "web")].to_doc()
    total = summed_doc([{"cluster": "a", "usage": measured}, {"cluster": "b", "usage": measured},
                        {"cluster": "c", "usage": missing}, {"cluster": "d"}])
    assert total == {"pods": 9, "readyPods": 6, "cpu": {"used": "1900m", "requested": "2"},
                     "memory": {"used": "512Mi", "requested": "1Gi"}, "metricsUnavailable": ["c"]}
    binding = {"spec": {"resource": {"kind": "Deployment", "name": "web", "namespace": "shop"}},
               "status": {"clusters": [{"cluster": "b", "usage": measured}, {"cluster": "c", "usage": missing},
                                       {"cluster": "a", "usage": measured}]}}
    assert workload_rows([binding], "shop") == [
        ["shop", "Deployment/web", "a", "950m/1", "256Mi/512Mi", "2/3"],
        ["shop", "Deployment/web", "b", "950m/1", "256Mi/512Mi", "2/3"],
        ["shop", "Deployment/web", "c", "<unknown>", "<unknown>", "2/3"]]
    assert workload_rows([binding], "other") == []


def test_pods_not_measured_yet_are_not_a_zero() -> None:
    got = measure([_deploy("web")], [_pod("web-1", "web", ready=False)], [])[("shop", "Deployment", "web")]
    assert got.used is None and got.unavailable == ["no ready pod measured yet"]
    assert "cpu" not in got.to_doc()
    empty = measure([_deploy("web")], [], [])[("shop", "Deployment", "web")]
    assert empty.used is None and not empty.unavailable and empty.to_doc() == {"pods": 0, "readyPods": 0}


async def test_members_read_together_are_read_again_at_their_own_places_in_the_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading after the first is due at a point of the interval of the member's own, then every
    interval: members started together are not all read (and their Works all written) at once."""
    reads: list[float] = []

    async def collect(_client: object, _workloads: object) -> dict[object, WorkloadUsage]:
        reads.append(now)
        return {}

    monkeypatch.setattr(workload_usage, "collect", collect)
    readers = [UsageReader(15.0) for _ in range(40)]
    now = 1_000.0
    for r in readers:
        await r.read(None, [], now)  # type: ignore[arg-type]
    assert len(reads) == 40
    due = sorted(r.due_at - now for r in readers)
    assert due[0] >= 0.0 and due[-1] <= 15.0 and due[-1] - due[0] > 7.0, due
    first = readers[0]
    now = first.due_at - 0.01
    await first.read(None, [], now)  # type: ignore[arg-type]
    assert len(reads) == 40  # not due yet: the last reading
    now = first.due_at
    await first.read(None, [], now)  # type: ignore[arg-type]
    assert len(reads) == 41 and first.due_at == now + 15.0
