"""Spread-constraint selection (S6): which groups and clusters a placement may use.

Every constraint is satisfied together, or the task is refused with the reason:

* a group constraint (by region, zone, provider, city or label) keeps between ``minGroups`` and
  ``maxGroups`` groups, chosen best group first (a group ranks by its best cluster), but only
  while the groups kept can still hold the ``minGroups`` clusters the cluster constraint asks
  for — a better group with too few clusters is passed over for one with enough; when the best
  such groups cannot hold the replicas (Divided) and others that also have the clusters can,
  those are taken instead;
* the cluster constraint keeps at most ``maxGroups`` clusters, best first, but swaps a cluster
  for a bigger one when the best ones cannot hold the replicas (Divided) — as many as the
  ``maxGroups`` biggest could hold, if none can hold them all (DRO-DS then places what fits);
  for Duplicated, clusters that hold every replica come first.

Both choices are the same greedy: walk the candidates best first and take one whenever the
rest can still complete a selection that meets the requirement, so the result is the
best-ranked selection that works. The fast path — the best ``maxGroups`` already work — is one
array pass; the walk runs only when a constraint would otherwise be missed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.model.placement import SpreadConstraint
from drods.scheduler.arrays import FloatArr, IntArr
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def _by_cluster(c: SpreadConstraint) -> bool:
    return c.spreadByLabel is None and (c.spreadByField or "cluster") == "cluster"


def _top_sum(values: FloatArr, r: int) -> float:
    """Sum of the ``r`` largest ``values``."""
    if r <= 0 or values.size == 0:
        return 0.0
    if r >= values.size:
        return float(values.sum())
    return float(np.partition(values, values.size - r)[values.size - r:].sum())


def pick(size: FloatArr, forced: int, most: int, least: int, need: float) -> IntArr | None:
    """Positions (into the best-first ``size`` array) of the best-ranked selection of at most
    ``most`` and at least ``least`` entries whose sizes add up to ``need``; the first ``forced``
    entries are always taken. ``None`` when no selection can.

    Greedy, best first: take an entry whenever the rest can still complete the selection. Each
    step finds the next entry to take in one array pass: with ``r`` more entries to take after it
    and ``Q`` the ``r + 1`` largest remaining, the earliest member of ``Q`` always works, and an
    entry before it works exactly when its size reaches ``need - have - (ΣQ - min Q)``.
    """
    n = size.size
    most = min(most, n)
    forced = min(forced, most)
    if least > most or float(size[:forced].sum()) + _top_sum(size[forced:], most - forced) < need:
        return None
    if float(size[:most].sum()) >= need:  # fast path: the best ``most`` already work
        return np.arange(most, dtype=np.intp)
    chosen = list(range(forced))
    have = float(size[:forced].sum())
    start = forced
    while len(chosen) < most and start < n:
        short = need - have
        r = most - len(chosen) - 1
        if short <= 0:  # met: the next best fill the remaining slots
            chosen.extend(range(start, min(n, start + r + 1)))
            break
        rest = size[start:]
        if rest.size <= r + 1:
            i = 0
        else:
            top = np.argpartition(-rest, r)[: r + 1]
            q = int(top.min())
            enough = np.flatnonzero(rest[:q] >= short - float(rest[top].sum()) + float(rest[top].min()))
            i = int(enough[0]) if enough.size else q
        chosen.append(start + i)
        have += float(rest[i])
        start += i + 1
    return np.asarray(chosen, dtype=np.intp)


@dataclass(slots=True)
class SpreadChoice:
    """Candidate positions kept, positions that must get a replica, and why it failed (if it did)."""

    keep: IntArr
    required: IntArr
    problems: list[str]


def select_spread(info: TaskInfo, snap: Snapshot, cand: IntArr, prefer: FloatArr, caps: FloatArr) -> SpreadChoice:
    """Apply ``info.spread`` to the candidates ``cand`` (``prefer``/``caps`` are per position)."""
    m = cand.size
    keep = np.ones(m, dtype=bool)
    required: list[int] = []
    problems: list[str] = []
    order = np.argsort(-prefer, kind="stable")
    by_cluster = [c for c in info.spread if _by_cluster(c)]
    holds = info.division not in ("Duplicated", "StaticWeight") and bool(np.isfinite(caps).all())
    need_clusters = max((c.minGroups or 0 for c in by_cluster), default=0)
    for c in info.spread:
        if _by_cluster(c):
            continue
        by = c.spreadByLabel if c.spreadByLabel is not None else str(c.spreadByField)
        codes = snap.group_codes(c.spreadByField, c.spreadByLabel)[cand]
        live = order[keep[order]]
        uniq, first, inv, counts = np.unique(codes[live], return_index=True, return_inverse=True,
                                             return_counts=True)
        rank = np.argsort(first, kind="stable")
        groups = uniq[rank]
        sizes: FloatArr = counts[rank].astype(np.float64)
        most = c.maxGroups or groups.size
        least = c.minGroups or 0
        got = pick(sizes, 0, most, least, float(need_clusters))
        if got is not None and holds and most < groups.size:
            # prefer groups that hold the replicas when the best ones cannot, as for clusters
            where = np.empty(groups.size, dtype=np.intp)
            where[rank] = np.arange(groups.size)
            room: FloatArr = np.bincount(where[inv.ravel()], minlength=groups.size,
                                         weights=np.minimum(caps[live], float(info.replicas))).astype(np.float64)
            if float(room[got].sum()) < info.replicas:
                alt = pick(room, 0, most, least, min(float(info.replicas), _top_sum(room, most)))
                if (alt is not None and float(sizes[alt].sum()) >= need_clusters
                        and float(room[alt].sum()) > float(room[got].sum())):
                    got = alt
        if got is None:
            problems.append(
                f"spread by {by}: no {min(most, groups.size)} of the {groups.size} {by} groups hold the "
                f"{need_clusters} clusters spread by cluster minGroups asks for "
                f"(the largest hold {int(_top_sum(sizes, most))})")
            continue
        chosen = groups[got]
        keep &= np.isin(codes, chosen)
        if c.minGroups:  # the best cluster of each of the first minGroups groups
            required.extend(live[first[rank[got[: c.minGroups]]]].tolist())
    for c in by_cluster:
        live = order[keep[order]]
        req = list(dict.fromkeys(p for p in required if keep[p]))
        most = c.maxGroups or live.size
        if len(req) > most:
            problems.append(f"spread by cluster maxGroups {most} < {len(req)} groups required "
                            "by other spread constraints")
            continue
        rest = live[~np.isin(live, req)]
        if info.division == "Duplicated":  # clusters that hold every replica first
            rest = rest[np.argsort(caps[rest] < info.replicas, kind="stable")]
        ranked = np.concatenate((np.asarray(req, dtype=np.intp), rest))
        if not holds:
            size = np.zeros(ranked.size)
            need = 0.0
        else:
            size = np.minimum(caps[ranked], float(info.replicas))
            need = min(float(info.replicas), float(size[: len(req)].sum()) + _top_sum(size[len(req):], most - len(req)))
        got = pick(size, len(req), most, 0, need)
        chosen_pos = ranked[got] if got is not None else ranked[:most]
        new_keep = np.zeros(m, dtype=bool)
        new_keep[chosen_pos] = True
        keep &= new_keep
        if c.minGroups:
            required.extend(int(p) for p in chosen_pos[: c.minGroups] if int(p) not in required)
    sel = np.flatnonzero(keep)
    req_arr = np.asarray([p for p in dict.fromkeys(required) if keep[p]], dtype=np.intp)
    return SpreadChoice(sel, req_arr, problems)
