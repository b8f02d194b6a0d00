"""How far a workload's users are from each cluster.

The latency from each user place to each cluster is read in one order: a measured pair (C2 network
status, `Snapshot.set_network_pair`), then the cluster's declared ``network.latencyMs`` to that
place, then — for a cluster in the users' own region or city — its local latency (0 when it declares
none); anything else is unknown (NaN), which the UserLatency score treats as neutral. A city or region
is matched without case (``lhr`` is the clusters' ``LHR``), as the placement's validation already
compares user places; a site is a CATS client-site ID and is matched as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.plugins.network_fit import latency_to
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.users import UserDemand


def place_latency(snap: Snapshot, kind: str, place: str) -> FloatArr:
    """Latency (ms) from one user place to every cluster (NaN: unknown)."""
    if kind in ("region", "city"):
        place = _as_the_clusters_say(place, snap.indexes.vocab[kind], snap.indexes.latency)
    lat = latency_to(snap, place)
    if kind in ("region", "city"):
        code = snap.indexes.vocab[kind].get(place)
        if code is not None:
            local = (snap.indexes.topo[kind][: snap.n] == code) & np.isnan(lat)
            lat[local] = 0.0
    return lat


def _as_the_clusters_say(place: str, *spellings: Mapping[str, object]) -> str:
    """``place`` spelt as the clusters spell it (their topology, then their declared latencies) when it
    differs only in case."""
    folded = place.casefold()
    for names in spellings:
        if place in names:
            return place
        hit = next((name for name in names if name.casefold() == folded), None)
        if hit is not None:
            return hit
    return place


def latency_matrix(snap: Snapshot, users: UserDemand) -> FloatArr:
    """(users × clusters) latency in ms, NaN where unknown; cached per snapshot state."""
    key = ("user-latency", users.shares)
    hit = snap.cache.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    mat = np.vstack([place_latency(snap, u.kind, u.place) for u in users.shares])
    mat.flags.writeable = False
    snap.cache[key] = mat
    return mat


def expected_latency(mat: FloatArr, weights: FloatArr) -> FloatArr:
    """Share-weighted latency from the users to each cluster over the places it is known from
    (NaN where none is known)."""
    known = ~np.isnan(mat)
    w = weights[:, None] * known
    wsum = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (np.nan_to_num(mat) * w).sum(axis=0) / wsum
    return np.where(wsum > 0, out, np.nan)  # type: ignore[no-any-return]


def nearest_user(mat: FloatArr, slo_ms: float | None) -> IntArr:
    """Per cluster the user place it is nearest to (within the SLO when one is set), else -1."""
    filled = np.where(np.isnan(mat), np.inf, mat)
    best = np.argmin(filled, axis=0)
    dist = filled[best, np.arange(filled.shape[1])]
    ok = np.isfinite(dist) if slo_ms is None else dist <= slo_ms
    return np.where(ok, best, -1).astype(np.intp)  # type: ignore[no-any-return]


def within_slo(mat: FloatArr, slo_ms: float) -> BoolArr:
    """Clusters within ``slo_ms`` of at least one user place."""
    return np.asarray((np.where(np.isnan(mat), np.inf, mat) <= slo_ms).any(axis=0), dtype=bool)


def placement_latency(snap: Snapshot, users: UserDemand, pairs: Sequence[tuple[str, int]]) -> float | None:
    """The replica-weighted expected user latency of a placement (None: nothing known)."""
    mat = latency_matrix(snap, users)
    exp = expected_latency(mat, users.weights)
    tot = 0.0
    n = 0
    for name, k in pairs:
        row = snap.index.get(name)
        if row is None or k <= 0 or np.isnan(exp[row]):
            continue
        tot += float(exp[row]) * k
        n += k
    return tot / n if n else None


def chosen_latency(snap: Snapshot, users: UserDemand, rows: IntArr) -> tuple[dict[str, float | None], dict[str, str]]:
    """Per chosen cluster, the latency from the nearest of the users' places (None: unknown) and which
    place that is: what a decision's explanation shows. A cluster chosen for the users near it reads
    as their latency, not as an average over users it does not serve."""
    mat = latency_matrix(snap, users)[:, rows]
    filled = np.where(np.isnan(mat), np.inf, mat)  # a demand has at least one place: argmin has a row
    best = filled.argmin(axis=0)
    near = filled[best, np.arange(rows.size)]
    names = [str(c) for c in snap.names_arr[rows].tolist()]
    ms = {c: (round(float(v), 1) if np.isfinite(v) else None) for c, v in zip(names, near.tolist(), strict=True)}
    place = {c: users.shares[int(b)].place for c, b, v in zip(names, best.tolist(), near.tolist(), strict=True)
             if np.isfinite(v)}
    return ms, place


def unknown_places(snap: Snapshot, users: UserDemand) -> list[dict[str, object]]:
    """The users' places no cluster has a latency from (none measured, declared or local): a place
    misspelt, or not measured yet. Their share is weighed as neutral, so the decision says so."""
    blind = np.all(np.isnan(latency_matrix(snap, users)[:, : snap.n]), axis=1).tolist()
    return [u.to_dict() for u, b in zip(users.shares, blind, strict=True) if b]
