from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from drods.monitor import report as r
from drods.monitor.report import MetricsReport, NormalisedStatus, Normaliser, Rejection, normalise

T0 = datetime(2023, 7, 20, 8, 30, tzinfo=UTC)


def rep(**kw: Any) -> MetricsReport:
    base: dict[str, Any] = {"cluster": "aws-us-east", "timestamp": T0.isoformat()}
    base.update(kw)
    return MetricsReport.model_validate(base)


def full(**kw: Any) -> MetricsReport:
    d: dict[str, Any] = dict(
        cpuCapacity=32,
        cpuUsage=50,
        memoryCapacity=128,
        memoryAvailable=32,
        gpuCapacity=4,
        gpuUsage=25,
        storageCapacity=1000,
        storageAvailable=400,
        networkIn=100,
        networkOut=50,
        pods=40,
        largestNodeFree={"cpu": 4, "memory": 16, "gpu": 1},
        requestRate=900,
    )
    d.update(kw)
    return rep(**d)


def test_spec_example_is_accepted() -> None:
    m = MetricsReport.model_validate(
        {"cluster": "aws-us-east", "timestamp": "2023-07-20T08:30:00Z", "cpuUsage": 72.4, "memoryAvailable": 15.2}
    )
    assert m.cpuUsage == 72.4
    assert m.timestamp == T0


@pytest.mark.parametrize(
    "field,value",
    [
        ("cpuUsage", 100.1),
        ("cpuUsage", -1),
        ("gpuUsage", 250),
        ("cpuCapacity", -4),
        ("memoryCapacity", -1),
        ("pods", -1),
        ("networkIn", -5),
        ("requestRate", -1),
        ("networkOut", float("inf")),
    ],
)
def test_range_errors_name_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as ei:
        rep(**{field: value})
    assert [e["loc"] for e in ei.value.errors()] == [(field,)]


def test_available_above_capacity_is_a_field_error() -> None:
    with pytest.raises(ValidationError) as ei:
        rep(memoryCapacity=64, memoryAvailable=70, storageCapacity=10, storageAvailable=11)
    errs = {e["loc"]: e["msg"] for e in ei.value.errors()}
    assert set(errs) == {("memoryAvailable",), ("storageAvailable",)}
    assert "must not exceed memoryCapacity" in errs[("memoryAvailable",)]


def test_largest_node_free_cannot_exceed_cluster_capacity() -> None:
    with pytest.raises(ValidationError) as ei:
        rep(cpuCapacity=8, largestNodeFree={"cpu": 9})
    assert ei.value.errors()[0]["loc"] == ("largestNodeFree",)


def test_missing_cluster_rejected_missing_timestamp_means_now() -> None:
    with pytest.raises(ValidationError):
        MetricsReport.model_validate({"timestamp": "2023-07-20T08:30:00Z"})
    st = normalise(MetricsReport.model_validate({"cluster": "x", "cpuUsage": 10}), T0)
    assert isinstance(st, NormalisedStatus) and st.ts == T0.timestamp()


def test_stale_report_is_rejected_for_the_live_view_but_kept_for_history() -> None:
    out = normalise(MetricsReport.model_validate({"cluster": "x", "timestamp": "2023-07-20T08:00:00Z",
                                                  "cpuCapacity": 8, "cpuUsage": 50}), T0)
    assert not isinstance(out, NormalisedStatus) and out.stale and out.history is not None
    assert out.history.get("cpu.used") == 4.0 and out.history.ts < T0.timestamp() - 300


def test_unknown_fields_are_kept_and_ignored() -> None:
    m = rep(cpuUsage=10, cpuCapacity=4, fpgaCount=3, vendor={"x": 1})
    assert m.extras == {"fpgaCount": 3, "vendor": {"x": 1}}
    st = normalise(m, T0)
    assert isinstance(st, NormalisedStatus)
    assert st.extras == {"fpgaCount": 3, "vendor": {"x": 1}}
    assert "fpgaCount" not in st.values


def test_naive_timestamp_is_utc() -> None:
    m = rep(timestamp="2023-07-20T08:30:00")
    assert m.timestamp == T0


def test_normalised_units_and_water_level() -> None:
    st = normalise(full(), T0)
    assert isinstance(st, NormalisedStatus)
    assert st.cpu.capacity == 32 and st.cpu.used == pytest.approx(16) and st.cpu.utilisation == 0.5
    assert st.memory.used == pytest.approx(96) and st.memory.utilisation == pytest.approx(0.75)
    assert st.gpu.used == pytest.approx(1)
    assert st.storage.used == pytest.approx(600) and st.storage.free == pytest.approx(400)
    assert st.network_mbps == 150
    assert st.pods == 40
    assert st.get(r.NODE_FREE_MEMORY) == 16
    # water level = max(cpu 0.5, memory 0.75)
    assert st.water_level == pytest.approx(0.75)
    assert set(st.values) == set(r.METRICS)
    for m in st.values.values():
        assert m.source == "push" and m.ts == T0.timestamp()


def test_to_dict_has_source_and_timestamp_on_every_value() -> None:
    st = normalise(full(), T0, source="prometheus")
    assert isinstance(st, NormalisedStatus)
    d = st.to_dict()
    assert d["cpu"]["used"]["source"] == "prometheus"
    assert d["network"]["inMbps"] == {"value": 100.0, "source": "prometheus", "timestamp": "2023-07-20T08:30:00Z"}
    assert d["waterLevel"]["value"] == pytest.approx(0.75)
    assert d["clockSkewClamped"] is False


def test_future_timestamp_clamped_and_flagged() -> None:
    now = T0 - timedelta(seconds=120)
    st = normalise(full(), now, max_skew_s=30)
    assert isinstance(st, NormalisedStatus)
    assert st.clock_skew_clamped and st.to_dict()["clockSkewClamped"] is True
    assert st.ts == now.timestamp()
    # within the skew allowance it is kept as sent
    st2 = normalise(full(), T0 - timedelta(seconds=20), max_skew_s=30)
    assert isinstance(st2, NormalisedStatus)
    assert not st2.clock_skew_clamped and st2.ts == T0.timestamp()


def test_stale_report_ignored_with_reason() -> None:
    out = normalise(full(), T0 + timedelta(seconds=301), max_age_s=300)
    assert isinstance(out, Rejection)
    assert out.code == "STALE_REPORT" and "301s old" in out.reason


def test_out_of_order_report_ignored() -> None:
    n = Normaliser()
    assert isinstance(n(full(), T0), NormalisedStatus)
    older = full(timestamp=(T0 - timedelta(seconds=10)).isoformat())
    out = n(older, T0)
    assert isinstance(out, Rejection) and out.code == "OUT_OF_ORDER_REPORT"
    dup = n(full(), T0)
    assert isinstance(dup, Rejection)
    newer = full(timestamp=(T0 + timedelta(seconds=10)).isoformat())
    assert isinstance(n(newer, T0 + timedelta(seconds=10)), NormalisedStatus)


def test_partial_reports_carry_values_over_until_max_age() -> None:
    n = Normaliser(max_age_s=300)
    n(full(), T0)
    t1 = T0 + timedelta(seconds=10)
    st = n(rep(timestamp=t1.isoformat(), cpuUsage=75), t1)
    assert isinstance(st, NormalisedStatus)
    assert st.cpu.utilisation == 0.75
    # used recomputed from the carried capacity; capacity keeps its original timestamp
    assert st.cpu.used == pytest.approx(24)
    assert st.values[r.CPU_CAPACITY].ts == T0.timestamp()
    assert st.values[r.CPU_USED].ts == t1.timestamp()
    assert st.memory.utilisation == pytest.approx(0.75)
    assert st.water_level == pytest.approx(0.75)
    t2 = T0 + timedelta(seconds=400)
    st2 = n(rep(timestamp=t2.isoformat(), cpuUsage=10), t2)
    assert isinstance(st2, NormalisedStatus)
    assert st2.get(r.CPU_CAPACITY) is None and st2.cpu.used is None
    assert st2.water_level == pytest.approx(0.1)


def test_forget_resets_cluster() -> None:
    n = Normaliser()
    n(full(), T0)
    n.forget("aws-us-east")
    assert n.latest("aws-us-east") is None
    assert isinstance(n(full(), T0), NormalisedStatus)
