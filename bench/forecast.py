"""Forecast accuracy bench: Holt-Winters vs seasonal-naive vs last-value (MAPE on held-out data).

Synthetic utilisation traces: a daily cycle (fundamental + 2nd harmonic), a slow trend, a
weekend dip on some traces, Gaussian noise; 7 days of 5-min samples. Each trace is scored on
a held-out last day (and on a held-out last hour, where last-value is at its strongest).
No real utilisation trace shipped in a PyPI package was found quickly, so none is included.

``--clusters N`` times a forecaster's refresh of a fleet: N clusters' histories of ``--days`` days
forecast as `Forecaster` does it (its parameter search, the N fitted together), as it did it before
(each cluster searched alone), and as its hourly refits between searches do it (the parameters
found reused); CPU seconds of the process for each, and the mean gap between the reused parameters'
forecasts and the searched ones' over the next day (the hour's new history fitted both ways).

Prints the conditions, then one final JSON line of figures.

    python bench/forecast.py [--traces 20] [--days 7] [--seed 0] [--clusters 32]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drods.monitor import holt_winters  # noqa: E402
from drods.monitor.forecast import DAY, evaluate, forecast, forecasts, mape, model_season  # noqa: E402

STEP = 300
T = TypeVar("T")
SEASON = DAY // STEP


def trace(rng: np.random.Generator, days: int, noise: float, weekend: bool) -> np.ndarray:
    t = np.arange(days * SEASON)
    phase = 2 * np.pi * t / SEASON + rng.uniform(0, 2 * np.pi)
    base = rng.uniform(0.4, 0.6)
    amp = rng.uniform(0.1, 0.2)  # keeps the trough well above 0, where MAPE is meaningful
    y = base + amp * np.sin(phase) + 0.3 * amp * np.sin(2 * phase) + rng.uniform(-0.02, 0.02) * t / SEASON
    if weekend:
        # last-but-one and last-but-two days run 20 % lighter (a weekend before the held-out day)
        day_idx = t // SEASON
        y = np.where((day_idx == days - 3) | (day_idx == days - 2), y * 0.8, y)
    return np.clip(y + rng.normal(0, noise, len(t)), 0.01, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=20)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clusters", type=int, default=32, help="a fleet's refresh, timed (0: none)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"conditions: python {platform.python_version()}, Holt-Winters of drods.monitor.holt_winters, "
        f"numpy {np.__version__}; {args.traces} synthetic traces per noise level, {args.days} days of "
        f"{STEP}s samples, daily season ({SEASON} steps), holdout = last day and last hour; seed {args.seed}"
    )
    results: dict[str, dict[str, float]] = {}
    fit_s: list[float] = []
    wins = total = 0
    group_wins: dict[str, str] = {}
    for noise in (0.02, 0.05):
        for weekend in (False, True):
            rows_day, rows_hour = [], []
            gw = 0
            for _ in range(args.traces):
                y = trace(rng, args.days, noise, weekend)
                t0 = time.perf_counter()
                forecast(y[:-SEASON], SEASON, step_s=STEP)
                fit_s.append(time.perf_counter() - t0)
                d = evaluate(y, SEASON, step_s=STEP)
                h = evaluate(y, 12, step_s=STEP)
                rows_day.append(d)
                rows_hour.append(h)
                gw += d["mape_model"] < d["mape_naive"]
            wins += gw
            total += args.traces
            key = f"noise{noise:g}{'_weekend' if weekend else ''}"
            group_wins[key] = f"{gw}/{args.traces}"
            for label, rows in (("day", rows_day), ("hour", rows_hour)):
                results[f"{key}_{label}"] = {
                    m: round(float(np.mean([r[m] for r in rows])), 4)
                    for m in ("mape_model", "mape_seasonal_naive", "mape_last_value")
                }
                print(f"{key:22s} holdout={label:4s} {results[f'{key}_{label}']}")
    fit = np.array(fit_s)
    fleet = refresh(rng, args.days, args.clusters) if args.clusters > 0 else {}
    print(
        json.dumps(
            {
                "bench": "forecast",
                "traces": total,
                "samples_per_trace": args.days * SEASON,
                "fit_ms_p50": round(float(np.percentile(fit, 50)) * 1e3, 1),
                "fit_ms_max": round(float(fit.max()) * 1e3, 1),
                "model_beats_last_value_day": f"{wins}/{total}",
                "model_beats_last_value_day_by_group": group_wins,
                "mape": results,
                **fleet,
            }
        )
    )


def _cpu(work: Callable[[], T]) -> tuple[float, T]:
    t0 = time.process_time()
    out = work()
    return time.process_time() - t0, out


def refresh(rng: np.random.Generator, days: int, clusters: int) -> dict[str, object]:
    """A fleet's refresh three ways (see the module's docstring); prints and returns the figures."""
    ys = np.stack([trace(rng, days, 0.03, weekend=bool(i % 4 == 0)) for i in range(clusters)])
    now = ys[:, :-12]  # the history at the last search, an hour (12 steps) before the refit's
    one_s, _ = _cpu(lambda: [forecast(y, SEASON, step_s=STEP) for y in now])
    search_s, done = _cpu(lambda: forecasts([(0.0, y) for y in now], SEASON, step_s=STEP))
    later = [(0.0, y) for y in ys]
    # an hour's more history can cross into another model (two days: Holt's trend → Holt-Winters), whose
    # parameters are searched again, as the product's forecaster does
    fits = [fit if fit is not None and len(fit.season) == model_season(ys.shape[1], SEASON) else None
            for _, fit in done]
    refit_s, reused = _cpu(lambda: forecasts(later, SEASON, step_s=STEP, like=fits))
    fresh = forecasts(later, SEASON, step_s=STEP)
    gap = float(np.mean([mape(f.values, r.values) for (f, _), (r, _) in zip(fresh, reused, strict=True)]))
    figures: dict[str, object] = {"fleet_clusters": clusters, "fleet_one_by_one_cpu_s": round(one_s, 3),
               "fleet_search_cpu_s": round(search_s, 3), "fleet_refit_cpu_s": round(refit_s, 3),
               "fleet_refit_vs_search_mape": round(gap, 5)}
    print(f"fleet of {clusters} clusters, {days} days each (search batches of "
          f"{holt_winters.SEARCH_CELLS} candidate-series): {figures}")
    return figures


if __name__ == "__main__":
    main()
