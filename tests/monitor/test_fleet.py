from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from drods.monitor.fleet import format_bitrate, realtime
from drods.monitor.report import MetricsReport, NormalisedStatus, normalise

NOW = 1_700_000_000.0


def status(name: str, t: float = NOW, **kw: Any) -> NormalisedStatus:
    rep = MetricsReport(cluster=name, timestamp=datetime.fromtimestamp(t, UTC), **kw)
    st = normalise(rep, t)
    assert isinstance(st, NormalisedStatus)
    return st


@pytest.mark.parametrize(
    "mbps,text",
    [
        (1200, "1.2Gbps"),
        (850, "850Mbps"),
        (0, "0bps"),
        (0.5, "500Kbps"),
        (2.5e6, "2.5Tbps"),
        (120_000, "120Gbps"),
        (999.7, "1Gbps"),
        (1234.5, "1.23Gbps"),
        (3e9, "3000Tbps"),
        (3e12, "3000000Tbps"),
    ],
)
def test_format_bitrate(mbps: float, text: str) -> None:
    assert format_bitrate(mbps) == text


def test_realtime_aggregation() -> None:
    statuses = {
        "a": status(
            "a",
            cpuCapacity=100,
            cpuUsage=50,
            memoryCapacity=100,
            memoryAvailable=80,
            pods=1000,
            networkIn=600,
            networkOut=200,
        ),
        "b": status(
            "b",
            cpuCapacity=300,
            cpuUsage=10,
            memoryCapacity=100,
            memoryAvailable=10,
            pods=1450,
            networkIn=300,
            networkOut=100,
        ),
        "c": status("c", cpuCapacity=10, cpuUsage=100, pods=99),  # not ready
        "d": status("d", t=NOW - 600, cpuCapacity=10, cpuUsage=5, pods=5),  # stale
        "zz": status("zz", pods=7),  # not registered: ignored
    }
    ready = {"a": True, "b": True, "c": False, "d": True, "e": True}
    snap = realtime(statuses, ready, NOW).model_dump()
    assert snap["activeClusters"] == 2
    assert snap["totalPods"] == 2450
    assert snap["networkTrafficMbps"] == 1200 and snap["networkTraffic"] == "1.2Gbps"
    assert snap["unhealthyClusters"] == ["c", "d", "e"]
    wl = snap["waterLevel"]
    assert wl["clusters"]["a"] == pytest.approx(0.5) and wl["clusters"]["b"] == pytest.approx(0.9)
    assert wl["clusters"]["e"] is None and "zz" not in wl["clusters"]
    # capacity-weighted: cpu (50+30)/400 = 0.2, memory (20+90)/200 = 0.55 → 0.55
    assert wl["fleet"] == pytest.approx(0.55)
    assert snap["timestamp"] == "2023-11-14T22:13:20Z"


def test_realtime_empty_fleet() -> None:
    snap = realtime({}, {}, NOW)
    assert snap.activeClusters == 0 and snap.totalPods == 0 and snap.waterLevel.fleet is None
    assert snap.networkTraffic == "unknown" and snap.networkTrafficMbps is None  # nothing measured is not 0


def test_realtime_shows_levels_without_float_noise() -> None:
    """A member at 2.9167 % shows 0.029167, not the 0.029167000000000002 the division makes."""
    st = status("a", cpuCapacity=24, cpuUsage=2.9167)
    wl = realtime({"a": st}, {"a": True}, NOW).model_dump()["waterLevel"]
    assert st.water_level != round(st.water_level, 6)  # the level as computed carries the digits
    assert wl["clusters"]["a"] == 0.029167 and wl["fleet"] == 0.029167
