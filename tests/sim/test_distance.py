"""``--latency-to`` parsing, and which of a pair's report and measurement counts (C2)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from drods.model.steering import Measurement
from drods.sim.distance import DistanceTable, Link, parse_latency_to
from drods.steering.status import MEASURED_FRESH_SECONDS, write_measurements
from drods.store import Store


def test_latency_to_parses_delay_jitter_and_loss_and_rejects_nonsense() -> None:
    assert parse_latency_to("LHR=70") == ("LHR", Link(70.0))
    assert parse_latency_to("LHR=70±3,loss=0.01") == ("LHR", Link(70.0, 3.0, 0.01))
    assert parse_latency_to("aws-dfw=5.5+-1") == ("aws-dfw", Link(5.5, 1.0))
    for bad in ("LHR", "LHR=fast", "LHR=10±20", "LHR=10,loss=2"):
        with pytest.raises(ValueError, match="--latency-to"):
            parse_latency_to(bad)


def test_only_configured_sites_are_delayed_and_loss_drops_probes() -> None:
    table = DistanceTable({"DFW": Link(20.0, 5.0), "SIN": Link(1.0, 0.0, 1.0)})
    assert table.delay_for("ORD") == 0.0
    holds = [table.delay_for("DFW") for _ in range(50)]
    assert all(h is not None and 0.015 <= h <= 0.025 for h in holds) and len(set(holds)) > 1
    assert table.delay_for("SIN") is None


def m(**kw: object) -> Measurement:
    return Measurement.model_validate({"from": "DFW", "to": "c1", **kw})


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_fresh_measurement_wins_a_stale_one_yields_and_the_report_stays(
        store: Store, store_factory: Callable[[], Store]) -> None:
    now = [1_800_000_000.0]
    await write_measurements(store, [m(delayMs=9.0, lossPercent=1.0, bandwidthMbps=100.0, source="agent-x")],
                             lambda: now[0])
    [doc] = await write_measurements(store, [m(source="measured", rttMs=30.0, jitterMs=2.0, lossRatio=0.1)],
                                     lambda: now[0])
    assert (doc["source"], doc["rttMs"], doc["delayMs"], doc["lossPercent"], doc["bandwidthMbps"]) == (
        "measured", 30.0, 30.0, 10.0, 100.0)
    assert doc["reported"]["delayMs"] == 9.0 and doc["reported"]["reporter"] == "agent-x"
    now[0] += MEASURED_FRESH_SECONDS + 1  # the probe went quiet; a new report arrives
    [doc] = await write_measurements(store, [m(delayMs=8.0)], lambda: now[0])
    assert (doc["source"], doc["delayMs"], doc["lossRatio"]) == ("reported", 8.0, 0.01)
    assert "rttMs" not in doc and doc["measured"]["rttMs"] == 30.0
    # every probe lost: no delay at all (no route), never a measured 0
    [doc] = await write_measurements(store, [m(source="measured", lossRatio=1.0)], lambda: now[0])
    assert doc["source"] == "measured" and doc["lossRatio"] == 1.0 and "delayMs" not in doc and "rttMs" not in doc
