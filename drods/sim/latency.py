"""An emulated site-to-site network (SPEC C2 for one laptop): a latency matrix between client sites
and clusters, from a file or from a seeded geography by city code.

Geography: each city code has coordinates; the one-way delay of a pair is a 2 ms access floor plus
1 ms per 100 km of great-circle distance (light in fibre covers ~200 km/ms, real paths run about
twice the straight line), times a seeded per-pair route factor in [1.0, 1.2]. Jitter is 3 % of the
delay, loss 0.01 % per 1,000 km, bandwidth 10 Gbit/s inside a metro and 1 Gbit/s beyond. A
``sample`` adds seeded noise (±``noise`` of the delay) so repeated reports look like measurements.

A matrix file (YAML or JSON) is ``{"measurements": [{"from", "to", "delayMs", …}]}`` — the same body
``PUT /api/v1/network/status`` takes — or ``{"delayMs": {from: {to: ms}}}``.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

#: IATA city codes → (latitude, longitude).
CITIES: dict[str, tuple[float, float]] = {
    "ATL": (33.64, -84.43), "BOS": (42.36, -71.01), "DFW": (32.90, -97.04), "DEN": (39.86, -104.67),
    "IAD": (38.95, -77.46), "JFK": (40.64, -73.78), "LAX": (33.94, -118.41), "MIA": (25.79, -80.29),
    "ORD": (41.97, -87.91), "SEA": (47.45, -122.31), "SFO": (37.62, -122.38), "YYZ": (43.68, -79.63),
    "GRU": (-23.43, -46.47), "MEX": (19.44, -99.07),
    "AMS": (52.31, 4.76), "CDG": (49.01, 2.55), "FRA": (50.04, 8.56), "LHR": (51.47, -0.45),
    "MAD": (40.47, -3.56), "MXP": (45.63, 8.72), "ARN": (59.65, 17.92), "WAW": (52.17, 20.97),
    "DXB": (25.25, 55.36), "JNB": (-26.14, 28.24), "BOM": (19.09, 72.87), "DEL": (28.56, 77.10),
    "SIN": (1.36, 103.99), "HKG": (22.31, 113.91), "NRT": (35.77, 140.39), "ICN": (37.46, 126.44),
    "PEK": (40.08, 116.58), "PVG": (31.14, 121.81), "SYD": (-33.94, 151.18), "MEL": (-37.67, 144.84),
}


def distance_km(a: str, b: str) -> float:
    (la1, lo1), (la2, lo2) = CITIES[a.upper()], CITIES[b.upper()]
    p1, p2 = math.radians(la1), math.radians(la2)
    dp, dl = p2 - p1, math.radians(lo2 - lo1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


def _pair_rng(seed: int, a: str, b: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{a}\0{b}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def link(source_city: str, target_city: str, seed: int = 0) -> dict[str, float]:
    """The emulated link between two cities (deterministic for a seed)."""
    km = distance_km(source_city, target_city)
    factor = 1.0 + 0.2 * _pair_rng(seed, source_city.upper(), target_city.upper()).random()
    delay = (2.0 + km / 100.0) * factor
    return {"delayMs": round(delay, 3), "jitterMs": round(0.03 * delay, 3),
            "lossPercent": round(0.01 * km / 1000.0, 4), "bandwidthMbps": 10000.0 if km < 100 else 1000.0}


def geography(clients: Sequence[str], targets: Mapping[str, str], seed: int = 0) -> list[dict[str, Any]]:
    """Measurements from every client city to every target (``target name → its city code``)."""
    unknown = sorted({c.upper() for c in [*clients, *targets.values()]} - set(CITIES))
    if unknown:
        raise ValueError(f"unknown city code(s): {', '.join(unknown)}; known: {', '.join(sorted(CITIES))}")
    return [{"from": c, "to": t, **link(c, city, seed)} for c in clients for t, city in targets.items()]


def sample(measurements: Sequence[Mapping[str, Any]], rng: random.Random, noise: float = 0.05,
           source: str = "drods-sim") -> list[dict[str, Any]]:
    """One noisy observation of each measurement (delay and jitter vary by ±``noise``)."""
    out: list[dict[str, Any]] = []
    for m in measurements:
        d = dict(m)
        k = 1.0 + rng.uniform(-noise, noise)
        for f in ("delayMs", "jitterMs"):
            if isinstance(d.get(f), int | float):
                d[f] = round(float(d[f]) * k, 3)
        d["source"] = source
        out.append(d)
    return out


def load_matrix(path: Path) -> list[dict[str, Any]]:
    """Measurements from a matrix file (see the module docstring)."""
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping with 'measurements' or 'delayMs'")
    if isinstance(doc.get("measurements"), list):
        return [dict(m) for m in doc["measurements"]]
    delays = doc.get("delayMs")
    if not isinstance(delays, dict):
        raise ValueError(f"{path}: expected 'measurements' (a list) or 'delayMs' (from → to → ms)")
    return [{"from": str(a), "to": str(b), "delayMs": float(v)}
            for a, row in delays.items() for b, v in (row or {}).items()]
