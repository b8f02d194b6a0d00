"""C1: how often each network path needs measuring — the strictest need of the services using it.

A registration's ``statusIntervalSeconds`` is how fresh it needs the status of its paths. The paths
it uses are (client site, instance) pairs: each of its ``clientSites`` with each cluster its
workload runs on (the registration's ``status.instances``, written by the steering controller), and
with that cluster's city, since a measurement's ``to`` may name either (`drods.steering.status`).
A pair no registration uses needs nothing: it is measured at the default interval.

Pure functions of the registrations and the clusters' cities, so the API answers them from a
registry listing and the tests from plain objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_INTERVAL = 30.0

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PairNeed:
    """One measured path: how often it must be reported and by how many services."""

    source: str
    target: str
    interval: float
    services: int

    def json(self) -> Obj:
        return {"from": self.source, "to": self.target, "intervalSeconds": self.interval, "services": self.services}


def _need(spec: Mapping[str, Any]) -> float:
    v = spec.get("statusIntervalSeconds")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else DEFAULT_INTERVAL


def site_intervals(registrations: Iterable[Obj], sites: Iterable[str]) -> dict[str, float]:
    """Per client site: the strictest need among the registrations serving it (the default if none)."""
    out = {s: DEFAULT_INTERVAL for s in sites}
    for reg in registrations:
        spec = reg.get("spec") or {}
        need = _need(spec)
        for site in spec.get("clientSites") or []:
            if site in out:
                out[site] = min(out[site], need)
    return out


def pair_needs(registrations: Iterable[Obj], cities: Mapping[str, str | None]) -> dict[tuple[str, str], PairNeed]:
    """Per (client site, cluster or its city) pair some registration uses: the strictest need.

    ``cities``: cluster name → its city code (None when it has none); instances that are not
    registered clusters are still paths (the cluster may be joining), without a city."""
    best: dict[tuple[str, str], tuple[float, int]] = {}
    for reg in registrations:
        spec = reg.get("spec") or {}
        status = reg.get("status") or {}
        if status.get("phase") not in (None, "Active"):
            continue
        need = _need(spec)
        instances = [str(c) for c in status.get("instances") or [] if isinstance(c, str) and c]
        targets = set(instances) | {city for c in instances if (city := cities.get(c))}
        for site in spec.get("clientSites") or []:
            for target in targets:
                cur = best.get((site, target))
                best[(site, target)] = (need, 1) if cur is None else (min(cur[0], need), cur[1] + 1)
    return {pair: PairNeed(pair[0], pair[1], v, n) for pair, (v, n) in best.items()}


def pair_interval(needs: Mapping[tuple[str, str], PairNeed], source: str, target: str) -> float:
    """The interval of one reported pair (the default when no service uses it)."""
    hit = needs.get((source, target))
    return hit.interval if hit is not None else DEFAULT_INTERVAL
