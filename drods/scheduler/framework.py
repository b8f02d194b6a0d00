"""The scheduling cycle (S3-S7): analyse → filter → score (adjusted weights) → select → divide.

``Scheduler.schedule`` is pure with respect to the snapshot: it reads it and returns a
``ScheduleResult``; the caller then records the decision with ``snap.assume(...)`` (S7) so the
next task sees it. Everything a decision used — filter reasons, per-plugin scores, the adjuster's
weights, timings — is in the result so ``history/schedules`` can explain it.

Selection (S6): candidates are ranked by total score (weighted mean of the enabled score plugins,
0..100); exact ties are broken by a seedable RNG. Clusters already hosting the workload rank
first among equals. Spread constraints choose groups and clusters together (``groups.py``): the
best-ranked selection that meets every constraint and, when it can, holds the replicas; one
replica goes to each of the first ``minGroups`` groups when replicas allow.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from drods.model.binding import BindingSpec, TargetCluster
from drods.scheduler.cost_first import cheapest_fill
from drods.scheduler.divide import DivisionInput, divide
from drods.scheduler.groups import select_spread
from drods.scheduler.interface import BoolArr, FloatArr, IntArr, Rejection
from drods.scheduler.plugins.data_locality import moved_gib_per_hour
from drods.scheduler.pricing import hourly_cost, priced, replica_price
from drods.scheduler.profile import Profile
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import Task, TaskInfo, analyse

Phase = Literal["Scheduled", "Unschedulable"]
SURGE_SIGNAL = "trafficSurge"


@dataclass(slots=True)
class ScheduleResult:
    """The decision for one task, with everything needed to explain it."""

    name: str
    phase: Phase
    placement: list[TargetCluster]
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
    score_names: list[str] = field(default_factory=list)
    score_arrays: dict[str, FloatArr] = field(default_factory=dict, repr=False)
    timings_ms: dict[str, float] = field(default_factory=dict)
    analysis: dict[str, object] = field(default_factory=dict)
    extra_reasons: dict[str, str] = field(default_factory=dict)
    estimated_hourly_cost: float | None = None  # F6: the placement at the clusters' prices
    data_moved_gib_per_hour: float | None = None  # F4: dataset reads from another cluster
    _rejections: list[Rejection] = field(default_factory=list, repr=False)
    _names: np.ndarray | None = field(default=None, repr=False)
    _reasons: dict[str, str] | None = field(default=None, repr=False)

    @property
    def scores(self) -> dict[str, dict[str, float]]:
        """Per-plugin (and ``total``) scores of the clusters that received replicas."""
        return {p: {nm: round(float(v), 3) for nm, v in zip(self.score_names, arr.tolist(), strict=True)}
                for p, arr in self.score_arrays.items()}

    @property
    def partial(self) -> bool:
        return self.phase == "Scheduled" and self.placed < self.requested

    @property
    def reasons(self) -> dict[str, str]:
        """Why each dropped cluster was dropped (materialised on first access)."""
        if self._reasons is None:
            out: dict[str, str] = {}
            names = self._names
            if names is not None:
                for rej in self._rejections:
                    for k, row in enumerate(rej.rows.tolist()):
                        out.setdefault(str(names[row]), rej.message(k))
            out.update(self.extra_reasons)
            self._reasons = out
        return self._reasons

    def reasons_sample(self, limit: int) -> tuple[dict[str, str], int]:
        """At most ``limit`` per-cluster reasons and how many there are in all, rendering only
        those it returns (a 10,000-cluster rejection costs ``limit`` strings, not 10,000)."""
        if self._reasons is not None:
            return dict(list(self._reasons.items())[:limit]), len(self._reasons)
        total = len(self.extra_reasons) + sum(int(rej.rows.size) for rej in self._rejections)
        out: dict[str, str] = {}
        names = self._names
        if names is not None:
            for rej in self._rejections:
                room = limit - len(out)
                if room <= 0:
                    break
                for k, row in enumerate(rej.rows[:room].tolist()):
                    out.setdefault(str(names[row]), rej.message(k))
        for nm, why in self.extra_reasons.items():
            if len(out) >= limit:
                break
            out[nm] = why
        return out, total

    def reason_counts(self) -> dict[str, int]:
        c: Counter[str] = Counter()
        for rej in self._rejections:
            c[rej.reason] += int(rej.rows.size)
        return dict(c)

    def placement_dict(self) -> dict[str, int]:
        return {t.cluster: t.replicas for t in self.placement}


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

    # ------------------------------------------------------------------ helpers
    def _current(self, info: TaskInfo, snap: Snapshot) -> None:
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
        for p in self.profile.filters:
            t0 = perf()
            mask, rej = p.filter(info, snap, mask)
            timings[p.name] = timings.get(p.name, 0.0) + (perf() - t0) * 1e3
            if rej:
                rejections.extend(rej)
            if not mask.any():
                break
        return mask, rejections

    @staticmethod
    def _keep_existing(info: TaskInfo, mask: BoolArr, rejections: list[Rejection]) -> tuple[BoolArr, IntArr]:
        """Current clusters dropped only by capacity filters keep their replicas (no growth)."""
        none = np.zeros(0, dtype=np.intp)
        if info.rebalance or info.current_rows.size == 0:
            return mask, none
        cur = info.current_rows[~mask[info.current_rows]]
        if cur.size == 0:
            return mask, none
        kept = [rej.rows[np.isin(rej.rows, cur)] for rej in rejections if rej.capacity_only]
        if not kept:
            return mask, none
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
        """One scheduling cycle for ``task`` against ``snap`` (not mutated; call ``snap.assume`` after)."""
        perf = time.perf_counter
        t_start = perf()
        prof = self.profile
        d = prof.spec.defaults
        info = analyse(task, name=name, current=current, default_division=d.division,
                       default_limit=d.waterLevelLimit)
        n = snap.n
        timings: dict[str, float] = {}
        self._current(info, snap)
        extra: dict[str, str] = {}
        tried: list[str] = []
        mask = np.zeros(n, dtype=bool)
        rejections: list[Rejection] = []
        kept_rows = np.zeros(0, dtype=np.intp)
        for term in info.affinity_terms:
            info.affinity = term
            mask, rejections = self._filter(info, snap, timings)
            mask, kept_rows = self._keep_existing(info, mask, rejections)
            if mask.any():
                break
            if term is not None and term.name:
                tried.append(term.name)
        for t in info.missing_targets:
            extra[t] = "target cluster not registered"
        term_name = info.affinity.name if info.affinity is not None else None
        names_copy = snap.names_arr[:n].copy() if rejections else None
        base = dict(
            name=info.key, requested=info.replicas, clusters=n, division=info.division,
            affinity_term=term_name, analysis=info.analysis(), extra_reasons=extra,
            _rejections=rejections, _names=names_copy,
        )
        if not mask.any():
            return self._unschedulable(info, n, rejections, tried, extra, timings, t_start, base)

        cand = np.flatnonzero(mask)
        m = cand.size
        # existing replicas per candidate position
        existing = np.zeros(m, dtype=np.intp)
        if info.current_rows.size and not info.rebalance:
            pos = np.searchsorted(cand, info.current_rows)
            pos = np.minimum(pos, m - 1)
            hit = cand[pos] == info.current_rows
            existing[pos[hit]] = info.current_counts[hit]
        # how many more replicas fit (estimators), capped to 0 on kept-but-full clusters
        t0 = perf()
        extra_fit = np.full(m, np.inf)
        for est in prof.estimators:
            np.minimum(extra_fit, est.max_replicas(info, snap)[cand], out=extra_fit)
        if kept_rows.size:
            extra_fit[np.isin(cand, kept_rows)] = 0.0
        caps = existing + extra_fit
        timings["estimate"] = (perf() - t0) * 1e3

        # scores with adjusted weights (S5, S10)
        t0 = perf()
        fleet = snap.fleet_water_level(mask)
        sig = signals if signals is not None else snap.signals
        adj = prof.adjuster.adjust(fleet, float(sig.get(SURGE_SIGNAL, 0.0)))
        timings["adjust"] = (perf() - t0) * 1e3
        total = np.zeros(m)
        wsum = 0.0
        per_plugin: dict[str, FloatArr] = {}
        for plugin, _ in prof.scores:
            skip = getattr(plugin, "skip", None)
            if skip is not None and skip(info, snap):
                continue  # no input for this plugin in this task: no array work, no weight
            w = adj.weights.get(plugin.name, 0.0)
            t0 = perf()
            s = np.asarray(plugin.score(info, snap, mask), dtype=np.float64)[cand]
            timings[plugin.name] = (perf() - t0) * 1e3
            np.clip(s, 0.0, 100.0, out=s)
            per_plugin[plugin.name] = s
            if w > 0:
                total += w * s
                wsum += w
        total = total / wsum if wsum > 0 else np.full(m, 100.0)

        # S6: preference = existing first, then total score (to 1e-3), ties at random (seedable)
        t0 = perf()
        rand = self.rng.random(m)
        prefer = (existing > 0) * 1e6 + np.round(total, 3) * 1e3 + rand
        sel = np.arange(m)
        required = np.zeros(0, dtype=np.intp)
        problems: list[str] = []
        if info.spread:
            sel, required, problems = self._select_spread(info, snap, cand, prefer, caps)
        timings["select"] = (perf() - t0) * 1e3
        if problems:
            extra_msg = "; ".join(problems)
            return self._unschedulable(info, n, rejections, tried, extra, timings, t_start, base,
                                       extra_msg=extra_msg, feasible=m)

        # divide (S7, S10)
        t0 = perf()
        remap = np.full(m, -1, dtype=np.intp)
        remap[sel] = np.arange(sel.size)
        static_w: FloatArr | None = None
        prefer_sel = prefer[sel]
        if info.division == "StaticWeight":
            # Karmada: exact ties go by cluster name; only weighted clusters need ranking
            static_w = self._static_weights(info, snap, cand[sel])
            prefer_sel = np.full(sel.size, -np.inf)
            wpos = np.flatnonzero(static_w > 0)
            names_w = snap.names_arr[cand[sel[wpos]]].astype(str)
            prefer_sel[wpos] = -np.argsort(np.argsort(names_w, kind="stable")).astype(np.float64)
            prefer_sel = prefer_sel + (existing[sel] > 0) * 1e9
        inp = DivisionInput(
            kind=info.division, total=info.replicas, caps=caps[sel], existing=existing[sel],
            scores=total[sel], prefer=prefer_sel, spread=adj.spread, static_weights=static_w,
            required=remap[required] if required.size else None, keep_existing=not info.rebalance,
        )
        if info.cost_first and info.division not in ("Duplicated", "StaticWeight") and priced(snap):
            price = replica_price(info, snap)[cand[sel]]
            counts = cheapest_fill(info.replicas, caps[sel], existing[sel], price, prefer_sel,
                                   keep_existing=not info.rebalance)
            base["division"] = "CostFirst"
        else:
            counts = divide(inp)
        timings["divide"] = (perf() - t0) * 1e3

        chosen = np.flatnonzero(counts > 0)
        rows = cand[sel][chosen]
        cnt = counts[chosen]
        order = np.argsort(snap.names_arr[rows].astype(str), kind="stable") if rows.size > 1 else np.arange(rows.size)
        placement = [TargetCluster.model_construct(cluster=str(snap.names_arr[rows[i]]), replicas=int(cnt[i]))
                     for i in order.tolist()]
        placed = int(cnt.sum()) if info.division != "Duplicated" else (info.replicas if rows.size else 0)
        if info.division == "Duplicated":
            short = np.flatnonzero(caps[sel] < info.replicas)
            for p in short.tolist():
                nm = str(snap.names_arr[cand[sel][p]])
                fit = caps[sel][p]
                extra[nm] = f"only {int(fit)} replicas fit (Duplicated needs {info.replicas})"
        chosen_pos = sel[chosen]
        per_cluster = cnt if info.division != "Duplicated" else np.full(rows.size, info.replicas, dtype=np.intp)
        est_cost = hourly_cost(info, snap, rows, per_cluster)
        moved = moved_gib_per_hour(info, snap, rows, per_cluster)
        score_arrays = {pn: arr[chosen_pos] for pn, arr in per_plugin.items()}
        score_arrays["total"] = total[chosen_pos]
        score_names = [str(x) for x in snap.names_arr[cand[chosen_pos]]]
        timings["total"] = (perf() - t_start) * 1e3
        if not placement and info.replicas > 0:
            msg = (f"0/{info.replicas} replicas placed: the {m} feasible clusters have no room "
                   f"({summarize(n, m, base_counts(rejections))})")
            if info.division == "Duplicated":
                msg = (f"no feasible cluster fits all {info.replicas} replicas (Duplicated); "
                       + summarize(n, m, base_counts(rejections)))
            return ScheduleResult(phase="Unschedulable", placement=[], placed=0, message=msg, feasible=m,
                                  weights=adj.weights, spread=adj.spread, fleet_water_level=fleet,
                                  surge=adj.surge, timings_ms=timings, **base)  # type: ignore[arg-type]
        if placed < info.replicas:
            msg = (f"partially scheduled: placed {placed}/{info.replicas} replicas on {len(placement)} "
                   f"clusters; the {sel.size} selected feasible clusters can hold no more "
                   "(resource fit / water-level limit)")
        else:
            msg = f"scheduled {placed} replicas on {len(placement)}/{n} clusters ({m} feasible)"
        return ScheduleResult(
            phase="Scheduled", placement=placement, placed=placed, message=msg, feasible=m,
            weights=adj.weights, spread=adj.spread, fleet_water_level=fleet, surge=adj.surge,
            score_names=score_names, score_arrays=score_arrays, timings_ms=timings,
            estimated_hourly_cost=est_cost, data_moved_gib_per_hour=moved, **base,  # type: ignore[arg-type]
        )

    def _static_weights(self, info: TaskInfo, snap: Snapshot, rows: IntArr) -> FloatArr:
        """Karmada: a cluster's weight is the highest rule matching it; none matching → all weight 1."""
        from drods.scheduler.selectors import affinity_mask

        w = np.zeros(rows.size)
        for term, weight in info.static_weights:
            m = affinity_mask(snap, term)[rows]
            np.maximum(w, np.where(m, float(weight), 0.0), out=w)
        if not (w > 0).any():
            w[:] = 1.0
        return w

    def _unschedulable(self, info: TaskInfo, n: int, rejections: list[Rejection], tried: list[str],
                       extra: dict[str, str], timings: dict[str, float], t_start: float,
                       base: dict[str, object], extra_msg: str = "", feasible: int = 0) -> ScheduleResult:
        counts = base_counts(rejections)
        msg = summarize(n, feasible, counts)
        if len(tried) > 1:
            msg = f"no feasible cluster in affinity groups [{', '.join(tried)}]; " + msg
        if info.missing_targets:
            msg += f" Target clusters not registered: {', '.join(info.missing_targets)}."
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
        timings["total"] = (time.perf_counter() - t_start) * 1e3
        return ScheduleResult(phase="Unschedulable", placement=[], placed=0, message=msg, feasible=feasible,
                              timings_ms=timings, **base)  # type: ignore[arg-type]


def base_counts(rejections: list[Rejection]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for rej in rejections:
        c[rej.reason] += int(rej.rows.size)
    return dict(c)
