"""Background load: a seeded diurnal generator and the trace CSV reader.

Both return ``(ticks, clusters)`` arrays of cpu and memory utilisation (fractions of allocatable).

Trace CSV (docs/whatif.md): a header ``time,cluster,cpu,memory`` then one row per sample; ``time``
is seconds from the start of the scenario or an RFC 3339 timestamp (then the first timestamp is
the start); ``cpu`` and ``memory`` are utilisation fractions 0..1 (percentages above 1.5 are read
as percent). A Prometheus export reshaped to these columns replays as is. Samples are linearly
interpolated onto the ticks and held flat before the first and after the last one; clusters the
trace does not mention keep the diurnal generator's load.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from drods.errors import BadRequest, Invalid
from drods.whatif.scenario import Diurnal

FloatArr = np.ndarray


@dataclass(slots=True)
class BackgroundLoad:
    cpu: FloatArr  # (ticks, clusters)
    memory: FloatArr


def diurnal(diu: Diurnal, *, ticks: int, tick_minutes: float, start_hour_utc: float, utc_offsets: FloatArr,
            rng: np.random.Generator) -> BackgroundLoad:
    """Utilisation per tick and cluster: a daily cosine peaking at ``peakHour`` local time plus AR(1) noise."""
    n = utc_offsets.size
    hours = start_hour_utc + np.arange(ticks) * tick_minutes / 60.0  # UTC hour of each tick
    local = (hours[:, None] + utc_offsets[None, :]) % 24.0
    base = diu.base * (1.0 + diu.jitter * rng.standard_normal(n))
    amp = diu.amplitude * (1.0 + diu.jitter * rng.standard_normal(n))
    shape = (1.0 + np.cos(2.0 * np.pi * (local - diu.peakHour) / 24.0)) / 2.0
    cpu = base[None, :] + amp[None, :] * shape
    if diu.noise > 0:
        phi = 0.9
        eps = rng.standard_normal((ticks, n)) * diu.noise * np.sqrt(1 - phi * phi)
        noise = np.empty((ticks, n))
        noise[0] = rng.standard_normal(n) * diu.noise
        for t in range(1, ticks):
            noise[t] = phi * noise[t - 1] + eps[t]
        cpu = cpu + noise
    cpu = np.clip(cpu, 0.0, 1.0)
    return BackgroundLoad(cpu, np.clip(cpu * diu.memoryRatio, 0.0, 1.0))


def _time(value: str, line: int) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError as e:
        raise Invalid(f"trace line {line}: time {value!r} is neither seconds nor RFC 3339",
                      {"line": line}) from e


def _fraction(value: str, line: int, col: str) -> float:
    try:
        v = float(value)
    except ValueError as e:
        raise Invalid(f"trace line {line}: {col} {value!r} is not a number", {"line": line}) from e
    if not np.isfinite(v) or v < 0:
        raise Invalid(f"trace line {line}: {col} must be ≥ 0", {"line": line})
    return v / 100.0 if v > 1.5 else v


def read_trace(path: Path) -> dict[str, tuple[FloatArr, FloatArr, FloatArr]]:
    """cluster → (seconds from start, cpu, memory), sorted by time."""
    rows: dict[str, list[tuple[float, float, float]]] = {}
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            need = {"time", "cluster", "cpu", "memory"}
            if reader.fieldnames is None or not need <= set(reader.fieldnames):
                raise Invalid(f"trace {path.name}: the header must have time,cluster,cpu,memory",
                              {"path": str(path)})
            for i, r in enumerate(reader, start=2):
                rows.setdefault(r["cluster"], []).append(
                    (_time(r["time"], i), _fraction(r["cpu"], i, "cpu"), _fraction(r["memory"], i, "memory")))
    except OSError as e:
        raise BadRequest(f"cannot read trace {path}: {e.strerror}", {"path": str(path)}) from e
    if not rows:
        return {}
    t0 = min(t for samples in rows.values() for t, _, _ in samples)
    out: dict[str, tuple[FloatArr, FloatArr, FloatArr]] = {}
    for name, samples in rows.items():
        a = np.asarray(sorted(samples))
        out[name] = (a[:, 0] - t0, a[:, 1], a[:, 2])
    return out


def apply_trace(load: BackgroundLoad, trace: dict[str, tuple[FloatArr, FloatArr, FloatArr]], names: list[str],
                tick_minutes: float) -> int:
    """Replace the generated load of the clusters the trace has; returns how many it covered. A cluster
    the scenario does not have is a mistake (a typo would leave the generator's load in place, unseen)."""
    index = {n: i for i, n in enumerate(names)}
    unknown = sorted(set(trace) - set(index))
    if unknown:
        raise Invalid(f"the trace names clusters the scenario does not have: {', '.join(unknown[:10])}"
                      f"{' …' if len(unknown) > 10 else ''} (the scenario's: {', '.join(names[:10])}"
                      f"{' …' if len(names) > 10 else ''})", {"unknown": unknown[:100]})
    ticks = load.cpu.shape[0]
    at = np.arange(ticks) * tick_minutes * 60.0
    covered = 0
    for name, (t, cpu, mem) in trace.items():
        col = index.get(name)
        if col is None:
            continue
        load.cpu[:, col] = np.clip(np.interp(at, t, cpu), 0.0, 1.0)
        load.memory[:, col] = np.clip(np.interp(at, t, mem), 0.0, 1.0)
        covered += 1
    return covered


def write_trace(path: Path, load: BackgroundLoad, names: list[str], tick_minutes: float, every: int = 1) -> None:
    """Write ``load`` as a trace CSV (every ``every``-th tick): how the shipped example was made."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "cluster", "cpu", "memory"])
        for t in range(0, load.cpu.shape[0], every):
            for c, name in enumerate(names):
                w.writerow([int(t * tick_minutes * 60), name, f"{load.cpu[t, c]:.4f}", f"{load.memory[t, c]:.4f}"])
