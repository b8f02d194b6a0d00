from __future__ import annotations

import pytest

from drods.monitor.thresholds import SustainedDetector, ThresholdDetector, ThresholdRule


def test_crossing_events_with_hysteresis() -> None:
    det = ThresholdDetector([ThresholdRule("cpu.utilisation", 0.7, hysteresis=0.05)])
    seq = [0.5, 0.69, 0.71, 0.68, 0.72, 0.66, 0.64, 0.75]
    events = [e for i, v in enumerate(seq) for e in det.observe("c", "cpu.utilisation", v, float(i))]
    assert [(e.direction, e.value, e.ts) for e in events] == [("up", 0.71, 2.0), ("down", 0.64, 6.0), ("up", 0.75, 7.0)]
    e = events[0]
    assert e.cluster == "c" and e.threshold == 0.7 and e.metric == "cpu.utilisation"
    assert e.to_dict()["direction"] == "up" and e.to_dict()["time"] == "1970-01-01T00:00:02Z"


def test_first_observation_above_is_reported() -> None:
    det = ThresholdDetector([ThresholdRule("waterLevel", 0.8)])
    assert [e.direction for e in det.observe("c", "waterLevel", 0.85, 0)] == ["up"]
    assert det.is_above("c", "waterLevel>=0.8")
    assert det.observe("c", "waterLevel", 0.9, 1) == []


def test_unrelated_metric_ignored_and_clusters_independent() -> None:
    det = ThresholdDetector([ThresholdRule("waterLevel", 0.8)])
    assert det.observe("a", "pods", 1e9, 0) == []
    assert len(det.observe("a", "waterLevel", 0.9, 0)) == 1
    assert len(det.observe("b", "waterLevel", 0.9, 0)) == 1


def test_flapping_input_bounded_events() -> None:
    det = ThresholdDetector([ThresholdRule("m", 0.7, hysteresis=0.05)])
    n = sum(len(det.observe("c", "m", 0.7 + (0.02 if i % 2 else -0.02), i)) for i in range(1000))
    assert n == 1


def test_sustained_fires_once_after_duration() -> None:
    d = SustainedDetector("waterLevel", 0.8, duration_s=60, hysteresis=0.05)
    out = [d.observe("c", 0.85, float(t)) for t in range(0, 70, 10)]
    fired = [e for e in out if e is not None]
    assert len(fired) == 1 and fired[0].kind == "sustained" and fired[0].ts == 60 and fired[0].since_ts == 0
    assert d.is_sustained("c")
    assert d.observe("c", 0.9, 80) is None  # no repeat
    cleared = d.observe("c", 0.7, 90)
    assert cleared is not None and cleared.kind == "cleared"
    assert not d.is_sustained("c") and d.above_since("c") is None


def test_brief_excursion_does_not_fire() -> None:
    d = SustainedDetector("waterLevel", 0.8, duration_s=60)
    for t, v in [(0, 0.85), (10, 0.85), (20, 0.5), (30, 0.85), (40, 0.85), (50, 0.85), (60, 0.85)]:
        assert d.observe("c", v, t) is None
    ev = d.observe("c", 0.85, 90)
    assert ev is not None and ev.since_ts == 30


def test_dip_into_hysteresis_band_keeps_clock() -> None:
    d = SustainedDetector("waterLevel", 0.8, duration_s=60, hysteresis=0.05)
    d.observe("c", 0.85, 0)
    d.observe("c", 0.78, 30)  # inside band: clock keeps running
    ev = d.observe("c", 0.81, 60)
    assert ev is not None and ev.since_ts == 0


def test_data_gap_restarts_clock() -> None:
    d = SustainedDetector("waterLevel", 0.8, duration_s=60, max_gap_s=30)
    d.observe("c", 0.9, 0)
    assert d.observe("c", 0.9, 100) is None  # 100 s without data: no evidence
    assert d.above_since("c") == 100
    assert d.observe("c", 0.9, 125) is None and d.observe("c", 0.9, 150) is None
    ev = d.observe("c", 0.9, 160)
    assert ev is not None and ev.since_ts == 100


def test_validation() -> None:
    with pytest.raises(ValueError):
        SustainedDetector("m", 1, duration_s=-1)
    with pytest.raises(ValueError):
        ThresholdDetector([ThresholdRule("m", 1, hysteresis=-1)])
