"""Load forecasting for pre-allocation before peaks (SPEC F6) and predictive placement (A5).

Cluster load is dominated by a daily cycle, so the model is additive Holt-Winters
(`drods.monitor.holt_winters`: damped additive trend + additive daily season) fitted on
history resampled to a fixed step. It is only worth using if it beats the trivial forecasts,
so `evaluate` always reports it next to two baselines on held-out data:

* last value — "tomorrow looks like now";
* seasonal naive — "tomorrow looks like today at the same hour".

Searching a model's parameters costs ~85 ms of CPU for a week of 5-min samples alone, ~20 ms
fitted with other clusters, and bringing its states up to date with parameters already found
well under 1 ms (`python bench/forecast.py --clusters 256`); so `Forecaster` fits on a schedule
in a worker thread, searches once a day, and serves predictions from a cached forecast path: the
scheduler's hot path is a dictionary lookup.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from drods.monitor import holt_winters
from drods.monitor.report import WATER_LEVEL
from drods.monitor.series import Point, SeriesReader

Method = Literal["holt_winters", "seasonal_naive", "last_value"]
DAY = 86_400


@dataclass(frozen=True, slots=True)
class Forecast:
    """``values[k]`` predicts time ``start + k * step_s``; ``method`` is what was actually used
    (Holt-Winters falls back to simpler models when history is too short)."""

    start: float
    step_s: float
    values: np.ndarray
    method: str

    def at(self, t: float) -> float | None:
        k = int(round((t - self.start) / self.step_s))
        if k < 0:
            k = 0
        if k >= len(self.values):
            return None
        return float(self.values[k])


def resample(points: Iterable[Point], step_s: float) -> tuple[float, np.ndarray]:
    """Average ``(t, v)`` points into a regular grid aligned to ``step_s``; interpolate gaps.

    Returns (time of the first slot, values). Raises ValueError on an empty series.
    """
    pts = np.asarray(list(points), dtype=float)
    if pts.size == 0:
        raise ValueError("empty series")
    t, v = pts[:, 0], pts[:, 1]
    slots = np.floor(t / step_s).astype(np.int64)
    first = int(slots.min())
    idx = slots - first
    n = int(idx.max()) + 1
    sums = np.bincount(idx, weights=v, minlength=n)
    counts = np.bincount(idx, minlength=n)
    out = np.full(n, np.nan)
    have = counts > 0
    out[have] = sums[have] / counts[have]
    if not have.all():
        x = np.arange(n)
        out = np.interp(x, x[have], out[have])
    return first * step_s, out


def mape(actual: np.ndarray, predicted: np.ndarray, eps: float = 1e-9) -> float:
    """Mean absolute percentage error (as a fraction), ignoring points where actual ≈ 0."""
    a, p = np.asarray(actual, dtype=float), np.asarray(predicted, dtype=float)
    mask = np.abs(a) > eps
    if not mask.any():
        return math.nan
    return float(np.mean(np.abs(p[mask] - a[mask]) / np.abs(a[mask])))


def last_value_forecast(y: np.ndarray, horizon: int) -> np.ndarray:
    return np.full(horizon, float(y[-1]))


def seasonal_naive_forecast(y: np.ndarray, horizon: int, season: int) -> np.ndarray:
    if season < 1 or len(y) < season:
        return last_value_forecast(y, horizon)
    last = y[-season:]
    return np.array([last[k % season] for k in range(horizon)], dtype=float)


def model_season(n: int, season: int) -> int | None:
    """The season length of the model ``n`` steps of history support: ``season`` (Holt-Winters, with
    two periods), 1 (Holt's damped trend alone, with ten steps) or None (too little to fit)."""
    if season >= 2 and n >= 2 * season:
        return season
    return 1 if n >= 10 else None


def holt_winters_forecasts(ys: np.ndarray, horizon: int, season: int,
                           like: Sequence[holt_winters.Fit] | None = None,
                           ) -> tuple[np.ndarray, list[str], list[holt_winters.Fit | None]]:
    """Fit and forecast series of one length at once (series × steps): the values (series ×
    ``horizon``), the method used for each, and each fit (None where there was none). With ``like``
    (a fit of the same model for each series) the parameters are reused, not searched."""
    ys = np.atleast_2d(np.asarray(ys, dtype=float))
    m = model_season(ys.shape[1], season)
    if m is None:
        return np.repeat(ys[:, -1:], horizon, axis=1), ["last_value"] * len(ys), [None] * len(ys)
    fits = holt_winters.refit(ys, m, like) if like is not None else holt_winters.search(ys, m)
    values = np.stack([f.forecast(horizon) for f in fits])
    methods = ["holt_winters" if m > 1 else "holt"] * len(ys)
    out: list[holt_winters.Fit | None] = list(fits)
    for j in np.flatnonzero(~np.isfinite(values).all(axis=1)).tolist():
        values[j], methods[j], out[j] = seasonal_naive_forecast(ys[j], horizon, season), "seasonal_naive", None
    return values, methods, out


def _as_regular(series: Sequence[Point] | np.ndarray, step_s: float) -> tuple[float, np.ndarray]:
    if isinstance(series, np.ndarray) and series.ndim == 1:
        return 0.0, series.astype(float)
    return resample(series, step_s)


def forecast(
    series: Sequence[Point] | np.ndarray,
    horizon: int,
    *,
    step_s: float = 300.0,
    period_s: float = DAY,
    method: Method = "holt_winters",
    clip: tuple[float, float] | None = None,
) -> Forecast:
    """Predict ``horizon`` steps after the end of ``series`` (points, or an already regular
    1-D array sampled every ``step_s``)."""
    return forecasts([_as_regular(series, step_s)], horizon, step_s=step_s, period_s=period_s,
                     method=method, clip=clip)[0][0]


def forecasts(
    histories: Sequence[tuple[float, np.ndarray]],
    horizon: int,
    *,
    step_s: float = 300.0,
    period_s: float = DAY,
    method: Method = "holt_winters",
    clip: tuple[float, float] | None = None,
    like: Sequence[holt_winters.Fit | None] | None = None,
) -> list[tuple[Forecast, holt_winters.Fit | None]]:
    """`forecast` for many regular series (each: the time of its first step, its values) with the
    fit behind each; Holt-Winters fits the series of one length together. ``like``: for each series
    an earlier fit of the model its length supports (`model_season`) whose parameters are reused
    instead of searched, or None."""
    if horizon < 1:
        raise ValueError("horizon must be >= 1")
    season = max(int(round(period_s / step_s)), 1)
    earlier = list(like) if like is not None else [None] * len(histories)
    groups: dict[tuple[int, bool], list[int]] = {}
    for i, (_, y) in enumerate(histories):
        fit = earlier[i]
        if fit is not None and len(fit.season) != model_season(len(y), season):
            raise ValueError("an earlier fit of another model than the history supports")
        groups.setdefault((len(y), fit is not None), []).append(i)
    out: dict[int, tuple[Forecast, holt_winters.Fit | None]] = {}
    for (n, reuse), rows in groups.items():
        ys = np.stack([histories[i][1] for i in rows])
        if method == "holt_winters":
            reused = [f for i in rows if (f := earlier[i]) is not None] if reuse else None
            values, methods, fits = holt_winters_forecasts(ys, horizon, season, reused)
        else:
            one = last_value_forecast if method == "last_value" else (
                lambda y, h: seasonal_naive_forecast(y, h, season))
            values, methods, fits = np.stack([one(y, horizon) for y in ys]), [method] * len(rows), [None] * len(rows)
        if clip is not None:
            values = np.clip(values, clip[0], clip[1])
        for j, i in enumerate(rows):
            out[i] = (Forecast(histories[i][0] + n * step_s, step_s, values[j], methods[j]), fits[j])
    return [out[i] for i in range(len(histories))]


def evaluate(
    series: Sequence[Point] | np.ndarray,
    holdout: int,
    *,
    step_s: float = 300.0,
    period_s: float = DAY,
) -> dict[str, float]:
    """Fit on all but the last ``holdout`` steps and score on them (MAPE as a fraction).

    ``mape_naive`` is the last-value baseline; the seasonal-naive one is reported too.
    """
    _, y = _as_regular(series, step_s)
    if holdout < 1 or holdout >= len(y):
        raise ValueError("holdout must be between 1 and len(series) - 1")
    train, test = y[:-holdout], y[-holdout:]
    model = forecast(train, holdout, step_s=step_s, period_s=period_s, method="holt_winters")
    sn = forecast(train, holdout, step_s=step_s, period_s=period_s, method="seasonal_naive")
    lv = forecast(train, holdout, step_s=step_s, period_s=period_s, method="last_value")
    m_lv = mape(test, lv.values)
    return {
        "mape_model": mape(test, model.values),
        "mape_naive": m_lv,
        "mape_seasonal_naive": mape(test, sn.values),
        "mape_last_value": m_lv,
    }


@dataclass(frozen=True, slots=True)
class _Fitted:
    forecast: Forecast
    fitted_at: float
    last_t: float
    last_v: float
    model: holt_winters.Fit | None  # its parameters are reused until ``searched_at`` + the search interval
    searched_at: float


@dataclass(frozen=True, slots=True)
class _History:
    start: float  # the time of the first step of ``values``
    values: np.ndarray  # resampled to the forecaster's step
    last: Point  # the last sample as read


def _default_clip(metric: str) -> tuple[float, float]:
    if metric == WATER_LEVEL or metric.endswith(".utilisation"):
        return (0.0, 1.0)
    return (0.0, math.inf)


class Forecaster:
    """Cached per-(cluster, metric) forecasts, refitted every ``refit_every_s``; the model's parameters
    are searched every ``search_every_s`` and reused by the refits between (the states follow the new
    history; the parameters of a week's history barely move in a day, and a search costs over a
    hundred refits).

    `refresh_due` (async, from a periodic task) does the I/O and fitting — the clusters due fitted
    together, ``REFRESH_BATCH`` at a time, in a worker thread; `predict`, `water_level_in` and
    `fleet_water_level_in` are synchronous lookups for the scheduler.
    """

    REFRESH_BATCH = 256  # histories read before they are fitted together (a week of 5-min steps: 16 KiB each)

    def __init__(
        self,
        reader: SeriesReader,
        *,
        clock: Callable[[], float] = time.time,
        step_s: float = 300.0,
        period_s: float = DAY,
        history_s: float = 7 * DAY,
        horizon_s: float = DAY,
        refit_every_s: float = 3600.0,
        search_every_s: float = DAY,
        method: Method = "holt_winters",
    ) -> None:
        self.reader = reader
        self.clock = clock
        self.step_s = step_s
        self.period_s = period_s
        self.history_s = history_s
        self.horizon_s = horizon_s
        self.refit_every_s = refit_every_s
        self.search_every_s = search_every_s
        self.method: Method = method
        self._cache: dict[tuple[str, str], _Fitted] = {}

    def _reusable(self, cluster: str, metric: str, n: int, now: float) -> _Fitted | None:
        """The earlier fit whose parameters a refit of ``n`` steps reuses: searched recently, same model."""
        f = self._cache.get((cluster, metric))
        if f is None or f.model is None or now - f.searched_at >= self.search_every_s:
            return None
        season = max(int(round(self.period_s / self.step_s)), 1)
        return f if len(f.model.season) == model_season(n, season) else None

    def _fit(self, histories: dict[str, _History], metric: str, now: float) -> dict[str, _Fitted]:
        clusters = list(histories)
        earlier = [self._reusable(c, metric, len(histories[c].values), now) for c in clusters]
        done = forecasts([(histories[c].start, histories[c].values) for c in clusters],
                         max(int(math.ceil(self.horizon_s / self.step_s)), 1), step_s=self.step_s,
                         period_s=self.period_s, method=self.method, clip=_default_clip(metric),
                         like=[e.model if e is not None else None for e in earlier])
        return {c: _Fitted(fc, now, *histories[c].last, model, e.searched_at if e is not None else now)
                for c, e, (fc, model) in zip(clusters, earlier, done, strict=True)}

    async def refresh(self, cluster: str, metric: str = WATER_LEVEL) -> bool:
        """Fetch history and refit now; False when there is no history yet."""
        return await self._refresh([cluster], metric) == 1

    async def _refresh(self, clusters: Sequence[str], metric: str) -> int:
        now = self.clock()
        fitted = 0
        batch: dict[str, _History] = {}
        for i, cluster in enumerate(clusters):
            points = await self.reader.query(cluster, metric, now - self.history_s, now, self.step_s)
            if points:
                batch[cluster] = _History(*resample(points, self.step_s), points[-1])
            if batch and (len(batch) >= self.REFRESH_BATCH or i == len(clusters) - 1):
                for c, f in (await asyncio.to_thread(self._fit, batch, metric, now)).items():
                    self._cache[(c, metric)] = f
                fitted, batch = fitted + len(batch), {}
        return fitted

    def is_due(self, cluster: str, metric: str = WATER_LEVEL) -> bool:
        f = self._cache.get((cluster, metric))
        return f is None or self.clock() - f.fitted_at >= self.refit_every_s

    async def refresh_due(self, clusters: Iterable[str], metric: str = WATER_LEVEL) -> int:
        """Refit every cluster whose model is missing or older than ``refit_every_s``."""
        return await self._refresh([c for c in clusters if self.is_due(c, metric)], metric)

    def predict(self, cluster: str, at: float, metric: str = WATER_LEVEL) -> float | None:
        f = self._cache.get((cluster, metric))
        if f is None:
            return None
        if at <= f.last_t:
            return f.last_v
        return f.forecast.at(at)

    def fit_of(self, cluster: str, metric: str = WATER_LEVEL) -> tuple[str, float] | None:
        """The method and the time of the forecast answered for ``cluster`` (None: none yet)."""
        f = self._cache.get((cluster, metric))
        return None if f is None else (f.forecast.method, f.fitted_at)

    def water_level_in(self, cluster: str, minutes: float) -> float | None:
        """Forecast water level ``minutes`` from now (None: no model yet, or past the horizon)."""
        return self.predict(cluster, self.clock() + minutes * 60.0)

    def modelled_water_level_in(self, cluster: str, minutes: float) -> float | None:
        """`water_level_in`, but None while the model is only the last value: with too little history
        the forecast is a flat line at the latest sample, which predicts no peak (auto-ops acts on this)."""
        f = self._cache.get((cluster, WATER_LEVEL))
        if f is None or f.forecast.method == "last_value":
            return None
        return self.water_level_in(cluster, minutes)

    def fleet_water_level_in(self, minutes: float, weights: Mapping[str, float]) -> float | None:
        """Capacity-weighted fleet forecast; ``weights`` are e.g. CPU capacities per cluster."""
        num = den = 0.0
        for c, w in weights.items():
            p = self.water_level_in(c, minutes)
            if p is not None and w > 0:
                num += p * w
                den += w
        return None if den == 0 else num / den

    def forget(self, cluster: str) -> None:
        for k in [k for k in self._cache if k[0] == cluster]:
            del self._cache[k]
