"""The NumPy Holt-Winters (`drods.monitor.holt_winters`): it recovers what a series is made of, it
forecasts about as well as statsmodels' fit of the same model, and forecasting loads neither
statsmodels nor pandas nor scipy into the process (their import cost `drods serve` 109 MiB)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from drods.monitor import holt_winters
from drods.monitor.forecast import mape
from tests.monitor.test_forecast import SEASON, diurnal


def test_a_noiseless_season_and_trend_are_forecast_almost_exactly() -> None:
    y = diurnal(days=5, seed=0, noise=0.0)
    truth = diurnal(days=6, seed=0, noise=0.0)[len(y):]
    fitted = holt_winters.fit(y, SEASON)
    assert mape(truth, fitted.forecast(SEASON)) < 0.01
    assert 0 <= fitted.beta <= fitted.alpha <= 1 and 0 <= fitted.gamma <= 1 - fitted.alpha
    assert holt_winters.PHI_BOUNDS[0] <= fitted.phi <= holt_winters.PHI_BOUNDS[1]


def test_without_a_season_a_damped_trend_goes_on_and_levels_off() -> None:
    y = 10 + 0.5 * np.arange(40.0)
    out = holt_winters.fit(y, 1).forecast(200)
    assert out[0] == pytest.approx(y[-1] + 0.5, abs=0.1)  # the next step continues the line
    assert np.all(np.diff(out) > 0) and out[-1] - out[-2] < 0.5 * (out[1] - out[0])  # the trend damps


def test_series_searched_together_get_what_each_gets_searched_alone() -> None:
    ys = np.stack([diurnal(days=3, seed=seed, noise=0.02 * (1 + seed)) for seed in range(3)])
    together = holt_winters.search(ys, SEASON)
    for y, fit in zip(ys, together, strict=True):
        alone = holt_winters.fit(y, SEASON)
        assert (fit.alpha, fit.beta, fit.gamma, fit.phi, fit.sse) == (alone.alpha, alone.beta, alone.gamma, alone.phi,
                                                                      alone.sse)
        np.testing.assert_array_equal(fit.forecast(SEASON), alone.forecast(SEASON))
    assert len({(f.alpha, f.gamma) for f in together}) > 1  # each its own parameters, not one for all


def test_a_refit_keeps_the_parameters_and_follows_the_new_history() -> None:
    y = diurnal(days=5, seed=4, noise=0.03)
    searched = holt_winters.fit(y[:-12], SEASON)
    same = holt_winters.refit(y[None, :-12], SEASON, [searched])[0]
    assert (same.level, same.trend, same.sse) == pytest.approx((searched.level, searched.trend, searched.sse))
    later = holt_winters.refit(y, SEASON, [searched])[0]  # an hour more of history, the same parameters
    assert (later.alpha, later.beta, later.gamma, later.phi) == (searched.alpha, searched.beta, searched.gamma,
                                                                 searched.phi)
    assert later.n == len(y) and later.level != searched.level
    fresh = holt_winters.fit(y, SEASON)
    assert mape(fresh.forecast(SEASON), later.forecast(SEASON)) < 0.02  # about what a new search forecasts
    with pytest.raises(ValueError, match="one earlier fit for each series"):
        holt_winters.refit(np.stack([y, y]), SEASON, [searched])


def test_it_forecasts_about_as_well_as_statsmodels_fit_of_the_same_model() -> None:
    holt = pytest.importorskip("statsmodels.tsa.holtwinters")
    ours, theirs = [], []
    for seed in range(3):
        y = diurnal(days=7, seed=seed, noise=0.03)
        train, test = y[:-SEASON], y[-SEASON:]
        ours.append(mape(test, holt_winters.fit(train, SEASON).forecast(SEASON)))
        model = holt.ExponentialSmoothing(train, trend="add", damped_trend=True, seasonal="add",
                                          seasonal_periods=SEASON, initialization_method="heuristic")
        theirs.append(mape(test, np.asarray(model.fit().forecast(SEASON))))
    assert np.mean(ours) <= 1.15 * np.mean(theirs) + 0.005, (ours, theirs)


def test_forecasting_loads_none_of_statsmodels_pandas_or_scipy() -> None:
    script = (
        "import sys, numpy as np\n"
        "from drods.monitor.forecast import forecast\n"
        "y = 0.5 + 0.2 * np.sin(np.arange(3 * 288) * 2 * np.pi / 288)\n"
        "assert forecast(y, 12).method == 'holt_winters'\n"
        "print(sorted(m for m in ('statsmodels', 'pandas', 'scipy', 'patsy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
