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
