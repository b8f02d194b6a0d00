"""Cluster affinity terms evaluated as boolean masks, cached per snapshot topology version.

Masks only change when labels or specs change (``Snapshot.topology_version``), not when replicas
are assumed, so a burst of tasks sharing a policy evaluates its selector once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from drods.scheduler.arrays import BoolArr, IntArr
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import AffinityKey

_MAX_CACHE = 4096


def _label_expr(snap: Snapshot, key: str, op: str, values: tuple[str, ...]) -> BoolArr:
    if op == "In":
        return snap.label_in(key, values)
    if op == "NotIn":
        return ~snap.label_in(key, values)
    if op == "Exists":
        return snap.label_exists(key)
    return ~snap.label_exists(key)


def affinity_parts(snap: Snapshot, term: AffinityKey) -> list[tuple[str, BoolArr]]:
    """The term split into (reason-if-failed, ok-mask) parts, evaluated in order."""
    ck = ("affinity", term)
    hit = snap.cache.get(ck)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    parts: list[tuple[str, BoolArr]] = []
    if term.cluster_names:
        parts.append(("not in clusterAffinity.clusterNames", snap.name_mask(term.cluster_names)))
    if term.exclude:
        parts.append(("excluded by clusterAffinity.exclude", ~snap.name_mask(term.exclude)))
    if term.match_labels or term.label_exprs:
        ok = np.ones(snap.n, dtype=bool)
        for k, v in term.match_labels:
            ok &= snap.label_in(k, (v,))
        for k, op, vals in term.label_exprs:
            ok &= _label_expr(snap, k, op, vals)
        parts.append(("cluster labels do not match clusterAffinity.labelSelector", ok))
    for k, op, vals in term.field_exprs:
        m = snap.field_in(k, vals)
        ok = m if op == "In" else ~m
        parts.append((f"{k} {'not in' if op == 'In' else 'in'} [{', '.join(vals)}]", ok))
    if len(snap.cache) > _MAX_CACHE:
        snap.cache.clear()
    snap.cache[ck] = parts
    return parts


def affinity_mask(snap: Snapshot, term: AffinityKey) -> BoolArr:
    ok = np.ones(snap.n, dtype=bool)
    for _, m in affinity_parts(snap, term):
        ok &= m
    return ok


def overflow_mask(snap: Snapshot, term: AffinityKey) -> BoolArr:
    """Clusters in the term's primary group or any of its overflow groups."""
    ok = affinity_mask(snap, _primary(term))
    for group in term.overflow:
        ok = ok | affinity_mask(snap, group)
    return ok


def overflow_tiers(snap: Snapshot, term: AffinityKey, cand: IntArr) -> IntArr:
    """Per candidate row: 0 in the term's primary group, k in its k-th overflow group (the first that
    names it); a candidate in none (kept for its existing replicas) goes last."""
    tiers = np.full(cand.size, len(term.overflow) + 1, dtype=np.intp)
    for k, group in reversed(list(enumerate((term, *term.overflow)))):
        tiers[affinity_mask(snap, _primary(group))[cand]] = k
    return tiers


def _primary(term: AffinityKey) -> AffinityKey:
    return replace(term, overflow=()) if term.overflow else term
