"""Network traffic from kubelet counters: a rate needs two samples, a reset gives none, and unknown is
None (never 0)."""

from __future__ import annotations

import pytest

from drods.members.traffic import TrafficMeter, node_sample


def _summary(at: str, rx: int, tx: int) -> dict[str, object]:
    return {"node": {"nodeName": "n1", "network": {"time": at, "name": "eth0", "rxBytes": rx, "txBytes": tx}}}


def test_rates_from_two_samples_per_node() -> None:
    meter = TrafficMeter()
    first = node_sample(_summary("2026-01-01T00:00:00.000Z", 1000, 500), 0.0)
    assert first is not None and meter.rates({"n1": first}) is None  # one sample: unknown
    second = node_sample(_summary("2026-01-01T00:00:02.000Z", 5000, 1500), 0.0)
    assert second is not None
    assert meter.rates({"n1": second}) == pytest.approx((2000.0, 500.0))
    reset = node_sample(_summary("2026-01-01T00:00:04.000Z", 10, 10), 0.0)  # the kubelet restarted
    assert reset is not None and meter.rates({"n1": reset}) is None
    assert meter.rates({}) is None and meter.last == {}


def test_a_summary_without_counters_is_no_sample() -> None:
    assert node_sample({"node": {"nodeName": "n1"}}, 0.0) is None
    assert node_sample({"node": {"network": {"rxBytes": "x", "txBytes": 1}}}, 0.0) is None


def test_a_summary_reads_a_few_nodes_in_turn_and_keeps_the_others_rates() -> None:
    """100 members of 50 nodes read whole every summary were the heaviest thing the control plane did;
    each summary reads ``per_summary`` nodes, in turn, and the cluster's rate sums every node's last."""
    meter = TrafficMeter(per_summary=2)
    nodes = ["n1", "n2", "n3"]
    assert [meter.due(nodes) for _ in range(3)] == [["n1", "n2"], ["n3", "n1"], ["n2", "n3"]]
    meter.rates({"n1": (0.0, 0.0, 0.0), "n2": (0.0, 0.0, 0.0)}, nodes)
    assert meter.rates({"n3": (0.0, 0.0, 0.0)}, nodes) is None  # no node has two samples yet
    assert meter.rates({"n1": (10.0, 100.0, 10.0), "n2": (10.0, 200.0, 0.0)}, nodes) == pytest.approx((30.0, 1.0))
    # n3's first rate adds to the kept ones of n1 and n2
    assert meter.rates({"n3": (10.0, 1000.0, 0.0)}, nodes) == pytest.approx((130.0, 1.0))
    assert meter.rates({}, ["n3"]) == pytest.approx((100.0, 0.0))  # n1 and n2 left the cluster
    assert set(meter.last) == {"n3"}
    assert TrafficMeter().due(nodes) == nodes  # per_summary 0: every node
