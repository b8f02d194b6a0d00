"""The FederatedHPA's rule with pods that have no measurement (walkthrough AJ #2): Kubernetes' replica
calculator, which Karmada's FederatedHPA reuses — missing pods at 0 % of their request when the measured
ratio says scale up, at 100 % (or the target, if higher) when it says scale down, unready pods at 0 % on a
scale-up; no scale when that reverses the direction or lands within the tolerance."""

from __future__ import annotations

from typing import Any

import pytest

from drods.autoscaling.controller import _HPATurn, _observe, _recommend, workload_usage
from drods.model.autoscaling import FederatedHPASpec


def _usage(percent: float, pods: int, ready: int | None = None) -> dict[str, Any]:
    """``ready`` (default: all) ready pods requesting 1 core each at ``percent``, of ``pods`` pods."""
    ready = pods if ready is None else ready
    return {"cpu": {"used": f"{round(percent * ready * 10)}m", "requested": str(ready)},
            "memory": {"used": "64Mi", "requested": f"{128 * ready}Mi"}, "pods": pods, "readyPods": ready}


def _recommended(current: int, target: int, clusters: list[dict[str, Any]], not_ready: tuple[str, ...] = ()) -> int:
    spec = FederatedHPASpec.model_validate({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1, "maxReplicas": 50,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": target}}}]})
    binding = {"status": {"clusters": clusters}}
    usage = workload_usage(binding, lambda c: "cluster NotReady (ClusterNotReachable)" if c in not_ready else None)
    turn = _HPATurn(spec, "default", "web", current, {e["cluster"]: e["replicas"] for e in clusters}, 1, 50, None,
                    usage=usage)
    _observe(turn)
    return _recommend(turn)


def test_a_busy_measured_pod_beside_a_partitioned_members_pods_does_not_scale_up() -> None:
    """The walkthrough: 1 pod measured at 80 % (target 50 %), 2 on a cut-off member. The unmeasured pods at
    0 % give 80 / 3 ≈ 27 %, a scale-down: the direction reversed, so the count stays (it went 3 → 5 and
    would have flapped back)."""
    clusters = [{"cluster": "aws", "replicas": 2, "usage": _usage(30.0, 2)},  # its reading from before the cut
                {"cluster": "azure", "replicas": 1, "usage": _usage(80.0, 1)}]
    assert _recommended(3, 50, clusters, not_ready=("aws",)) == 3
    # a member whose metrics API fails is the same: its pods are missing
    failing = [{"cluster": "aws", "replicas": 2, "usage": {"pods": 2, "readyPods": 2,
                                                            "metricsUnavailable": "metrics.k8s.io: 503"}},
               clusters[1]]
    assert _recommended(3, 50, failing) == 3


def test_idle_measured_pods_beside_missing_ones_do_not_scale_down() -> None:
    """1 pod at 10 % (target 50 %) and 2 missing: at 100 % of their request those give (10 + 200) / 3 = 70 %,
    above the target — the direction reversed, no scale-down on a guess that they are as idle."""
    clusters = [{"cluster": "aws", "replicas": 2, "usage": {"pods": 2, "readyPods": 2, "metricsUnavailable": "x"}},
                {"cluster": "azure", "replicas": 1, "usage": _usage(10.0, 1)}]
    assert _recommended(3, 50, clusters) == 3


def test_a_load_high_enough_still_scales_up_counting_the_missing_pods_idle() -> None:
    """2 pods at 300 % (target 50 %), 1 missing: (600 + 0) / 3 = 200 % → ratio 4 over 3 pods = 12 (not 6 × 3 = 18)."""
    clusters = [{"cluster": "a", "replicas": 2, "usage": _usage(300.0, 2)},
                {"cluster": "b", "replicas": 1, "usage": {"pods": 1, "readyPods": 1, "metricsUnavailable": "x"}}]
    assert _recommended(3, 50, clusters) == 12


def test_a_member_that_has_not_reported_yet_has_missing_pods() -> None:
    """b's 2 replicas were placed but nothing was read there: a's 2 pods at 90 % (target 60 %) and b's at 0 %
    give 45 % — no scale (the rule had multiplied a's ratio by a's pods alone: 3, a scale-down on a hot reading)."""
    clusters = [{"cluster": "a", "replicas": 2, "usage": _usage(90.0, 2)}, {"cluster": "b", "replicas": 2}]
    assert _recommended(4, 60, clusters) == 4


@pytest.mark.parametrize(("percent", "expected"), [(90.0, 4), (200.0, 7)])
def test_unready_pods_count_idle_on_a_scale_up(percent: float, expected: int) -> None:
    """4 pods, 2 ready at ``percent`` (target 60 %), 2 starting: on a scale-up the starting ones count at 0 %.
    At 90 %: 180 / 4 = 45 %, reversed — no scale (the rule had said ceil(1.5 × 2) = 3, a scale-down on a hot
    reading). At 200 %: 400 / 4 = 100 %, ratio 1.67 over the 4 pods counted → 7."""
    clusters = [{"cluster": "a", "replicas": 4, "usage": _usage(percent, 4, ready=2)}]
    assert _recommended(4, 60, clusters) == expected


def test_unready_pods_are_left_out_of_a_scale_down() -> None:
    """4 pods, 2 ready at 15 % (target 60 %): the unready ones are neither busy nor idle on a scale-down —
    ceil(0.25 × 2) = 1."""
    clusters = [{"cluster": "a", "replicas": 4, "usage": _usage(15.0, 4, ready=2)}]
    assert _recommended(4, 60, clusters) == 1
