"""Dissonance (H2): the matrix, the score's golden values, skipping, and clashing classes kept apart."""

from __future__ import annotations

import numpy as np
import pytest

from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins.dissonance import Dissonance, build_matrix
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task


def test_matrix_is_symmetric_with_overrides() -> None:
    m = build_matrix({"ml-inference": {"cpu-batch": 0.9}})
    assert m["cpu-batch"]["latency-sensitive"] == m["latency-sensitive"]["cpu-batch"] == 0.8
    assert m["cpu-batch"]["ml-inference"] == 0.9
    assert "latency-sensitive" not in m["latency-sensitive"]  # zero: no clash, dropped
    with pytest.raises(ValueError, match="not within 0..1"):
        build_matrix({"a": {"b": 1.5}})


def test_score_golden_and_skip(snap: Snapshot) -> None:
    for nm in ("a", "b", "c"):
        add(snap, nm, st=status(cpu=100))
    plugin = Dissonance()
    info = analyse(Task(task(), name="ns/web", workload_class="latency-sensitive"))
    assert plugin.skip(info, snap)  # no classes placed anywhere yet
    snap.set_class_placement("ns/batch", "cpu-batch", [("a", 25)], 1.0)     # 25 cores of batch on a
    snap.set_class_placement("ns/io", "io-heavy", [("b", 10)], 1.0)         # 10 cores of io on b
    snap.set_class_placement("ns/other", "latency-sensitive", [("c", 50)], 1.0)  # no clash
    assert not plugin.skip(info, snap)
    s = plugin.score(info, snap, np.ones(3, dtype=bool))
    # sensitivity 4 (default) — a: 100·(1 − 4·0.8·25/100) = 20 ; b: 100·(1 − 4·0.6·10/100) = 76 ; c: 100
    assert s.tolist() == pytest.approx([20.0, 76.0, 100.0])
    # a workload's own replicas never count against it
    snap.set_class_placement("ns/batch", "cpu-batch", [("a", 25)], 1.0)
    own = analyse(Task(task(), name="ns/batch", workload_class="cpu-batch"))
    # a: its own 25 cores left out → 100; b: 100·(1 − 4·0.3·10/100) = 88; c: 4·0.8·50/100 > 1 → 0
    assert plugin.score(own, snap, np.ones(3, dtype=bool)).tolist() == pytest.approx([100.0, 88.0, 0.0])
    two = Dissonance({"sensitivity": 2.0})  # c: 100·(1 − 2·0.8·50/100) = 20
    assert two.score(own, snap, np.ones(3, dtype=bool)).tolist() == pytest.approx([100.0, 94.0, 20.0])
    assert plugin.skip(analyse(task()), snap)  # a task without a class
    snap.drop_class_placement("ns/batch")
    assert plugin.score(info, snap, np.ones(3, dtype=bool))[0] == pytest.approx(100.0)


def test_class_cores_follow_row_moves(snap: Snapshot) -> None:
    for nm in ("a", "b", "c"):
        add(snap, nm)
    snap.set_class_placement("k", "cpu-batch", [("c", 4)], 2.0)
    snap.remove_cluster("a")  # c moves into a's row
    assert snap.class_cores["cpu-batch"][snap.index["c"]] == 8.0
    assert snap.class_cores["cpu-batch"][: snap.n].sum() == 8.0


def test_latency_sensitive_avoids_the_batch_cluster(snap: Snapshot) -> None:
    add(snap, "batchy", st=status(cpu=100, cpu_used=40))
    add(snap, "calm", st=status(cpu=100, cpu_used=50))
    snap.set_class_placement("ns/batch", "cpu-batch", [("batchy", 40)], 1.0)
    sched = Scheduler(Profile.default(), rng_seed=3)
    blind = sched.schedule(Task(task(replicas=2), name="ns/web"), snap)
    aware = sched.schedule(Task(task(replicas=2), name="ns/web", workload_class="latency-sensitive"), snap)
    assert "batchy" in blind.placement_dict()  # lower water level wins without a class
    assert aware.placement_dict() == {"calm": 2}
    assert aware.scores["Dissonance"]["calm"] == 100.0 and "Dissonance" not in blind.scores


def test_detector_copies_the_workload_class_to_the_binding() -> None:
    from drods.model.detection import PolicyMatch, desired_binding
    from drods.model.kinds import PROPAGATION_POLICY, by_kind

    deploy = by_kind("apps/v1", "Deployment")
    assert deploy is not None
    match = PolicyMatch(1, 3, 0, 1, "pp", PROPAGATION_POLICY, {}, (), ())
    obj = {"metadata": {"name": "web", "namespace": "shop",
                        "labels": {"multicluster.io/workload-class": "latency-sensitive"}},
           "spec": {"replicas": 2}}
    b = desired_binding(deploy, obj, match)
    assert b["metadata"]["labels"]["multicluster.io/workload-class"] == "latency-sensitive"
    plain = desired_binding(deploy, {"metadata": {"name": "x"}, "spec": {}}, match)
    assert "multicluster.io/workload-class" not in plain["metadata"]["labels"]
