"""GPUs by model and storage by tier as consumed capacity (F1, S3): filter and replica estimator.

A replica needing N GPUs of an eligible model (the named ``gpuModel``, or any model at least
``minGpuPerformance`` fast, or any model) fits ``Σ floor(free / N)`` times over the cluster's
eligible models; one needing S GiB of ``storageTier`` fits ``floor(free / S)`` times. Free counts
what the member reports allocated and what placed bindings hold (``offers.py``). Which models
and tiers a cluster offers at all is the Capability filter's business; a model or tier whose count
is not stated is not enforced here. A task that needs neither skips this plugin before any array
work.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.offers import OfferDemand, gpu_columns, gpu_eligible, gpu_fit, tier_fit
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def gpu_label(d: OfferDemand) -> str:
    """The GPUs a replica may use, as reasons name them."""
    if d.gpu_model is not None and d.min_gpu_perf is not None:
        return f"GPUs ({d.gpu_model}, relative performance >= {d.min_gpu_perf:g})"
    if d.gpu_model is not None:
        return f"GPUs ({d.gpu_model})"
    if d.min_gpu_perf is not None:
        return f"GPUs (relative performance >= {d.min_gpu_perf:g})"
    return "GPUs"


def _detail(what: str, need: float, unit: str, free: FloatArr) -> Callable[[IntArr], Callable[[int], str]]:
    def make(rows: IntArr) -> Callable[[int], str]:
        vals = free[rows]
        return lambda k: f"insufficient {what}: need {need:g}{unit} per replica, free {float(vals[k]):g}{unit}"

    return make


_Fits = tuple[FloatArr | None, FloatArr | None, FloatArr | None, FloatArr | None]


class GpuStorageFit(PluginBase):
    name = "GpuStorageFit"
    capacity_only = True

    @staticmethod
    def skip(task: TaskInfo, snap: Snapshot) -> bool:
        return task.demand is None

    @staticmethod
    def _fits(task: TaskInfo, snap: Snapshot) -> _Fits:
        """(GPU fit, free GPUs, tier fit, free GiB) per cluster this cycle (whole columns: cheaper
        than picking the mask's rows); None for what the task does not need."""
        hit = task.cache.get("offer-fit")
        if hit is not None and hit[0] == snap.version:
            return hit[1]  # type: ignore[no-any-return]
        d = task.demand
        assert d is not None
        g_fit = g_free = t_fit = t_free = None
        if d.uses_gpus:
            g_fit, g_free = gpu_fit(snap.offers.gpus, d, snap.n)
        if d.uses_tier:
            t_fit, t_free = tier_fit(snap.offers.tiers, d, snap.n)
        fits: _Fits = (g_fit, g_free, t_fit, t_free)
        task.cache["offer-fit"] = (snap.version, fits)
        return fits

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        d = task.demand
        if d is None:
            return mask, []
        g_fit, g_free, t_fit, t_free = self._fits(task, snap)
        out: list[Rejection] = []
        if g_fit is not None and g_free is not None:
            short = g_fit < 1
            drop = mask & short
            if drop.any():
                what = gpu_label(d)
                out.append(reject(self.name, f"insufficient {what}", drop, _detail(what, d.gpus, "", g_free),
                                  capacity_only=True))
                mask = mask & ~short
        if t_fit is not None and t_free is not None:
            short = t_fit < 1
            drop = mask & short
            if drop.any():
                what = f"storage tier {d.storage_tier}"
                out.append(reject(self.name, f"insufficient {what}", drop,
                                  _detail(what, d.storage_gib, " GiB", t_free), capacity_only=True))
                mask = mask & ~short
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr | None:
        if task.demand is None:
            return None
        g_fit, _, t_fit, _ = self._fits(task, snap)
        if g_fit is not None and t_fit is not None:
            return np.minimum(g_fit, t_fit)  # type: ignore[no-any-return]
        fit = g_fit if g_fit is not None else t_fit
        assert fit is not None
        return fit


def headroom(task: TaskInfo, snap: Snapshot, rows: IntArr, counts: IntArr) -> dict[str, object]:
    """The S3 analysis of a placement's GPU-by-model and storage-by-tier use: per chosen cluster
    the free amount the decision saw (with what this binding itself holds or has assumed there
    counted as free) and what the placement uses of it. Empty where no chosen cluster states a
    count of what the task needs."""
    d = task.demand
    if d is None or rows.size == 0:
        return {}
    gpus, tiers = snap.offers.gpus, snap.offers.tiers
    own_gpu: dict[tuple[str, str], float] = {}
    own_tier: dict[str, float] = {}
    for table_of, reported in ((snap.offers.placements, False), (snap.offers.assumed, True)):
        held = table_of.get(task.key)
        if held is None:
            continue
        for name, model, amount in held[0]:
            row = snap.index.get(name)
            if row is not None and bool(gpus.reports[row, gpus.keys[model]]) == reported:
                own_gpu[(name, model)] = own_gpu.get((name, model), 0.0) + amount
        for name, tier, amount in held[1]:
            row = snap.index.get(name)
            if row is not None and bool(tiers.reports[row, tiers.keys[tier]]) == reported:
                own_tier[name] = own_tier.get(name, 0.0) + amount
    out: dict[str, object] = {}
    names = [str(x) for x in snap.names_arr[rows].tolist()]
    if d.uses_gpus:
        cols = gpu_columns(gpus, d)
        elig = gpu_eligible(gpus, d, snap.n, rows, cols)
        free = gpus.free_at(np.ix_(rows, np.asarray(cols, dtype=np.intp)))
        models = gpus.key_names
        per: dict[str, object] = {}
        for i, (name, k) in enumerate(zip(names, counts.tolist(), strict=True)):
            mine = [j for j in range(len(cols)) if elig[i, j]]
            if not mine:
                continue
            per[name] = {"free": {models[cols[j]]: max(0.0, float(free[i, j]))
                                  + own_gpu.get((name, models[cols[j]]), 0.0) for j in mine},
                         "used": float(k * d.gpus)}
        if per:
            out["gpus"] = {"perReplica": d.gpus, "eligible": gpu_label(d), "clusters": per}
    if d.uses_tier:
        col = tiers.keys.get(d.storage_tier or "")
        per = {}
        if col is not None:
            free_t = tiers.free_at((rows, col))
            for i, (name, k) in enumerate(zip(names, counts.tolist(), strict=True)):
                if not np.isnan(free_t[i]):
                    per[name] = {"freeGiB": max(0.0, float(free_t[i])) + own_tier.get(name, 0.0),
                                 "usedGiB": float(k * d.storage_gib)}
        if per:
            out["storage"] = {"tier": d.storage_tier, "perReplicaGiB": d.storage_gib, "clusters": per}
    return out
