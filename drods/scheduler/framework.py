"""The scheduling cycle (S3-S7): analyse → filter → score (adjusted weights) → select → divide.

``Scheduler.schedule`` is pure with respect to the snapshot: it reads it and returns a
``ScheduleResult``; the caller then records the decision with ``snap.assume(...)`` (S7) so the
next task sees it. Everything a decision used — filter reasons, per-plugin scores, the adjuster's
weights, timings — is in the result so ``history/schedules`` can explain it.

Selection (S6): candidates are ranked by total score (weighted mean of the enabled score plugins,
0..100); exact ties are broken by a seedable RNG. Clusters already hosting the workload rank
first among equals. Spread constraints choose groups and clusters together (``groups.py``): the
best-ranked selection that meets every constraint and, when it can, holds the replicas; one
replica goes to each of the first ``minGroups`` groups when replicas allow. Without spread
constraints, affinity scores that clearly separate the candidates narrow them to the best-affinity
tier plus best-first overflow (``concentrate.py``). Tiers — those, or a term's
``overflowAffinities`` — are divided in order, each up to its caps (``tiers.py``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from drods.model.binding import BindingSpec, TargetCluster
from drods.scheduler.adjuster import Adjustment
from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.capacity import replica_shape
from drods.scheduler.concentrate import affinity_mean, concentrate
from drods.scheduler.cost_first import cheapest_fill
from drods.scheduler.divide import DivisionInput, TopClamp, divide
from drods.scheduler.groups import select_spread
from drods.scheduler.interface import Rejection, ScorePlugin
from drods.scheduler.options import Options, weigh_options
from drods.scheduler.plugins.data_locality import moved_gib_per_hour
from drods.scheduler.plugins.gpu_storage_fit import headroom
from drods.scheduler.plugins.traffic_affinity import TrafficAffinity
from drods.scheduler.plugins.user_distance import chosen_latency, latency_matrix, nearest_user, unknown_places
from drods.scheduler.plugins.user_latency import UserLatencySLO
from drods.scheduler.pricing import hourly_cost, priced, replica_price
from drods.scheduler.profile import Profile
from drods.scheduler.selectors import overflow_tiers
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.stateful import TopologyChoice, place_topology
from drods.scheduler.task import Task, TaskInfo, analyse
from drods.scheduler.tiers import divide_in_tiers
from drods.scheduler.user_division import NEAR_CEILING_MARGIN, NEAR_MS, Ceiling, divide_by_users
from drods.scheduler.weights import static_weights

Phase = Literal["Scheduled", "Unschedulable"]
SURGE_SIGNAL = "trafficSurge"
_NO_ROWS: IntArr = np.zeros(0, dtype=np.intp)
_NO_ROWS.flags.writeable = False
_CONCENTRATED = frozenset({"WaterLevel", "AvailableReplicas", "Aggregated"})


def _no_rows() -> IntArr:
    return _NO_ROWS


@dataclass(slots=True)
class ScheduleResult:
    """The decision for one task, with everything needed to explain it."""

    name: str
    phase: Phase
    requested: int
    placed: int
    message: str
    clusters: int
    feasible: int
    division: str
    affinity_term: str | None = None
    weights: dict[str, float] = field(default_factory=dict)
    spread: float = 1.0
    fleet_water_level: float = 0.0
    surge: float = 0.0
    # per candidate: one row per score plugin and a last row "total" (names in _score_keys)
    _score_matrix: FloatArr | None = field(default=None, repr=False)
    _score_keys: tuple[str, ...] = field(default=(), repr=False)
    _score_pos: IntArr | None = field(default=None, repr=False)  # candidates that got replicas
    _score_arrays: dict[str, FloatArr] | None = field(default=None, repr=False)
    timings_ms: dict[str, float] = field(default_factory=dict)
    analysis: dict[str, object] = field(default_factory=dict)
    extra_reasons: dict[str, str] = field(default_factory=dict)
    # the placement as (cluster, replicas) sorted by cluster: what callers store and assume
    pairs: tuple[tuple[str, int], ...] = ()
    _placement: list[TargetCluster] | None = field(default=None, repr=False)
    estimated_hourly_cost: float | None = None  # F6: the placement at the clusters' prices
    data_moved_gib_per_hour: float | None = None  # F4: dataset reads from another cluster
    # F3: with a stateful topology, each placed cluster's role (Primary / Replica) and the choice
    roles: dict[str, str] = field(default_factory=dict)
    topology: dict[str, object] | None = None
    _rejections: list[Rejection] = field(default_factory=list, repr=False)
    _names: np.ndarray | None = field(default=None, repr=False)
    _reasons: dict[str, str] | None = field(default=None, repr=False)
    _rendered: dict[tuple[int, int], str] = field(default_factory=dict, repr=False)  # (rejection, k) → text
    # feasible clusters that still got nothing, explained lazily (Duplicated: too small for all replicas)
    _notes: list[Rejection] = field(default_factory=list, repr=False)
    _score_names: np.ndarray | None = field(default=None, repr=False)
    _options: Options | None = field(default=None, repr=False)
    # the candidates' snapshot rows (the score matrix's columns) and the snapshot's name → row, read only
    # by `totals_for` within the cycle that made the result (rows move when a cluster goes)
    _cand_rows: IntArr | None = field(default=None, repr=False)
    _row_of: Mapping[str, int] | None = field(default=None, repr=False)

    @property
    def placement(self) -> list[TargetCluster]:
        """The placement as API objects (built on first access from ``pairs``)."""
        if self._placement is None:
            self._placement = [TargetCluster(cluster=c, replicas=k) for c, k in self.pairs]
        return self._placement

    @property
    def score_arrays(self) -> dict[str, FloatArr]:
        """Per-plugin (and ``total``) scores of the clusters that received replicas, in
        ``score_names`` order (cut out of the candidates' arrays on first access)."""
        if self._score_arrays is None:
            cut = self._chosen_scores()
            self._score_arrays = {} if cut is None else dict(zip(self._score_keys, cut, strict=True))
        return self._score_arrays

    def _chosen_scores(self) -> FloatArr | None:
        if self._score_matrix is None or self._score_pos is None:
            return None
        return self._score_matrix[:, self._score_pos]

    @property
    def score_names(self) -> list[str]:
        """Clusters that received replicas, in the order of the ``score_arrays`` entries."""
        return [] if self._score_names is None else [str(x) for x in self._score_names.tolist()]

    @property
    def scores(self) -> dict[str, dict[str, float]]:
        """Per-plugin (and ``total``) scores of the clusters that received replicas."""
        cut = self._chosen_scores()
        if cut is None:
            return {}
        names = self.score_names
        return {p: dict(zip(names, row, strict=True))
                for p, row in zip(self._score_keys, cut.round(3).tolist(), strict=True)}

    def options(self) -> list[dict[str, object]]:
        """X1: the chosen clusters and the best unchosen feasible ones, each with its per-plugin
        scores, ``total``, replicas received and room (``options.py``)."""
        opts, matrix = self._options, self._score_matrix
        if opts is None or matrix is None:
            return []
        got = dict(self.pairs)
        cols = matrix[:, opts.positions].round(3).T.tolist()
        plugins = self._score_keys[:-1]
        out: list[dict[str, object]] = [
            {"cluster": nm, "replicas": got.get(nm, 0), "total": col[-1], "room": room,
             "scores": dict(zip(plugins, col[:-1], strict=True))}
            for nm, col, room in zip(opts.names, cols, opts.room, strict=True)]
        if opts.static_weights is not None:
            for o, w in zip(out, opts.static_weights, strict=True):
                o["staticWeight"] = w
        return out

    def totals_for(self, clusters: Iterable[str]) -> dict[str, float]:
        """The total score of each of ``clusters`` that was a feasible candidate, whether or not it is among
        the named options: a fleet refit weighs the clusters a binding would leave (it had counted one
        outside the best ten as scoring lower than every one of them)."""
        matrix, rows, index = self._score_matrix, self._cand_rows, self._row_of
        if matrix is None or rows is None or index is None:
            return {}
        name_of_row = {index[c]: c for c in clusters if c in index}
        if not name_of_row:
            return {}
        wanted = np.fromiter(name_of_row, dtype=rows.dtype, count=len(name_of_row))
        return {name_of_row[int(rows[p])]: round(float(matrix[-1, p]), 3)
                for p in np.flatnonzero(np.isin(rows, wanted))}

    def compact(self) -> None:
        """Keep of the candidates' scores only what explains the decision once it is made: the columns of
        the clusters that received replicas and of the named options. A decision over 10,000 clusters held
        ~0.5 MB of scores while it waited for its write, and a fleet's return had a thousand waiting.
        ``totals_for`` answers nothing afterwards (it serves the cycle that made the result)."""
        matrix, pos, opts = self._score_matrix, self._score_pos, self._options
        self._cand_rows = self._row_of = None
        if matrix is None or pos is None:
            return
        cols = np.unique(np.concatenate([pos, opts.positions]) if opts is not None else pos)
        if cols.size == matrix.shape[1]:
            return
        self._score_matrix = matrix[:, cols]
        self._score_pos = np.searchsorted(cols, pos)
        if opts is not None:
            self._options = replace(opts, positions=np.searchsorted(cols, opts.positions))

    @property
    def options_omitted(self) -> int:
        return 0 if self._options is None else self._options.omitted

    @property
    def partial(self) -> bool:
        return self.phase == "Scheduled" and self.placed < self.requested

    @property
    def held_back(self) -> bool:
        """A Duplicated placement that left a cluster out for room only (its water level, resources, GPUs
        or tier storage, or too small for every replica): room freed there may add its copy."""
        return self.division == "Duplicated" and self.phase == "Scheduled" and (
            bool(self._notes) or any(r.plugin in ROOM_FILTERS for r in self._rejections))

    @property
    def reasons(self) -> dict[str, str]:
        """Why each dropped cluster was dropped (materialised on first access)."""
        if self._reasons is None:
            out: dict[str, str] = {}
            names = self._names
            if names is not None:
                for rej in (*self._rejections, *self._notes):
                    for k, row in enumerate(rej.rows.tolist()):
                        out.setdefault(str(names[row]), rej.message(k))
            out.update(self.extra_reasons)
            self._reasons = out
        return self._reasons

    def reasons_sample(self, limit: int, per_reason: int | None = None) -> tuple[dict[str, str], int]:
        """At most ``limit`` per-cluster reasons (at most ``per_reason`` clusters of any one filter
        verdict) and how many there are in all, rendering only those it returns (a 10,000-cluster
        rejection costs ``limit`` strings, not 10,000)."""
        if self._reasons is not None and per_reason is None:
            return dict(list(self._reasons.items())[:limit]), len(self._reasons)
        total = len(self.extra_reasons) + sum(int(rej.rows.size) for rej in (*self._rejections, *self._notes))
        out: dict[str, str] = dict(list(self.extra_reasons.items())[:limit])  # the task's own named clusters first
        names = self._names
        if names is not None:
            rendered = self._rendered  # the status and the history entry sample mostly the same clusters
            for j, rej in enumerate((*self._rejections, *self._notes)):
                room = limit - len(out) if per_reason is None else min(limit - len(out), per_reason)
                if room <= 0:
                    break
                shown = names[rej.rows[:room]].tolist()
                if rej.detail is None and out.keys().isdisjoint(shown):
                    out.update(dict.fromkeys(shown, rej.reason))  # one text for all: nothing to render
                    continue
                for k, name in enumerate(shown):
                    text = rendered.get((j, k))
                    if text is None:
                        text = rendered[j, k] = rej.message(k)
                    out.setdefault(str(name), text)
        return out, total

    def reason_counts(self) -> dict[str, int]:
        c: Counter[str] = Counter()
        for rej in self._rejections:
            c[rej.reason] += int(rej.rows.size)
        return dict(c)

    def placement_dict(self) -> dict[str, int]:
        return dict(self.pairs)


# the filters that turn a cluster away for room alone (a Duplicated binding's copy waits there for it)
ROOM_FILTERS = frozenset({"WaterLevelLimit", "ResourceFit", "GpuStorageFit"})


@dataclass(slots=True)
class CycleState:
    """What one scheduling cycle has found so far, handed from step to step.

    Candidate arrays are by position into ``cand`` (the feasible rows, ascending); ``sel`` keeps
    some positions (None: all), ``rows_sel``/``caps_sel`` are the kept ones the division fills."""

    info: TaskInfo
    snap: Snapshot
    n: int
    t_start: float
    timings: dict[str, float]
    extra: dict[str, str]
    mask: BoolArr
    tried: list[str] = field(default_factory=list)
    cand: IntArr = field(default_factory=_no_rows)
    rejections: list[Rejection] = field(default_factory=list)
    kept_rows: IntArr = field(default_factory=_no_rows)
    base: dict[str, object] = field(default_factory=dict)
    has_existing: bool = False
    existing: IntArr = field(init=False)
    caps: FloatArr = field(init=False)
    fleet: float = 0.0
    adj: Adjustment = field(init=False)
    scores: list[tuple[ScorePlugin, float]] = field(init=False)
    stacked: FloatArr = field(init=False)  # one row per score plugin, the last the total
    wvec: FloatArr = field(init=False)
    total: FloatArr = field(init=False)
    prefer: FloatArr = field(init=False)
    overflow: bool = False
    sel: IntArr | None = None
    tier: IntArr | None = None  # per kept position: its tier when tiers are filled in order
    near_ceiling: str | None = None  # the division held the users' nearest band back: how
    required: IntArr = field(default_factory=_no_rows)  # positions that need at least one replica
    topo: TopologyChoice | None = None
    rows_sel: IntArr = field(default_factory=_no_rows)
    caps_sel: FloatArr = field(init=False)


def summarize(total: int, feasible: int, counts: Mapping[str, int]) -> str:
    """Kubernetes-style one-liner: ``0/5 clusters available: 3 water level above 85%, 2 ...``."""
    head = f"{feasible}/{total} clusters available"
    if not counts:
        return head + "."
    parts = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return head + ": " + ", ".join(f"{c} {r}" for r, c in parts) + "."


class Scheduler:
    """Runs scheduling cycles with one profile; ``rng_seed`` makes tie-breaks reproducible."""

    def __init__(self, profile: Profile | None = None, rng_seed: int | None = None) -> None:
        self.profile = profile or Profile.default()
        seed = rng_seed if rng_seed is not None else self.profile.spec.defaults.seed
        self.rng = np.random.default_rng(seed)
        # the users' shares divide the replicas while the UserLatency score is on
        user_latency = [p for p, _ in self.profile.scores if p.name == "UserLatency"]
        self.follows_users = bool(user_latency)
        args = getattr(user_latency[0], "args", {}) if user_latency else {}
        near = args.get("nearMs")
        self.near_ms = NEAR_MS if near is None else float(near)  # UserLatency pluginArgs nearMs
        margin = args.get("nearCeilingMargin", NEAR_CEILING_MARGIN)
        self.near_ceiling = None if margin is None else float(margin)  # and nearCeilingMargin
        slo = next((p for p in self.profile.filters if isinstance(p, UserLatencySLO)), None)
        self.slo_headroom = slo.headroom if slo is not None else 0.0

    # ------------------------------------------------------------------ helpers
    def _current(self, info: TaskInfo, snap: Snapshot) -> None:
        if not info.current:
            return
        rows: list[int] = []
        counts: list[int] = []
        for name, c in info.current.items():
            r = snap.index.get(name)
            if r is not None:
                rows.append(r)
                counts.append(c)
        info.current_rows = np.asarray(rows, dtype=np.intp)
        info.current_counts = np.asarray(counts, dtype=np.intp)

    def _filter(self, info: TaskInfo, snap: Snapshot, timings: dict[str, float]) -> tuple[BoolArr, list[Rejection]]:
        mask = np.ones(snap.n, dtype=bool)
        rejections: list[Rejection] = []
        perf = time.perf_counter
        prof = self.profile
        for p, skip in zip(prof.filters, prof.filter_skips, strict=True):
            if skip is not None and skip(info, snap):
                continue  # no input in this task (GpuStorageFit without a GPU or tier need)
            t0 = perf()
            mask, rej = p.filter(info, snap, mask)
            timings[p.name] = timings.get(p.name, 0.0) + (perf() - t0) * 1e3
            if rej:  # a filter that dropped nobody left the mask as it was
                rejections.extend(rej)
                if not mask.any():
                    break
        return mask, rejections

    def feasible(self, info: TaskInfo, snap: Snapshot) -> BoolArr:
        """The clusters the profile's filters admit for ``info`` (under the first affinity term that
        admits any, as a cycle tries them): what a score is normalised over."""
        mask = np.zeros(snap.n, dtype=bool)
        for term in info.affinity_terms:
            info.affinity = term
            mask, _ = self._filter(info, snap, {})
            if mask.any():
                break
        return mask

    @staticmethod
    def _keep_existing(info: TaskInfo, mask: BoolArr, rejections: list[Rejection]) -> tuple[BoolArr, IntArr]:
        """Current clusters dropped only by capacity filters keep their replicas (no growth)."""
        if info.rebalance or info.current_rows.size == 0:
            return mask, _NO_ROWS
        cur = info.current_rows[~mask[info.current_rows]]
        if cur.size == 0:
            return mask, _NO_ROWS
        kept = [rej.rows[np.isin(rej.rows, cur)] for rej in rejections if rej.capacity_only]
        if not kept:
            return mask, _NO_ROWS
        rows = np.concatenate(kept)
        mask = mask.copy()  # never write into an array a plugin may have cached
        mask[rows] = True
        return mask, rows

    @staticmethod
    def _select_spread(info: TaskInfo, snap: Snapshot, cand: IntArr, prefer: FloatArr,
                       caps: FloatArr) -> tuple[IntArr, IntArr, list[str]]:
        """Positions (into ``cand``) kept by spread constraints, positions that need ≥ 1 replica."""
        choice = select_spread(info, snap, cand, prefer, caps)
        return choice.keep, choice.required, choice.problems

    # ------------------------------------------------------------------ the cycle
    def schedule(
        self,
        task: Task | BindingSpec,
        snap: Snapshot,
        *,
        name: str = "",
        current: Sequence[TargetCluster] | None = None,
        signals: Mapping[str, float] | None = None,
    ) -> ScheduleResult:
        """One scheduling cycle for ``task`` against ``snap`` (not mutated; call ``snap.assume`` after).

        The steps of kube-scheduler's cycle, each reading and extending one ``CycleState``."""
        cyc = self._prefilter(task, snap, name, current)
        if not self._filter_terms(cyc):
            return self._unschedulable(cyc)
        self._estimate(cyc)
        self._score(cyc, signals)
        self._normalise(cyc)
        problem = self._select(cyc)
        if problem is not None:
            return self._unschedulable(cyc, extra_msg=problem, feasible=cyc.cand.size)
        return self._explain(cyc, self._divide(cyc))

    def _prefilter(self, task: Task | BindingSpec, snap: Snapshot, name: str,
                   current: Sequence[TargetCluster] | None) -> CycleState:
        """Analyse the task once (demand, division, affinity terms) and locate its current clusters."""
        t_start = time.perf_counter()
        d = self.profile.spec.defaults
        info = analyse(task, name=name, current=current, default_division=d.division,
                       default_limit=d.waterLevelLimit)
        self._current(info, snap)
        return CycleState(info, snap, snap.n, t_start, {}, {}, mask=np.zeros(snap.n, dtype=bool))

    def _filter_terms(self, cyc: CycleState) -> bool:
        """Filter under each affinity term in turn until one admits a cluster; True if one did."""
        info, snap = cyc.info, cyc.snap
        for term in info.affinity_terms:
            info.affinity = term
            cyc.mask, cyc.rejections = self._filter(info, snap, cyc.timings)
            cyc.mask, cyc.kept_rows = self._keep_existing(info, cyc.mask, cyc.rejections)
            cyc.cand = cyc.mask.nonzero()[0]
            if cyc.cand.size:
                break
            if term is not None and term.name:
                cyc.tried.append(term.name)
        for t in info.missing_targets:  # known once TargetClusters has looked
            cyc.extra[t] = "target cluster not registered"
        for t in info.missing_affinity_names:  # and ClusterAffinity, for the term that admitted some
            cyc.extra.setdefault(t, "named in clusterAffinity.clusterNames, not registered")
        for c, why in info.evicted:  # said so, not as the clusterAffinity.exclude that carries it
            if c in snap.index:
                cyc.extra[c] = why
        names_view = snap.names_arr[: cyc.n] if cyc.rejections else None  # copied before a row moves
        cyc.base = dict(
            name=info.key, requested=info.replicas, clusters=cyc.n, division=info.division,
            affinity_term=info.affinity.name if info.affinity is not None else None,
            analysis=info.analysis(), extra_reasons=cyc.extra, _rejections=cyc.rejections, _names=names_view,
        )
        return bool(cyc.cand.size)

    def _estimate(self, cyc: CycleState) -> None:
        """Existing replicas per candidate and how many more fit (estimators; 0 on kept-but-full)."""
        info, snap, cand = cyc.info, cyc.snap, cyc.cand
        m = cand.size
        existing = np.zeros(m, dtype=np.intp)
        if info.current_rows.size and not info.rebalance:
            pos = np.minimum(np.searchsorted(cand, info.current_rows), m - 1)
            hit = cand[pos] == info.current_rows
            existing[pos[hit]] = info.current_counts[hit]
            cyc.has_existing = bool(hit.any())
        cyc.existing = existing
        t0 = time.perf_counter()
        all_feasible = m == cyc.n
        extra_fit: FloatArr | None = None
        prof = self.profile
        for est, skip in zip(prof.estimators, prof.estimator_skips, strict=True):
            if skip is not None and skip(info, snap):
                continue
            fit = est.max_replicas(info, snap)
            if fit is None:
                continue
            if not all_feasible:
                fit = fit[cand]
            extra_fit = fit if extra_fit is None else np.minimum(extra_fit, fit, out=extra_fit)
        if extra_fit is None:
            extra_fit = np.full(m, np.inf)
        if cyc.kept_rows.size:
            extra_fit[np.isin(cand, cyc.kept_rows)] = 0.0
        cyc.caps = existing + extra_fit if cyc.has_existing else extra_fit
        cyc.timings["estimate"] = (time.perf_counter() - t0) * 1e3

    def _score(self, cyc: CycleState, signals: Mapping[str, float] | None) -> None:
        """Adjust the weights to the fleet (S5, S10), then one row per score plugin with input in
        this task (a plugin whose input the task doesn't use is skipped before any array work)."""
        perf = time.perf_counter
        info, snap, cand = cyc.info, cyc.snap, cyc.cand
        all_feasible = cand.size == cyc.n
        prof = self.profile
        t0 = perf()
        cyc.fleet = snap.fleet_water_level(None if all_feasible else cyc.mask)
        sig = signals if signals is not None else snap.signals
        cyc.adj = prof.adjuster.adjust(cyc.fleet, float(sig.get(SURGE_SIGNAL, 0.0)))
        cyc.timings["adjust"] = (perf() - t0) * 1e3
        cyc.scores = scores = [sc for sc, skip in zip(prof.scores, prof.score_skips, strict=True)
                               if skip is None or not skip(info, snap)]
        cyc.stacked = stacked = np.empty((len(scores) + 1, cand.size))  # the last row is the total
        for i, (plugin, _) in enumerate(scores):
            t0 = perf()
            raw = plugin.score(info, snap, cyc.mask)
            cyc.timings[plugin.name] = (perf() - t0) * 1e3
            stacked[i] = raw if all_feasible else np.asarray(raw)[cand]

    def _normalise(self, cyc: CycleState) -> None:
        """Clip each plugin's row to 0..100; the total is their weighted mean (100 with no weight)."""
        k = len(cyc.scores)
        rows_k = cyc.stacked[:k]
        np.minimum(np.maximum(rows_k, 0.0, out=rows_k), 100.0, out=rows_k)
        weights = cyc.adj.weights
        wlist = [max(weights.get(plugin.name, 0.0), 0.0) for plugin, _ in cyc.scores]
        cyc.wvec = np.array(wlist)
        wsum = sum(wlist)
        cyc.total = total = cyc.stacked[k]
        if wsum > 0:
            np.divide(np.dot(cyc.wvec, rows_k), wsum, out=total)
        else:
            total.fill(100.0)

    def _select(self, cyc: CycleState) -> str | None:
        """S6: rank (existing first, then total score to 1e-3, ties at random, seedable) and choose the
        clusters: a stateful topology, spread groups, affinity concentration or overflow tiers.
        Returns why nothing can be chosen, else None."""
        t0 = time.perf_counter()
        info, snap, cand = cyc.info, cyc.snap, cyc.cand
        prefer = np.rint(cyc.total * 1e3)
        if cyc.has_existing:
            prefer += (cyc.existing > 0) * 1e6
        prefer += self.rng.random(cand.size)
        cyc.prefer = prefer
        term = info.affinity
        cyc.overflow = overflow = term is not None and bool(term.overflow)
        problems: list[str] = []
        if info.topology is not None:  # F3: primary + replica clusters, no division
            topo, how = place_topology(info, snap, cand, prefer, cyc.caps, self._top_tier(cyc))
            if topo.primary is None:
                cyc.timings["select"] = (time.perf_counter() - t0) * 1e3
                return topo.message
            cyc.topo, cyc.sel = topo, topo.keep
            cyc.base["division"] = "StatefulTopology"
            cyc.base["topology"] = topo.record(how)
        elif term is not None and overflow:  # F6 overflowAffinities: earlier tiers rank first (Karmada 1.18)
            cyc.tier = overflow_tiers(snap, term, cand)
            prefer -= cyc.tier * 1e8
        if info.spread and cyc.topo is None:
            cyc.sel, cyc.required, problems = self._select_spread(info, snap, cand, prefer, cyc.caps)
        if cyc.tier is not None:
            if cyc.sel is not None:
                cyc.tier = cyc.tier[cyc.sel]
        elif cyc.topo is None and not info.spread:
            self._concentrate(cyc)
        cyc.timings["select"] = (time.perf_counter() - t0) * 1e3
        return "; ".join(problems) if problems else None

    def _affinity_rows(self, cyc: CycleState) -> list[int]:
        """Positions of the affinity score plugins with weight in this cycle."""
        return [i for i, (plugin, _) in enumerate(cyc.scores) if getattr(plugin, "affinity", False) and cyc.wvec[i] > 0]

    def _top_tier(self, cyc: CycleState) -> BoolArr | None:
        """Candidates of the best affinity (a stateful topology's primaries), when affinity separates them."""
        aff = self._affinity_rows(cyc)
        conc = self.profile.concentration
        if not (aff and conc.enabled):
            return None
        a = affinity_mean(cyc.stacked[aff], cyc.wvec[aff])
        if float(a.max() - a.min()) < conc.min_spread:
            return None
        return a >= float(a.max()) - conc.margin  # type: ignore[no-any-return]

    def _concentrate(self, cyc: CycleState) -> None:
        """Without spread constraints, affinity scores that clearly separate the candidates narrow
        them to the best-affinity tier plus best-first overflow (``concentrate.py``)."""
        prof, info = self.profile, cyc.info
        if not (prof.has_affinity and prof.concentration.enabled and info.division in _CONCENTRATED):
            return
        aff = self._affinity_rows(cyc)
        if not aff:  # only when an affinity plugin had input for this task
            return
        scores = cyc.scores
        traffic = next((p for i in aff if isinstance(p := scores[i][0], TrafficAffinity)), None)
        conc = concentrate(affinity_mean(cyc.stacked[aff], cyc.wvec[aff]), cyc.caps, cyc.existing, cyc.prefer,
                           info.replicas, prof.concentration, tuple(scores[i][0].name for i in aff),
                           fewest=any(getattr(scores[i][0], "repels", False) for i in aff),
                           anchors=None if traffic is None else traffic.anchors(info, cyc.snap)[cyc.cand])
        if conc is not None:
            cyc.sel, cyc.tier = conc.keep, conc.tier
            if conc.required.size:
                cyc.required = conc.required
            cyc.base["analysis"] = {**info.analysis(), "concentration": conc.record(cyc.cand.size)}

    @staticmethod
    def _levels_steps(info: TaskInfo, snap: Snapshot, rows: IntArr) -> tuple[FloatArr, FloatArr] | None:
        """Per position, its water level now and the level one replica adds (the larger of the resources
        the level counts); None when the level counts none of the workload's resources."""
        shape = replica_shape(info, snap)
        if not shape.wl_rs:
            return None
        return snap.water_level[rows], shape.step[rows][:, list(shape.wl_rs)].max(axis=1)

    def _ceiling(self, info: TaskInfo, snap: Snapshot, rows: IntArr,
                 levels_steps: tuple[FloatArr, FloatArr] | None) -> Ceiling | None:
        """How high a nearer band of the users' clusters fills while a farther one has room (None: to
        its caps)."""
        headroom = self.slo_headroom if info.latency_slo_ms is not None else 0.0
        if levels_steps is None or (self.near_ceiling is None and not headroom):
            return None
        margin = math.inf if self.near_ceiling is None else self.near_ceiling
        return Ceiling(*levels_steps, margin, limits=replica_shape(info, snap).limit[rows], headroom=headroom)

    @staticmethod
    def _top_clamp(info: TaskInfo, levels_steps: tuple[FloatArr, FloatArr] | None,
                   existing: IntArr) -> TopClamp | None:
        """A division near the users levels their clusters instead of piling new replicas onto the hottest
        (`drods.scheduler.divide._clamp_top`): they share the users' day, so a low one is not one whose day
        has not begun. Not for a division from scratch, whose own replicas a fleet change lifts from the
        levels; nor without users, where the water-level weights spread as S10 says."""
        if info.division != "WaterLevel" or info.rebalance or levels_steps is None:
            return None
        return TopClamp(*levels_steps, existing)

    def _divide(self, cyc: CycleState) -> IntArr:
        """S7, S10: replicas per selected candidate (in ``cyc.rows_sel`` order)."""
        t0 = time.perf_counter()
        info, snap, sel = cyc.info, cyc.snap, cyc.sel
        if sel is None:
            rows_sel, caps_sel, existing_sel = cyc.cand, cyc.caps, cyc.existing
            total_sel, prefer_sel = cyc.total, cyc.prefer
        else:
            rows_sel, caps_sel, existing_sel = cyc.cand[sel], cyc.caps[sel], cyc.existing[sel]
            total_sel, prefer_sel = cyc.total[sel], cyc.prefer[sel]
        cyc.rows_sel, cyc.caps_sel = rows_sel, caps_sel
        required_sel: IntArr | None = None
        if cyc.required.size:
            remap = np.full(cyc.cand.size, -1, dtype=np.intp)
            remap[sel if sel is not None else slice(None)] = np.arange(rows_sel.size)
            required_sel = remap[cyc.required]
        static_w: FloatArr | None = None
        if info.division == "StaticWeight":
            # Karmada: exact ties go by cluster name; only weighted clusters need ranking
            static_w = self._static_weights(info, snap, rows_sel)
            prefer_sel = np.where(static_w > 0, -snap.name_rank()[rows_sel].astype(np.float64), -np.inf)
            if cyc.has_existing:
                prefer_sel = prefer_sel + (existing_sel > 0) * 1e9
        inp = DivisionInput(
            kind=info.division, total=info.replicas, caps=caps_sel, existing=existing_sel,
            scores=total_sel, prefer=prefer_sel, spread=cyc.adj.spread, static_weights=static_w,
            required=required_sel, keep_existing=not info.rebalance,
        )
        price_sel: FloatArr | None = None
        if info.cost_first and info.division not in ("Duplicated", "StaticWeight") and priced(snap):
            price_sel = replica_price(info, snap, rows=rows_sel)
            cyc.base["division"] = "CostFirst"
        if cyc.topo is not None:
            counts = cyc.topo.counts
        elif cyc.tier is not None and cyc.tier.size and int(cyc.tier.max()) > 0:
            counts = divide_in_tiers(inp, cyc.tier, _tier_fill(price_sel), regroup=cyc.overflow)
        elif price_sel is not None:
            counts = cheapest_fill(info.replicas, caps_sel, existing_sel, price_sel, prefer_sel,
                                   keep_existing=not info.rebalance)
        elif (users := info.users) is not None and self.follows_users and not info.spread and \
                info.division in ("WaterLevel", "AvailableReplicas"):
            lat = latency_matrix(snap, users)[:, rows_sel]
            group = nearest_user(lat, info.latency_slo_ms)
            own = np.where(group >= 0, lat[np.maximum(group, 0), np.arange(group.size)], np.fmin.reduce(lat, axis=0))
            levels_steps = self._levels_steps(info, snap, rows_sel)
            ceiling = self._ceiling(info, snap, rows_sel, levels_steps)
            inp.clamp = self._top_clamp(info, levels_steps, existing_sel)
            counts = divide_by_users(inp, group, users.weights, own, near_ms=self.near_ms, ceiling=ceiling)
            if ceiling is not None and ceiling.held_back:
                cyc.near_ceiling = (
                    f"the users' nearest clusters were filled no higher than water level "
                    f"{max(ceiling.held_back):.2f} (their group's mean + {ceiling.margin:g}); the rest went to "
                    f"clusters farther "
                    f"{'within the SLO' if info.latency_slo_ms is not None else 'away'}")
        else:
            counts = divide(inp)
        cyc.timings["divide"] = (time.perf_counter() - t0) * 1e3
        return counts

    def _explain(self, cyc: CycleState, counts: IntArr) -> ScheduleResult:
        """The placement sorted by cluster name, with its scores, notes, cost and message."""
        info, snap, base, n, m = cyc.info, cyc.snap, cyc.base, cyc.n, cyc.cand.size
        chosen = (counts > 0).nonzero()[0]
        rows, cnt = cyc.rows_sel[chosen], counts[chosen]
        if rows.size > 1 and not (cyc.sel is None and snap.name_ordered()):  # else rows ascend by name
            order = np.argsort(snap.name_rank()[rows], kind="stable")
            rows, cnt, chosen = rows[order], cnt[order], chosen[order]
        names_arr = snap.names_arr
        counts_list = cnt.tolist()
        pairs = tuple(zip(names_arr[rows].tolist(), counts_list, strict=True))
        duplicated = info.division == "Duplicated"
        placed = sum(counts_list) if not duplicated else (info.replicas if rows.size else 0)
        base["_notes"] = self._duplicated_notes(cyc) if duplicated else []
        base["_score_matrix"] = cyc.stacked
        base["_score_keys"] = (*(p.name for p, _ in cyc.scores), "total")
        base["_score_pos"] = chosen if cyc.sel is None else cyc.sel[chosen]
        base["_score_names"] = names_arr[rows]
        opts = weigh_options(names_arr, cyc.cand, cyc.stacked[-1], base["_score_pos"], cyc.caps)  # type: ignore[arg-type]
        if info.division == "StaticWeight":  # why a feasible cluster got nothing: its weight, not its score
            weights = static_weights(snap, info.static_weights)
            if (weights[cyc.rows_sel] > 0).any():  # else every cluster weighed 1 (Karmada)
                opts = replace(opts, static_weights=tuple(weights[cyc.cand[opts.positions]].tolist()))
        base["_options"] = opts
        base["_cand_rows"], base["_row_of"] = cyc.cand, snap.index
        per_cluster = cnt if not duplicated else np.full(rows.size, info.replicas, dtype=np.intp)
        est_cost = hourly_cost(info, snap, rows, per_cluster)
        moved = moved_gib_per_hour(info, snap, rows, per_cluster)
        analysis = base["analysis"]
        if info.users is not None and isinstance(analysis, dict) and isinstance(users := analysis.get("users"), dict):
            latency, nearest = chosen_latency(snap, info.users, rows)
            users = {**users, "latencyMs": latency, "latencyFrom": nearest}
            if unknown := unknown_places(snap, info.users):
                users["unknownPlaces"] = unknown
            if cyc.near_ceiling is not None:  # set by this cycle's division, after the analysis was taken
                users["nearCeiling"] = cyc.near_ceiling
            base["analysis"] = {**analysis, "users": users}
        if info.demand is not None and (room := headroom(info, snap, rows, per_cluster)):
            base["analysis"] = {**base["analysis"], "headroom": room}  # type: ignore[dict-item]  # F1/S3
        cyc.timings["total"] = (time.perf_counter() - cyc.t_start) * 1e3
        adj = cyc.adj
        if not pairs and info.replicas > 0:
            summary = summarize(n, m, base_counts(cyc.rejections))
            msg = f"0/{info.replicas} replicas placed: the {m} feasible clusters have no room ({summary})"
            if duplicated:
                msg = f"no feasible cluster fits all {info.replicas} replicas (Duplicated); " + summary
            return ScheduleResult(phase="Unschedulable", placed=0, message=msg, feasible=m,
                                  weights=adj.weights, spread=adj.spread, fleet_water_level=cyc.fleet,
                                  surge=adj.surge, timings_ms=cyc.timings, **base)  # type: ignore[arg-type]
        topo = cyc.topo
        if topo is not None:
            base["roles"] = topo.roles()
        if topo is not None and topo.message:
            msg = f"partially scheduled: placed {placed}/{info.replicas} replicas; {topo.message}"
        elif placed < info.replicas:
            msg = (f"partially scheduled: placed {placed}/{info.replicas} replicas on {len(pairs)} "
                   f"clusters; the {cyc.rows_sel.size} selected feasible clusters can hold no more "
                   "(resource fit / water-level limit)")
        else:
            msg = f"scheduled {placed} replica{'' if placed == 1 else 's'} on {len(pairs)}/{n} clusters ({m} feasible)"
        if info.missing_targets:  # placed on the others: the status still names the ones that are not there
            msg += f"; target clusters not registered: {', '.join(info.missing_targets)}"
        if info.missing_affinity_names:
            msg += f"; clusterAffinity.clusterNames not registered: {', '.join(info.missing_affinity_names)}"
        if unknown_data := [key for key, _ in info.datasets if key not in snap.datasets]:
            msg += (f"; no copy of {', '.join(unknown_data)} on any cluster (no such Dataset, or no location): "
                    "its reads counted as from another cluster")
        if "latencySLO" in info.cache:  # the users' SLO could not hold every replica: said where it is read
            msg = f"{msg}; {info.cache['latencySLO']}"
        elif info.latency_slo_ms is not None and info.users is None:
            msg = (f"{msg}; latency SLO {info.latency_slo_ms:g} ms not applied: no users known yet "
                   "(placement.users, or learned from the demand of the workload's ServiceRegistration)")
        return ScheduleResult(
            phase="Scheduled", pairs=pairs, placed=placed, message=msg, feasible=m,
            weights=adj.weights, spread=adj.spread, fleet_water_level=cyc.fleet, surge=adj.surge,
            timings_ms=cyc.timings, estimated_hourly_cost=est_cost, data_moved_gib_per_hour=moved,
            **base,  # type: ignore[arg-type]
        )

    @staticmethod
    def _duplicated_notes(cyc: CycleState) -> list[Rejection]:
        """Duplicated: the selected feasible clusters too small for all replicas, explained lazily."""
        need = cyc.info.replicas
        short = (cyc.caps_sel < need).nonzero()[0]
        if not short.size:
            return []
        if cyc.base["_names"] is None:
            cyc.base["_names"] = cyc.snap.names_arr[: cyc.n]
        return [Rejection(f"Duplicated needs {need} replicas", cyc.rows_sel[short], "Duplicated",
                          _short_detail(cyc.caps_sel[short], need))]

    @staticmethod
    def _static_weights(info: TaskInfo, snap: Snapshot, rows: IntArr) -> FloatArr:
        """Karmada: a cluster's weight is the highest rule matching it; none matching → all weight 1."""
        w = static_weights(snap, info.static_weights)[rows]
        if not (w > 0).any():
            w = np.ones(rows.size)
        return w

    def _unschedulable(self, cyc: CycleState, extra_msg: str = "", feasible: int = 0) -> ScheduleResult:
        info, base, rejections = cyc.info, cyc.base, cyc.rejections
        msg = summarize(cyc.n, feasible, base_counts(rejections))
        if len(cyc.tried) > 1:
            msg = f"no feasible cluster in affinity groups [{', '.join(cyc.tried)}]; " + msg
        if info.missing_targets:
            msg += f" Target clusters not registered: {', '.join(info.missing_targets)}."
        if info.missing_affinity_names:
            msg += f" clusterAffinity.clusterNames not registered: {', '.join(info.missing_affinity_names)}."
        if info.targets:
            by_row: dict[str, str] = {}
            names = base.get("_names")
            if isinstance(names, np.ndarray):
                for rej in rejections:
                    for k, row in enumerate(rej.rows.tolist()):
                        by_row.setdefault(str(names[row]), rej.message(k))
            details = [f"{t}: {by_row[t]}" for t in info.targets if t in by_row][:10]
            if details:
                msg += " Targets: " + "; ".join(details) + "."
        if extra_msg:
            msg += " " + extra_msg
        cyc.timings["total"] = (time.perf_counter() - cyc.t_start) * 1e3
        return ScheduleResult(phase="Unschedulable", placed=0, message=msg, feasible=feasible,
                              timings_ms=cyc.timings, **base)  # type: ignore[arg-type]

def _tier_fill(price: FloatArr | None) -> Callable[[DivisionInput, IntArr], IntArr]:
    """One tier's division: the task's own, or cost-first at the kept clusters' ``price``."""
    if price is None:
        return lambda d, _pos: divide(d)
    return lambda d, pos: cheapest_fill(d.total, d.caps, d.existing, price[pos], d.prefer,
                                        keep_existing=d.keep_existing)


def _short_detail(fit: FloatArr, need: int) -> Callable[[int], str]:
    return lambda k: f"only {int(fit[k])} replicas fit (Duplicated needs {need})"


def base_counts(rejections: list[Rejection]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for rej in rejections:
        c[rej.reason] += int(rej.rows.size)
    return dict(c)
