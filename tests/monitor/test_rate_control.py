from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from drods.monitor import report as r
from drods.monitor.rate_control import Decision, RateController, RatePolicy, StatusDamper
from drods.monitor.report import MetricsReport, NormalisedStatus, normalise

WL = RatePolicy(min_interval_s=30, abs_change=0.02, thresholds=(0.7, 0.9), hysteresis=0.03)


def test_first_value_published() -> None:
    rc = RateController({"m": WL})
    assert rc.offer("k", "m", 0.5, 0.0) is Decision.PUBLISHED
    assert rc.visible("k") == 0.5


def test_flapping_around_threshold_bounded() -> None:
    """±2 % jitter around 70 % for an hour: the visible side of the threshold never flips."""
    rc = RateController({"m": WL})
    rng = np.random.default_rng(7)
    changes = crossings = 0
    prev_side = None
    for i in range(360):  # 1 h at 10 s
        v = 0.70 + rng.uniform(-0.02, 0.02)
        if rc.offer("k", "m", v, i * 10.0) is Decision.PUBLISHED:
            changes += 1
        vis = rc.visible("k")
        assert vis is not None
        side = vis >= 0.7
        crossings += prev_side is not None and side != prev_side
        prev_side = side
    assert crossings == 0
    assert changes <= 2


def test_large_flapping_is_rate_limited() -> None:
    """Big swings across the band: at most one visible change per min interval."""
    rc = RateController({"m": WL})
    changes = 0
    duration = 3600
    for i in range(duration // 10):
        v = 0.6 if i % 2 else 0.8
        changes += rc.offer("k", "m", v, i * 10.0) is Decision.PUBLISHED
    assert changes <= duration / WL.min_interval_s + 1


def test_step_change_visible_within_one_interval() -> None:
    rc = RateController({"m": WL})
    rc.offer("k", "m", 0.4, 0.0)
    rc.offer("k", "m", 0.6, 25.0)  # too soon after the first publish → deferred
    assert rc.visible("k") == 0.4
    t = 30.0
    while rc.visible("k") != 0.95:
        rc.offer("k", "m", 0.95, t)
        t += 10
    assert t - 10 - 25.0 <= WL.min_interval_s


def test_small_changes_suppressed_until_they_accumulate() -> None:
    rc = RateController({"m": RatePolicy(min_interval_s=0, abs_change=0.05)})
    rc.offer("k", "m", 0.50, 0)
    for i, v in enumerate([0.51, 0.52, 0.53, 0.54], start=1):
        assert rc.offer("k", "m", v, i) is Decision.WITHIN_TOLERANCE
    assert rc.offer("k", "m", 0.55, 5) is Decision.PUBLISHED


def test_relative_threshold() -> None:
    rc = RateController({"m": RatePolicy(min_interval_s=0, rel_change=0.1)})
    rc.offer("k", "m", 1000, 0)
    assert rc.offer("k", "m", 1090, 1) is Decision.WITHIN_TOLERANCE
    assert rc.offer("k", "m", 1100, 2) is Decision.PUBLISHED


def test_crossing_needs_hysteresis_margin() -> None:
    rc = RateController({"m": RatePolicy(min_interval_s=0, thresholds=(0.7,), hysteresis=0.03)})
    rc.offer("k", "m", 0.65, 0)
    assert rc.offer("k", "m", 0.72, 1) is Decision.WITHIN_TOLERANCE  # over 0.7, within band
    assert rc.visible("k") == 0.65
    assert rc.offer("k", "m", 0.74, 2) is Decision.PUBLISHED
    assert rc.offer("k", "m", 0.68, 3) is Decision.WITHIN_TOLERANCE  # back under, within band
    assert rc.offer("k", "m", 0.66, 4) is Decision.PUBLISHED


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RatePolicy(thresholds=(0.9, 0.7))
    with pytest.raises(ValueError):
        RatePolicy(min_interval_s=-1)


def _status(t: float, cpu: float) -> NormalisedStatus:
    rep = MetricsReport(
        cluster="c1",
        timestamp=datetime.fromtimestamp(t, UTC),
        cpuCapacity=10,
        cpuUsage=cpu,
        memoryCapacity=10,
        memoryAvailable=9,
    )
    st = normalise(rep, t)
    assert isinstance(st, NormalisedStatus)
    return st


def test_status_damper_holds_values_and_refreshes_timestamps() -> None:
    d = StatusDamper()
    v0, ch0 = d.apply(_status(0, 50), 0)
    assert set(ch0) == set(v0.values)
    v1, ch1 = d.apply(_status(10, 51), 10)  # within 2 % of utilisation
    assert ch1 == [] and v1.cpu.utilisation == 0.5
    assert v1.values[r.CPU_UTILISATION].ts == 10  # confirmed at t=10
    v2, ch2 = d.apply(_status(20, 90), 20)  # real step, but interval not elapsed
    assert v2.cpu.utilisation == 0.5 and v2.values[r.CPU_UTILISATION].ts == 10
    v3, ch3 = d.apply(_status(30, 90), 30)
    assert v3.cpu.utilisation == 0.9 and r.CPU_UTILISATION in ch3 and r.WATER_LEVEL in ch3
