"""One contract, two backends: every query the history API and the forecaster make gives the same
answer from the SQLite series file and from a real Prometheus, and both match the contract's
reference (means over epoch-aligned step buckets of the whole-second samples in [start, end])."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

import numpy as np
import pytest

from drods.monitor.forecast import Forecaster
from drods.monitor.metric_history import MetricHistory
from drods.monitor.report import CPU_UTILISATION, NETWORK_IN, WATER_LEVEL
from drods.monitor.series import Point, Sample
from tests.monitor_history.conftest import T0, Clock

DAY = 86_400


def reference(samples: Iterable[Sample], cluster: str, metric: str, start: float, end: float,
              step: float) -> list[Point]:
    """The contract, computed directly: later sample of a second wins; bucket means."""
    by_second: dict[int, float] = {}
    for c, m, t, v in samples:
        if c == cluster and m == metric and math.isfinite(v):
            by_second[int(t)] = v
    istep = max(int(round(step)), 1)
    buckets: dict[int, list[float]] = {}
    for t, v in by_second.items():
        if start <= t <= end:
            buckets.setdefault(t - t % istep, []).append(v)
    return [(float(b), sum(vs) / len(vs)) for b, vs in sorted(buckets.items())]


def assert_same(got: list[Point], want: list[Point]) -> None:
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-9, abs=1e-12)


def irregular(seed: int = 7) -> list[Sample]:
    """Three hours of two clusters × three metrics at irregular times, with same-second repeats."""
    rnd = random.Random(seed)
    out: list[Sample] = []
    for cluster in ("c-1", "c/2 \"quoted\""):
        for metric in (WATER_LEVEL, CPU_UTILISATION, NETWORK_IN):
            t = T0 - 3 * 3600 + rnd.random()
            while t < T0:
                out.append((cluster, metric, t, rnd.random() * (100 if metric == NETWORK_IN else 1)))
                if rnd.random() < 0.1:  # a second report in the same second: the later wins
                    out.append((cluster, metric, math.floor(t) + 0.99, rnd.random()))
                t += rnd.choice((0.4, 1, 2, 5, 13, 30, 47))
    out.append(("c-1", WATER_LEVEL, T0 - 100.5, math.nan))  # non-finite: not stored
    return out


QUERIES = [
    (T0 - 3 * 3600, T0, 60),
    (T0 - 3 * 3600 + 0.5, T0 - 17.3, 60),  # buckets cut at both ends
    (T0 - 3 * 3600, T0, 1),  # 10,800 points: split into several range queries
    (T0 - 2 * 3600 + 11, T0 - 3600 + 29, 7),  # a step that does not divide a minute
    (T0 - 3 * 3600 - 30, T0 + 30, 300),
    (T0 - 3 * 3600, T0, 3600),
    (T0 - 1800, T0, 1.4),  # rounds to 1 s
    (T0 - 5000.2, T0 - 100.7, DAY),  # one bucket, cut at both ends
    (T0 - 90, T0 - 90, 10),  # one second
    (T0 + 100, T0 + 1000, 60),  # nothing there
]


async def test_irregular_samples_answer_the_reference(history: MetricHistory) -> None:
    samples = irregular()
    cut = len(samples) // 2
    while int(samples[cut][2]) == int(samples[cut - 1][2]):  # a same-second pair stays in one write
        cut += 1
    assert await history.append(samples[:cut]) > 0
    await history.append(samples[cut:])
    for cluster in ("c-1", "c/2 \"quoted\""):
        for metric in (WATER_LEVEL, NETWORK_IN):
            for start, end, step in QUERIES:
                got = await history.query(cluster, metric, start, end, step)
                assert_same(got, reference(samples, cluster, metric, start, end, step))


async def test_unknown_series_and_bad_step(history: MetricHistory) -> None:
    await history.append([("known", WATER_LEVEL, T0 - 10, 0.5)])
    assert await history.query("unknown", WATER_LEVEL, T0 - 60, T0, 10) == []
    assert await history.query("known", CPU_UTILISATION, T0 - 60, T0, 10) == []
    assert await history.query("known", WATER_LEVEL, T0, T0 - 60, 10) == []
    assert await history.query("known", WATER_LEVEL, T0 - 60, T0, 10) == [(T0 - 10, 0.5)]
    with pytest.raises(ValueError):
        await history.query("known", WATER_LEVEL, T0 - 60, T0, 0)


def daily(days: int = 9, step_s: int = 300) -> list[Sample]:
    """``days`` of 5-minute water levels with a daily cycle and noise, ending at T0."""
    rnd = random.Random(3)
    out: list[Sample] = []
    for k in range(days * DAY // step_s):
        t = T0 - days * DAY + k * step_s
        v = 0.5 + 0.3 * math.sin(2 * math.pi * (t % DAY) / DAY) + rnd.gauss(0, 0.02)
        out.append(("daily", WATER_LEVEL, t, min(max(v, 0.0), 1.0)))
    return out


async def test_long_history_after_maintenance(history: MetricHistory, clock: Clock) -> None:
    """Nine days: SQLite rolls older samples into 1-minute and 1-hour tiers, Prometheus keeps them
    raw; queries whose step is a multiple of the tier's step answer the same."""
    samples = daily()
    await history.append(samples)
    await history.maintain(clock())
    cases = [(T0 - 9 * DAY, T0, 3600), (T0 - 7 * DAY, T0, 300), (T0 - DAY - 1234, T0, 600),
             (T0 - 3 * DAY, T0 - 2 * DAY, 86_400)]
    for start, end, step in cases:
        assert_same(await history.query("daily", WATER_LEVEL, start, end, step),
                    reference(samples, "daily", WATER_LEVEL, start, end, step))


async def test_forecast_is_the_same_from_both(both: tuple[MetricHistory, MetricHistory], clock: Clock) -> None:
    samples = daily()
    forecasts = []
    for h in both:
        await h.append(samples)
        await h.maintain(clock())
        fc = Forecaster(h, clock=clock)
        assert await fc.refresh("daily")
        forecasts.append(fc)
    a, b = forecasts
    assert a._cache[("daily", WATER_LEVEL)].forecast.method == "holt_winters"
    pa = np.array([a.water_level_in("daily", m) for m in range(5, 24 * 60, 5)], dtype=float)
    pb = np.array([b.water_level_in("daily", m) for m in range(5, 24 * 60, 5)], dtype=float)
    assert np.isfinite(pa).all()
    np.testing.assert_allclose(pa, pb, rtol=1e-6, atol=1e-9)
    # and it learnt the cycle (0.5 + 0.3 sin(day fraction), T0 at midnight): high at 06:00, low at 18:00
    assert pa[6 * 12 - 1] == pytest.approx(0.8, abs=0.08) and pa[18 * 12 - 1] == pytest.approx(0.2, abs=0.08)
