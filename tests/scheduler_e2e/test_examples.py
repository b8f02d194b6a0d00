"""Every file in examples/scheduling is valid: objects by the registry's rules, the profile by Profile.load."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drods.model.kinds import by_kind
from drods.registry.objects import ObjectRegistry
from drods.scheduler.profile import Profile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scheduling"
PLACEMENT = Path(__file__).resolve().parents[2] / "examples" / "placement"


@pytest.mark.parametrize("path", sorted([p.name for p in EXAMPLES.glob("*.yaml")]
                                         + [f"placement/{p.name}" for p in PLACEMENT.glob("*.yaml")]))
def test_example_is_valid(path: str) -> None:
    file = EXAMPLES.parent / path if path.startswith("placement/") else EXAMPLES / path
    if path == "scheduler-profile.yaml":
        assert Profile.load(file).name == "cost-aware"
        return
    if path == "placement/scheduler-profile.yaml":
        prof = Profile.load(file)
        assert {p.name for p, _ in prof.scores} >= {"Cost", "Dissonance"}
        return
    docs = [d for d in yaml.safe_load_all(file.read_text()) if d]
    assert docs
    registry = ObjectRegistry.__new__(ObjectRegistry)  # validation needs no store
    for doc in docs:
        kind = by_kind(doc["apiVersion"], doc["kind"])
        assert kind is not None, doc["kind"]
        registry.validate(kind, doc)


def test_traffic_example_is_a_valid_report() -> None:
    import json

    from drods.model.traffic import TrafficReport

    report = TrafficReport.model_validate(json.loads((PLACEMENT / "traffic.json").read_text()))
    assert [e.to.key for e in report.edges] == ["shop/db", "shop/cache"]


def test_access_report_example_is_valid() -> None:
    import json

    from drods.model.dataset_access import DatasetAccessReport

    report = DatasetAccessReport.model_validate(json.loads((PLACEMENT / "access-report.json").read_text()))
    assert [(r.dataset.key, r.cluster) for r in report.reads] == [("ml/clicks", "fra-spot"),
                                                                   ("ml/images", "fra-ondemand")]


def test_gpu_capacity_example_decides_as_its_comment_says() -> None:
    import json

    from drods.model.binding import BindingSpec
    from drods.monitor.report import MetricsReport, NormalisedStatus, normalise
    from drods.monitor.statusdoc import allocation_errors, scheduler_view
    from drods.scheduler import Scheduler, Snapshot, Task

    report = MetricsReport.model_validate(json.loads((PLACEMENT / "gpu-report.json").read_text()))
    assert allocation_errors(report.extras) == []
    status = normalise(report, 0.0)
    assert isinstance(status, NormalisedStatus)
    cluster = yaml.safe_load((PLACEMENT / "cluster-gpus-storage.yaml").read_text())
    snap = Snapshot()
    snap.upsert_cluster("fra-gpu", {}, cluster["spec"], True, scheduler_view(status))
    spec = BindingSpec.model_validate(yaml.safe_load((PLACEMENT / "binding-gpu-capacity.yaml").read_text())["spec"])
    sched = Scheduler(Profile.default(), rng_seed=1)
    r = sched.schedule(Task(spec, name="train"), snap)
    assert r.placement_dict() == {"fra-gpu": 6}
    assert r.analysis["headroom"] == {
        "gpus": {"perReplica": 1, "eligible": "GPUs (A100)", "clusters": {"fra-gpu": {"free": {"A100": 6.0},
                                                                                       "used": 6.0}}},
        "storage": {"tier": "nvme", "perReplicaGiB": 200.0, "clusters": {"fra-gpu": {"freeGiB": 13500.0,
                                                                                     "usedGiB": 1200.0}}}}
    snap.assume(r.pairs, spec.resources, key="train")
    r = sched.schedule(Task(spec.model_copy(update={"replicas": 1}), name="more"), snap)
    assert r.phase == "Unschedulable" and r.message == "0/1 clusters available: 1 insufficient GPUs (A100)."
    assert r.reasons["fra-gpu"] == "insufficient GPUs (A100): need 1 per replica, free 0"
