"""F1: how GPU-by-model and storage-by-tier allocation reaches the scheduler's snapshot — the report
extras through the status document, the Kubernetes summary by GPU product, the binding's demand,
and the cache's assume (until status covers it) and hold (while placed)."""

from __future__ import annotations

import json

from drods.members.collector import report_from_summary
from drods.members.summary import summarise
from drods.model.cluster import ClusterSpec, GpuOffer, StorageOffer
from drods.monitor.report import MetricsReport, NormalisedStatus, normalise
from drods.monitor.statusdoc import allocation_errors, scheduler_view
from drods.scheduler.offers import OfferDemand
from drods.schedulerd.cache import ClusterRecord, SchedulerCache, StatusRecord
from drods.schedulerd.records import decode_binding
from tests.members.test_summary import node, pod

REQ = (1.0, 0.0, 1.0, 1.0, 0.0)
A100 = OfferDemand(gpus=1, gpu_model="A100")


def test_report_extras_reach_the_scheduler_view_and_bad_ones_are_refused() -> None:
    body = {"cluster": "x", "cpuCapacity": 8, "cpuUsage": 10,
            "gpuByModel": {"A100": {"capacity": 8, "allocatable": 8, "allocated": 3}},
            "storageByTier": {"ssd": {"capacity": 2000, "allocated": 250}}}
    report = MetricsReport.model_validate(body)
    assert allocation_errors(report.extras) == []
    st = normalise(report, 1000.0)
    assert isinstance(st, NormalisedStatus)
    view = scheduler_view(st)
    assert view["gpuByModel"] == {"A100": {"capacity": 8.0, "allocatable": 8.0, "allocated": 3.0}}
    assert view["storageByTier"] == {"ssd": {"capacity": 2000.0, "allocated": 250.0}}
    bad = {"gpuByModel": {"A100": {"allocated": -1, "free": 2}}, "storageByTier": [1]}
    fields = {e["field"] for e in allocation_errors(bad)}
    assert fields == {"gpuByModel.A100.allocated", "gpuByModel.A100.free", "storageByTier"}


def test_kubernetes_summary_counts_gpus_by_product_label() -> None:
    nodes = [node("a", "8", "32Gi", 4, labels={"nvidia.com/gpu.product": "A100"}),
             node("b", "8", "32Gi", 2, labels={"nvidia.com/gpu.product": "A100"}),
             node("c", "8", "32Gi", 8, labels={"nvidia.com/gpu.product": "T4"}), node("d", "8", "32Gi")]
    s = summarise(nodes, [pod("a", "1", "1Gi", 3), pod("c", "1", "1Gi", 1), pod(None, "1", "1Gi", 2)], None, now=0)
    assert s.gpu_by_model == {"A100": {"capacity": 6.0, "allocatable": 6.0, "allocated": 3.0},
                              "T4": {"capacity": 8.0, "allocatable": 8.0, "allocated": 1.0}}
    assert report_from_summary("x", s, now=0)["gpuByModel"] == s.gpu_by_model


def test_binding_demand_is_decoded() -> None:
    raw = json.dumps({"metadata": {"name": "b"}, "spec": {"replicas": 2, "resources": {
        "cpu": 1, "gpu": 2, "minGpuPerformance": 1.5, "storage": 50, "storageTier": "nvme"}}}).encode()
    r = decode_binding("/registry/multicluster.io/bindings/b", raw, 1)
    assert r is not None and r.demand == OfferDemand(2, None, 1.5, 50.0, "nvme")
    cpu_only = json.dumps({"metadata": {"name": "c"}, "spec": {"resources": {"cpu": 1, "storage": 9}}}).encode()
    r = decode_binding("/registry/multicluster.io/bindings/c", cpu_only, 1)
    assert r is not None and r.demand is None


def test_cache_assumes_until_covered_and_holds_while_placed() -> None:
    now = [1000.0]
    c = SchedulerCache(clock=lambda: now[0], status_max_age=600.0, assume_ttl=30.0)
    spec = ClusterSpec(gpus=[GpuOffer(model="A100", count=8)], storage=[StorageOffer(tier="ssd", capacityGiB=100)])
    reporting = {"cpu": {"capacity": 64.0}, "memory": {"capacity": 256.0},
                 "gpuByModel": {"A100": {"capacity": 8, "allocated": 1}}}
    c.on_cluster("rep", ClusterRecord("rep", {}, spec, True))
    c.on_cluster("silent", ClusterRecord("silent", {}, spec, True))
    c.on_status("rep", StatusRecord("rep", reporting, 1000.0))
    c.on_status("silent", StatusRecord("silent", {"cpu": {"capacity": 64.0}, "memory": {"capacity": 256.0}}, 1000.0))
    snap = c.snap

    def free() -> list[float]:
        return snap.offers.gpus.free(snap.n)[:, snap.offers.gpus.keys["A100"]].tolist()  # type: ignore[no-any-return]

    c.assume_decision("k", (), (("rep", 3), ("silent", 2)), REQ, 1000.0, A100)
    assert free() == [4.0, 6.0]  # rep: 8 - (1 reported + 3 assumed); silent: 8 - 2 held
    now[0] = 1040.0  # both report after the decision + ttl: the assumption is forgotten ...
    reporting["gpuByModel"] = {"A100": {"capacity": 8, "allocated": 4}}
    c.on_status("rep", StatusRecord("rep", reporting, 1040.0))
    c.on_status("silent", StatusRecord("silent", {"cpu": {"capacity": 64.0}, "memory": {"capacity": 256.0}}, 1040.0))
    assert c.expire() == 1 and c.assumed("k") is None
    assert free() == [4.0, 6.0]  # ... rep's report now shows them, silent never will: the hold stays
    ev = c.on_status("rep", StatusRecord("rep", {**reporting, "gpuByModel": {"A100": {"allocated": 2}}}, 1041.0))
    assert ev.retry and ev.reasons == ["ClusterCapacityFreed"]  # GPUs of a model freed: retry parked ones
    # a scale-down gives the silent member's GPUs back at once: a cue to retry parked bindings
    assert not c.assume_decision("k", (("rep", 3), ("silent", 2)), (("rep", 3), ("silent", 3)), REQ, 1042.0, A100)
    assert free() == [6.0, 5.0]  # rep: 8 - its 2 reported now
    assert c.assume_decision("k", (("rep", 3), ("silent", 3)), (("rep", 3), ("silent", 1)), REQ, 1043.0, A100)
    assert free() == [6.0, 7.0]
    assert c.release("k") and free() == [6.0, 8.0] and not c.release("k")
