from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drods.monitor import holt_winters
from drods.monitor.forecast import (
    DAY,
    Forecaster,
    evaluate,
    forecast,
    forecasts,
    mape,
    resample,
    seasonal_naive_forecast,
)
from drods.monitor.series import AsyncSeriesStore, Point, SeriesStore

STEP = 300
SEASON = DAY // STEP


def diurnal(days: int = 7, seed: int = 42, noise: float = 0.03) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(days * SEASON)
    phase = 2 * np.pi * t / SEASON
    y = 0.5 + 0.2 * np.sin(phase) + 0.05 * np.sin(2 * phase) + 0.01 * t / SEASON
    return np.clip(y + rng.normal(0, noise, len(t)), 0.01, 1.0)


def test_holt_winters_beats_last_value_on_diurnal_series() -> None:
    y = diurnal()
    res = evaluate(y, holdout=SEASON, step_s=STEP)
    assert res["mape_model"] < res["mape_naive"]
    assert res["mape_model"] < 0.5 * res["mape_naive"]
    assert res["mape_model"] <= res["mape_seasonal_naive"] * 1.05
    assert res["mape_model"] < 0.08


def test_forecast_methods_and_shape() -> None:
    y = diurnal(days=3)
    hw = forecast(y, 12, step_s=STEP)
    assert hw.method == "holt_winters" and hw.values.shape == (12,)
    sn = forecast(y, 12, step_s=STEP, method="seasonal_naive")
    assert np.allclose(sn.values, y[-SEASON : -SEASON + 12])
    lv = forecast(y, 5, step_s=STEP, method="last_value")
    assert np.all(lv.values == y[-1])


def test_short_history_falls_back() -> None:
    assert forecast(np.array([0.5] * 20), 3, step_s=STEP).method == "holt"
    assert forecast(np.array([0.5, 0.6]), 3, step_s=STEP).method == "last_value"
    assert np.allclose(seasonal_naive_forecast(np.array([1.0, 2.0]), 3, season=5), 2.0)


def test_resample_averages_and_fills_gaps() -> None:
    pts = [(0.0, 1.0), (100.0, 3.0), (650.0, 5.0), (1250.0, 9.0)]
    t0, y = resample(pts, 300)
    assert t0 == 0
    assert list(y) == [2.0, 3.5, 5.0, 7.0, 9.0]  # empty slots interpolated
    with pytest.raises(ValueError):
        resample([], 300)


def test_mape_ignores_zero_actuals() -> None:
    assert mape(np.array([0.0, 2.0]), np.array([5.0, 1.0])) == 0.5
    assert np.isnan(mape(np.array([0.0]), np.array([1.0])))


def test_evaluate_validates_holdout() -> None:
    with pytest.raises(ValueError):
        evaluate(np.ones(10), holdout=10)


class FakeReader:
    def __init__(self, points: list[Point]) -> None:
        self.points = points
        self.calls = 0

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        self.calls += 1
        return [(t, v) for t, v in self.points if start <= t <= end] if cluster == "c1" else []


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def test_forecaster_caches_and_refits_on_schedule() -> None:
    y = diurnal(days=4)
    t0 = 1_700_006_400.0
    pts = [(t0 + i * STEP, float(v)) for i, v in enumerate(y)]
    now = pts[-1][0] + STEP
    clock = Clock(now)
    rd = FakeReader(pts)
    fc = Forecaster(rd, clock=clock, refit_every_s=3600)
    assert fc.water_level_in("c1", 30) is None  # nothing fitted yet
    assert await fc.refresh_due(["c1", "c2"]) == 1
    assert rd.calls == 2
    p = fc.water_level_in("c1", 60)
    assert p is not None and 0.0 <= p <= 1.0
    # one period later the forecast should look like the same time yesterday
    expected = y[-SEASON + 60 // 5]
    assert abs(p - expected) < 0.1
    assert fc.water_level_in("c1", 2 * 24 * 60) is None  # past the horizon
    assert fc.predict("c1", pts[0][0]) == pts[-1][1]  # the past: last known value
    # cached until the refit interval passes
    assert await fc.refresh_due(["c1"]) == 0 and rd.calls == 2
    clock.t += 3600
    assert await fc.refresh_due(["c1"]) == 1 and rd.calls == 3
    fleet = fc.fleet_water_level_in(60, {"c1": 10.0, "c2": 5.0})
    assert fleet == fc.water_level_in("c1", 60)
    assert fc.fleet_water_level_in(60, {"c2": 1.0}) is None
    fc.forget("c1")
    assert fc.water_level_in("c1", 60) is None


async def test_forecaster_reads_from_series_store(tmp_path: Path) -> None:
    """Wiring check: history written by the store feeds the forecaster through the async wrapper."""
    y = diurnal(days=3, seed=3)
    t0 = 1_700_006_400.0
    now = t0 + len(y) * STEP
    store = SeriesStore(tmp_path / "h.db", clock=lambda: now)
    store.append([("c1", "waterLevel", t0 + i * STEP, float(v)) for i, v in enumerate(y)])
    reader = AsyncSeriesStore(store)
    fc = Forecaster(reader, clock=lambda: now)
    assert await fc.refresh("c1")
    p = fc.water_level_in("c1", 120)
    assert p is not None and abs(p - y[-SEASON + 24]) < 0.1
    assert not await fc.refresh("unknown")
    await reader.close()


class FleetReader:
    """Each cluster's own series, as far as the clock has gone."""

    def __init__(self, series: dict[str, list[Point]], clock: Clock) -> None:
        self.series = series
        self.clock = clock

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        return [(t, v) for t, v in self.series.get(cluster, []) if start <= t <= min(end, self.clock())]


async def test_a_fleet_is_fitted_together_and_searched_once_a_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clusters due are fitted in one search, not one each; an hour later their models are brought up
    to date with the parameters found (no search), and a day later searched again."""
    t0 = 1_700_006_400.0
    series = {f"c{i}": [(t0 + k * STEP, float(v)) for k, v in enumerate(diurnal(days=5, seed=i))] for i in range(3)}
    clock = Clock(t0 + 3 * DAY)
    fc = Forecaster(FleetReader(series, clock), clock=clock, refit_every_s=3600, search_every_s=DAY)
    searched: list[int] = []
    refitted: list[int] = []
    search, refit = holt_winters.search, holt_winters.refit
    monkeypatch.setattr(holt_winters, "search", lambda ys, m: searched.append(len(ys)) or search(ys, m))
    monkeypatch.setattr(holt_winters, "refit", lambda ys, m, like: refitted.append(len(ys)) or refit(ys, m, like))

    assert await fc.refresh_due(["c0", "c1", "c2", "gone"]) == 3
    assert searched == [3] and refitted == []
    first = {c: fc._cache[(c, "waterLevel")] for c in series}
    alone = Forecaster(FleetReader(series, clock), clock=clock)
    assert await alone.refresh("c1")
    assert fc.water_level_in("c1", 90) == alone.water_level_in("c1", 90)  # together = one by one

    clock.t += 3600
    assert await fc.refresh_due(series) == 3
    assert searched == [3, 1] and refitted == [3]  # (the [1]: the one-by-one forecaster's search)
    for c, before in first.items():
        now = fc._cache[(c, "waterLevel")]
        assert now.model is not None and before.model is not None
        assert (now.model.alpha, now.model.gamma, now.model.phi) == (before.model.alpha, before.model.gamma,
                                                                     before.model.phi)
        assert now.forecast.start == before.forecast.start + 3600 and now.searched_at == before.searched_at

    clock.t += DAY
    assert await fc.refresh_due(series) == 3
    assert searched == [3, 1, 3] and refitted == [3]
    assert all(fc._cache[(c, "waterLevel")].searched_at == clock.t for c in series)


def test_an_earlier_fit_of_another_model_is_refused() -> None:
    y = diurnal(days=3)
    holt = holt_winters.fit(y[:40], 1)
    with pytest.raises(ValueError, match="another model"):
        forecasts([(0.0, y)], 12, step_s=STEP, like=[holt])
    [(fc, fit)] = forecasts([(0.0, y[:40])], 12, step_s=STEP, like=[holt])
    assert fc.method == "holt" and fit is not None and fit.alpha == holt.alpha
