"""Stateful topology (F3): one primary cluster and ``replicas.clusters`` replica clusters.

A StatefulSet or a database is not split across clusters unless its placement gives
``statefulTopology: {primary: {replicas: N}, replicas: {clusters: K, replicasPerCluster: M}}``. Then
the scheduler does not divide: after the filters and the scores it picks

* **the primary** — N replicas on one cluster that can hold them, by the scheduler's preference (the
  clusters already holding the workload, then the total score). When the affinity plugins that ran
  (DataLocality — measured from the datasets' Primary copies for such a workload — TrafficAffinity,
  Dissonance) separate the candidates as concentration does (``minSpread``), their top tier comes
  first: the primary goes where its data's writes land and its peers are. The current primary
  stays while it can hold N; when it can't (it failed, it is full) a **current replica cluster is
  promoted** first, the best-ranked that can hold N; only when none can does the primary go to the
  best other cluster;
* **the replicas** — M replicas on each of K distinct other clusters: the current replica clusters
  that are still feasible first (a copy of the data is not moved needlessly), then the best-ranked
  rest, each pick preferring a region no chosen cluster is in, then a zone none is in, then the rank.

Fewer than K replica clusters → a partial placement saying how many were found; no cluster for the
primary → Unschedulable. Everything here is per candidate arrays; the K picks are a short loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

PRIMARY = "Primary"
REPLICA = "Replica"


@dataclass(frozen=True, slots=True)
class TopologyChoice:
    """Positions (into the candidate arrays) and replicas per position: the primary first."""

    keep: IntArr
    counts: IntArr
    primary: str | None
    replicas: tuple[str, ...]
    promoted_from: str | None  # the failed or full primary a replica cluster took over from
    message: str  # empty when the topology is complete

    def roles(self) -> dict[str, str]:
        out = {c: REPLICA for c in self.replicas}
        if self.primary is not None:
            out[self.primary] = PRIMARY
        return out

    def record(self, how: str) -> dict[str, object]:
        """What ``history/schedules`` shows under ``topology``."""
        out: dict[str, object] = {"primary": self.primary, "replicas": list(self.replicas), "primaryChosenBy": how}
        if self.promoted_from is not None:
            out["promotedFrom"] = self.promoted_from
        return out


def place_topology(info: TaskInfo, snap: Snapshot, cand: IntArr, prefer: FloatArr, caps: FloatArr,
                   top_tier: BoolArr | None) -> tuple[TopologyChoice, str]:
    """The primary and replica clusters among the candidates ``cand`` (ranked by ``prefer``; the
    affinity ``top_tier`` first for the primary when given), and how the primary was chosen."""
    topo = info.topology
    assert topo is not None
    n_p, k, m_r = topo.primary.replicas, topo.replicas.clusters, topo.replicas.replicasPerCluster
    names = snap.names_arr[cand]
    size = cand.size
    pos_of = {str(nm): i for i, nm in enumerate(names.tolist())}
    current = [pos_of[c] for c in info.current if c in pos_of and c != info.primary]
    rank = prefer if top_tier is None else prefer + top_tier * 1e9
    holds_p = caps >= n_p
    primary = -1
    how = "score"
    promoted: str | None = None
    cur_p = pos_of.get(info.primary) if info.primary is not None else None
    if cur_p is not None and holds_p[cur_p]:
        primary, how = cur_p, "current"
    else:
        fit = [i for i in current if holds_p[i]]
        if info.primary is not None and fit:
            primary = max(fit, key=lambda i: float(rank[i]))
            how, promoted = "promoted", info.primary
        elif holds_p.any():
            primary = int(np.argmax(np.where(holds_p, rank, -np.inf)))
            how = "affinity" if top_tier is not None and bool(top_tier[primary]) else "score"
    if primary < 0:
        empty = np.zeros(0, dtype=np.intp)
        return TopologyChoice(empty, empty, None, (), None,
                              f"no feasible cluster can hold the primary's {n_p} replicas"), how
    open_ = caps >= m_r
    open_[primary] = False
    chosen: list[int] = []
    for i in sorted(current, key=lambda i: -float(rank[i])):  # surviving replica clusters stay
        if open_[i] and len(chosen) < k:
            chosen.append(i)
            open_[i] = False
    region, zone = snap.indexes.topo["region"][cand], snap.indexes.topo["zone"][cand]
    while len(chosen) < k and open_.any():
        taken = [primary, *chosen]
        new_region = (region >= 0) & ~np.isin(region, region[taken])
        new_zone = (zone >= 0) & ~np.isin(zone, zone[taken])
        order = np.lexsort((rank, new_zone, new_region))  # ascending: the best is last
        best = int(order[open_[order]][-1])
        chosen.append(best)
        open_[best] = False
    keep = np.asarray([primary, *chosen], dtype=np.intp)
    counts = np.asarray([n_p, *([m_r] * len(chosen))], dtype=np.intp)
    msg = "" if len(chosen) == k else (
        f"stateful topology: {len(chosen)}/{k} replica clusters found (each needs room for {m_r} "
        f"replicas, other than the primary's {names[primary]}; {size} feasible clusters)")
    return TopologyChoice(keep, counts, str(names[primary]), tuple(str(names[i]) for i in chosen), promoted,
                          msg), how
