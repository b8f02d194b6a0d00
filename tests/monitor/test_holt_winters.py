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
