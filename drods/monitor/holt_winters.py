"""Holt-Winters with a damped additive trend and an additive season (ETS(A,Ad,A)), fitted by least
squares, in NumPy.

statsmodels' ``ExponentialSmoothing`` fitted it before. Importing it brought pandas, patsy and
scipy.stats into every process that forecasts: an idle ``drods serve`` over 10 members went from 166
to 275 MiB of RSS at its first forecast refresh (docs/performance.md). The model itself is a short recursion
in its error-correction form; the search runs it for hundreds of candidate parameter sets at once (one
pass over the history with an array per state), then twice more on a finer grid around the best.

Both run many series of one length at once (candidates × series): a fleet's clusters are fitted
together, not one by one, because one series' pass is mostly NumPy's per-call cost, not arithmetic.
`refit` runs the recursion with parameters searched earlier — the states are brought up to date for
a fraction of a search's cost, which is what `drods.monitor.forecast.Forecaster` does between searches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

# the grids searched first: α; β and γ as fractions of their bounds (0 ≤ β ≤ α, 0 ≤ γ ≤ 1 − α); φ
COARSE_ALPHA = (0.02, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 0.99)
COARSE_BETA = (0.0, 0.02, 0.1, 0.3)
COARSE_GAMMA = (0.0, 0.05, 0.2, 0.5)
COARSE_PHI = (0.8, 0.9, 0.95, 0.99)
PHI_BOUNDS = (0.8, 0.995)
REFINEMENTS = 2  # finer grids around the best, each with half the last one's steps
# the states a pass holds are season × candidates × series floats: the series searched at once are
# bounded by this many candidate-series (2**13: 16 series of the first grid's 512, 19 MiB a day of 5-min steps)
SEARCH_CELLS = 2**13
REFIT_SERIES = 4096  # series brought up to date at once (one candidate each)


@dataclass(frozen=True, slots=True)
class Fit:
    """The fitted parameters and the states after the last observation."""

    alpha: float
    beta: float  # the trend's smoothing (Hyndman's β = α β*)
    gamma: float
    phi: float
    level: float
    trend: float
    season: np.ndarray  # the latest estimate for each phase, indexed by time modulo the period
    n: int  # observations fitted
    sse: float

    def forecast(self, horizon: int) -> np.ndarray:
        """Steps 1..``horizon`` after the last observation."""
        h = np.arange(1, horizon + 1)
        damped = self.phi * (1 - self.phi ** h) / (1 - self.phi)
        phases = (self.n + h - 1) % len(self.season)
        out: np.ndarray = self.level + damped * self.trend + self.season[phases]
        return out


@dataclass(frozen=True, slots=True)
class _Pass:
    """One pass of the recursion over every series for every candidate: arrays candidates × series
    (the season's phase × candidates × series)."""

    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray
    phi: np.ndarray
    sse: np.ndarray
    level: np.ndarray
    trend: np.ndarray
    season: np.ndarray

    def fits(self, best: np.ndarray, n: int) -> list[Fit]:
        """The candidate ``best[j]`` of each series ``j``."""
        return [Fit(alpha=float(self.alpha[i, j]), beta=float(self.beta[i, j]), gamma=float(self.gamma[i, j]),
                    phi=float(self.phi[i, j]), level=float(self.level[i, j]), trend=float(self.trend[i, j]),
                    season=self.season[:, i, j].copy(), n=n, sse=float(self.sse[i, j]))
                for j, i in enumerate(best.tolist())]


def _run(y: np.ndarray, m: int, alpha: np.ndarray, beta: np.ndarray, gamma: np.ndarray, phi: np.ndarray) -> _Pass:
    """The one-step-ahead errors' sum of squares and the final states of series ``y`` (series × steps)
    for each candidate (parameters candidates × series), in place in preallocated arrays."""
    level0, trend0, season0 = _initial(y, m)
    shape = alpha.shape
    level = np.broadcast_to(level0, shape).copy()
    trend = np.broadcast_to(trend0, shape).copy()
    season = np.broadcast_to(season0[:, None, :], (m, *shape)).copy()  # a phase's rows are contiguous
    sse, err, damped, tmp = (np.zeros(shape) for _ in range(4))
    for t, value in enumerate(np.ascontiguousarray(y.T)):
        row = season[t % m]
        np.multiply(phi, trend, out=damped)
        np.subtract(value, level, out=err)
        err -= damped
        err -= row
        np.multiply(err, err, out=tmp)
        sse += tmp
        level += damped
        np.multiply(alpha, err, out=tmp)
        level += tmp
        np.multiply(beta, err, out=trend)
        trend += damped
        np.multiply(gamma, err, out=tmp)
        row += tmp
    return _Pass(alpha, beta, gamma, phi, np.where(np.isfinite(sse), sse, np.inf), level, trend, season)


def _initial(y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each series' level and trend from its first two periods' means, its season from the first
    period's deviations from that line (with no season: the first value and the first difference)."""
    if m == 1:
        return y[:, 0], y[:, 1] - y[:, 0], np.zeros((1, len(y)))
    first, second = y[:, :m].mean(axis=1), y[:, m:2 * m].mean(axis=1)
    trend = (second - first) / m
    line = first[:, None] + trend[:, None] * (np.arange(m) - (m - 1) / 2)
    return line[:, 0] - trend, trend, (y[:, :m] - line).T  # the level a step before the first value


def _grid(values: Sequence[np.ndarray], series: int) -> tuple[np.ndarray, ...]:
    """Every combination of each series' values of α, β/α, γ/(1 − α) and φ (each values × series, or
    values × 1 for every series alike), as arrays candidates × series."""
    index = [i.ravel() for i in np.meshgrid(*(np.arange(len(v)) for v in values), indexing="ij")]
    return tuple(np.broadcast_to(v[i], (len(i), series)) for v, i in zip(values, index, strict=True))


def _batches(rows: int, size: int) -> Iterator[slice]:
    for start in range(0, rows, size):
        yield slice(start, min(start + size, rows))


def _as_series(ys: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(ys, dtype=float))


def search(ys: np.ndarray, season: int) -> list[Fit]:
    """Least squares over the smoothing parameters for each series of ``ys`` (series × steps, or one
    series); ``season`` < 2 fits Holt's damped trend alone (γ = 0). Needs at least two periods with a
    season, two values without."""
    ys = _as_series(ys)
    m = season if season >= 2 else 1
    per = max(1, SEARCH_CELLS // (len(COARSE_ALPHA) * len(COARSE_BETA) * len(COARSE_GAMMA) * len(COARSE_PHI)))
    return [fit for rows in _batches(len(ys), per) for fit in _search(ys[rows], m)]


def _search(y: np.ndarray, m: int) -> list[Fit]:
    seasonal = m > 1  # without a season γ stays 0
    lows = np.array([0.005, 0.0, 0.0, PHI_BOUNDS[0]])
    highs = np.array([0.995, 1.0, 1.0 if seasonal else 0.0, PHI_BOUNDS[1]])
    steps = np.array([np.diff(COARSE_ALPHA).min(), 0.02, 0.05 if seasonal else 0.0, 0.04])
    coarse = (COARSE_ALPHA, COARSE_BETA, COARSE_GAMMA if seasonal else (0.0,), COARSE_PHI)
    values = [np.array(g, dtype=float)[:, None] for g in coarse]
    for _round in range(REFINEMENTS + 1):
        a, bf, gf, p = _grid(values, len(y))
        done = _run(y, m, a, a * bf, (1 - a) * gf, p)
        best = np.argmin(done.sse, axis=0)
        chosen = np.stack([g[best, np.arange(len(y))] for g in (a, bf, gf, p)])  # parameter × series
        steps = steps / 2
        values = [np.clip(c[None, :] + (np.array([-s, 0.0, s]) if s else np.zeros(1))[:, None], lo, hi)
                  for c, s, lo, hi in zip(chosen, steps, lows, highs, strict=True)]
    return done.fits(best, y.shape[1])


def refit(ys: np.ndarray, season: int, like: Sequence[Fit]) -> list[Fit]:
    """Each series of ``ys`` fitted with the parameters of the matching fit of ``like`` (no search):
    the states and the errors over the new history, for a fraction of `search`'s cost."""
    ys = _as_series(ys)
    if len(ys) != len(like):
        raise ValueError("one earlier fit for each series")
    m = season if season >= 2 else 1
    out: list[Fit] = []
    for rows in _batches(len(ys), REFIT_SERIES):
        params = [np.array([[getattr(f, name) for f in like[rows]]]) for name in ("alpha", "beta", "gamma", "phi")]
        out += _run(ys[rows], m, *params).fits(np.zeros(rows.stop - rows.start, dtype=int), ys.shape[1])
    return out


def fit(y: np.ndarray, season: int) -> Fit:
    """`search` for one series."""
    return search(y, season)[0]
