"""Holt-Winters with a damped additive trend and an additive season (ETS(A,Ad,A)), fitted by least
squares, in NumPy.

statsmodels' ``ExponentialSmoothing`` fitted it before. Importing it brought pandas, patsy and
scipy.stats into every process that forecasts: an idle ``drods serve`` over 10 members went from 166
to 275 MiB of RSS at its first forecast refresh (docs/performance.md). The model itself is a short recursion
in its error-correction form; the fit runs it for hundreds of candidate parameter sets at once (one
pass over the history with an array per state), then twice more on a finer grid around the best.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the grids searched first: α; β and γ as fractions of their bounds (0 ≤ β ≤ α, 0 ≤ γ ≤ 1 − α); φ
COARSE_ALPHA = (0.02, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 0.99)
COARSE_BETA = (0.0, 0.02, 0.1, 0.3)
COARSE_GAMMA = (0.0, 0.05, 0.2, 0.5)
COARSE_PHI = (0.8, 0.9, 0.95, 0.99)
PHI_BOUNDS = (0.8, 0.995)
REFINEMENTS = 2  # finer grids around the best, each with half the last one's steps


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


def _run(y: np.ndarray, m: int, alpha: np.ndarray, beta: np.ndarray, gamma: np.ndarray, phi: np.ndarray,
         level0: float, trend0: float, season0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The one-step-ahead errors' sum of squares and the final states, for each candidate at once."""
    k = len(alpha)
    level = np.full(k, level0)
    trend = np.full(k, trend0)
    season = np.repeat(season0[:, None], k, axis=1)  # phase × candidate: a phase's row is contiguous
    sse = np.zeros(k)
    for t, value in enumerate(y.tolist()):
        row = season[t % m]
        damped = phi * trend
        err = value - level - damped - row
        sse += err * err
        level = level + damped + alpha * err
        trend = damped + beta * err
        row += gamma * err
    return sse, level, trend, season


def _candidates(alpha_f: np.ndarray, beta_f: np.ndarray, gamma_f: np.ndarray,
                phi: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every combination of the grids' values, flattened (β and γ as fractions of their bounds)."""
    a, bf, gf, p = (g.ravel() for g in np.meshgrid(alpha_f, beta_f, gamma_f, phi, indexing="ij"))
    return a, bf, gf, p


def _initial(y: np.ndarray, m: int) -> tuple[float, float, np.ndarray]:
    """Level and trend from the first two periods' means, the season from the first period's deviations
    from that line (with no season: the first value and the first difference)."""
    if m == 1:
        return float(y[0]), float(y[1] - y[0]), np.zeros(1)
    first, second = y[:m], y[m:2 * m]
    level, trend = float(first.mean()), float((second.mean() - first.mean()) / m)
    line = level + trend * (np.arange(m) - (m - 1) / 2)
    return float(line[0]) - trend, trend, first - line  # the level a step before the first value


def fit(y: np.ndarray, season: int) -> Fit:
    """Least squares over the smoothing parameters; ``season`` < 2 fits Holt's damped trend alone
    (γ = 0). Needs at least two periods of ``y`` with a season, two values without."""
    y = np.asarray(y, dtype=float)
    m = season if season >= 2 else 1
    level0, trend0, season0 = _initial(y, m)
    steps = [np.diff(COARSE_ALPHA).min(), 0.02, 0.05 if m > 1 else 0.0, 0.04]
    grid: tuple[np.ndarray, ...] = (np.array(COARSE_ALPHA), np.array(COARSE_BETA),
                                    np.array(COARSE_GAMMA if m > 1 else (0.0,)), np.array(COARSE_PHI))
    for _round in range(REFINEMENTS + 1):
        a, bf, gf, p = _candidates(*grid)
        sse, level, trend, seasons = _run(y, m, a, a * bf, (1 - a) * gf, p, level0, trend0, season0)
        sse = np.where(np.isfinite(sse), sse, np.inf)
        i = int(np.argmin(sse))
        best = (float(a[i]), float(bf[i]), float(gf[i]), float(p[i]))
        chosen = Fit(alpha=best[0], beta=best[0] * best[1], gamma=(1 - best[0]) * best[2], phi=best[3],
                     level=float(level[i]), trend=float(trend[i]), season=seasons[:, i].copy(), n=len(y),
                     sse=float(sse[i]))
        steps = [s / 2 for s in steps]
        lows, highs = (0.005, 0.0, 0.0, PHI_BOUNDS[0]), (0.995, 1.0, 1.0 if m > 1 else 0.0, PHI_BOUNDS[1])
        grid = tuple(np.unique(np.clip(np.array([v - s, v, v + s]), lo, hi))
                     for v, s, lo, hi in zip(best, steps, lows, highs, strict=True))
    return chosen
