from __future__ import annotations

from drods.model.rollout import max_unavailable, minimum_available


def test_max_unavailable_reads_the_strategy_as_kubernetes_does() -> None:
    assert max_unavailable({}, 10) == 2  # 25 % rounded down
    assert max_unavailable({}, 3) == 0
    assert max_unavailable({"strategy": {"rollingUpdate": {"maxUnavailable": "50%"}}}, 5) == 2
    assert max_unavailable({"strategy": {"rollingUpdate": {"maxUnavailable": 7}}}, 5) == 5  # at most replicas
    # both resolving to 0 would never progress: Kubernetes lets one be unavailable
    assert max_unavailable({"strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}}, 4) == 1
    assert max_unavailable({"strategy": {"type": "Recreate"}}, 4) == 0
    assert max_unavailable({}, 0) == 0
    assert minimum_available({}, 8) == 6
