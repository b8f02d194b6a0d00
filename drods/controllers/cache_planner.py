"""Cache planner (F4): hot data read from far away → a ``CachePlan``; an approved plan → a Cache copy.

Every ``intervalSeconds`` the planner reads the decayed access document (`drods.model.dataset_access`)
and the Datasets, and wants one CachePlan per (Dataset, reading cluster) whose reads reach
``hotGiBPerHour`` on a cluster that holds no copy of it: those reads cross domains on every run
(the DataLocality score charges them as egress over the link to the nearest copy). The plan says
which dataset to replicate where, from which copy, and why (the GiB/h it would keep local).

A person or another tool approves a plan (``spec.approved: true``); the planner then adds
``{cluster, kind: Cache}`` to the Dataset's ``spec.locations`` (compare-and-swap on the Dataset) and
marks the plan ``status.phase: Applied``: from then on the scheduler sees the copy. Each Dataset's
``status.hotnessGiBPerHour`` and ``status.readsByCluster`` show its decayed reads (rewritten when
they move by more than 10 %). Copying the
bytes is the storage layer's business, not DRO-DS's. A plan nobody approved is deleted once its
reads cool below half the threshold (hysteresis), its Dataset is gone, or the cluster got a copy
some other way. Single-active (``/leases/cache-planner``): its writes are fenced.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.errors import ApiError
from drods.machinery.periodic import every
from drods.model.dataset_access import hotness
from drods.model.keys import DATASET_ACCESS_KEY
from drods.model.kinds import CACHE_PLAN, DATASET
from drods.model.timefmt import rfc3339_ms
from drods.registry.objects import ObjectRegistry
from drods.store import Store

log = logging.getLogger(__name__)
LEASE = "cache-planner"


class CachePlannerSettings(BaseModel):
    """The ``datasets`` section of the configuration file."""

    model_config = ConfigDict(extra="forbid")

    hotGiBPerHour: float = Field(default=50.0, gt=0)  # reads from one cluster that make a plan
    intervalSeconds: float = Field(default=30.0, gt=0)


@dataclass(frozen=True, slots=True)
class WantedPlan:
    namespace: str
    name: str
    dataset: str
    cluster: str
    source: str | None
    gib: float

    def spec(self) -> dict[str, Any]:
        src = f" (nearest copy: {self.source})" if self.source else ""
        return {"dataset": self.dataset, "cluster": self.cluster, "sourceCluster": self.source,
                "readGiBPerHour": round(self.gib, 3),
                "reason": f"{self.gib:.1f} GiB/h of {self.dataset} read on {self.cluster}, "
                          f"which holds no copy{src}"}


def plan_name(dataset: str, cluster: str) -> str:
    """A DNS-1123 name for the plan of ``dataset`` on ``cluster``."""
    raw = re.sub(r"[^a-z0-9-]+", "-", f"{dataset}-{cluster}".lower()).strip("-")
    return raw[:253] or "cache"


def copies(ds: dict[str, Any]) -> list[dict[str, Any]]:
    return [loc for loc in (ds.get("spec") or {}).get("locations") or [] if isinstance(loc, dict)]


def nearest_copy(locs: list[dict[str, Any]]) -> str | None:
    """The copy a cache would be filled from: the Primary, else the first listed copy."""
    for loc in locs:
        if loc.get("kind") == "Primary":
            return str(loc["cluster"])
    return str(locs[0]["cluster"]) if locs else None


def wanted(datasets: dict[str, dict[str, Any]], hot: dict[str, dict[str, float]], threshold: float,
           ) -> dict[str, WantedPlan]:
    """Plans wanted now, by "namespace/plan-name" (pure)."""
    out: dict[str, WantedPlan] = {}
    for key, by_cluster in hot.items():
        ds = datasets.get(key)
        if ds is None:
            continue
        locs = copies(ds)
        held = {str(loc.get("cluster")) for loc in locs}
        ns, _, name = key.partition("/")
        for cluster, gib in by_cluster.items():
            if gib >= threshold and cluster not in held:
                pn = plan_name(name, cluster)
                out[f"{ns}/{pn}"] = WantedPlan(ns, pn, name, cluster, nearest_copy(locs), gib)
    return out


class CachePlanner:
    def __init__(self, store: Store, registry: ObjectRegistry, settings: CachePlannerSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings or CachePlannerSettings()
        self.clock = clock

    async def run(self) -> None:
        await self.reconcile()
        await every(self.settings.intervalSeconds, self.reconcile, "cache-planner")

    async def reconcile(self) -> None:
        kv = await self.store.get(DATASET_ACCESS_KEY)
        now = self.clock()
        hot = hotness(json.loads(kv.value) if kv is not None else None, now)
        items, _ = await self.registry.list(DATASET)
        datasets = {f"{o['metadata'].get('namespace') or 'default'}/{o['metadata']['name']}": o for o in items}
        plans, _ = await self.registry.list(CACHE_PLAN)
        for key, ds in datasets.items():
            await self._hotness(ds, hot.get(key) or {})
        want = wanted(datasets, hot, self.settings.hotGiBPerHour)
        have: set[str] = set()
        for plan in plans:
            meta = plan["metadata"]
            ns = meta.get("namespace") or "default"
            have.add(f"{ns}/{meta['name']}")
            await self._existing(plan, ns, datasets, hot, now)
        for key, w in want.items():
            if key not in have:
                await self._create(w, now)

    async def _hotness(self, ds: dict[str, Any], by_cluster: dict[str, float]) -> None:
        """``status.hotnessGiBPerHour`` (and ``readsByCluster``) on the Dataset, rewritten only when
        it moves by more than 10 % (compare-and-swap on the listed revision; a conflict waits a round)."""
        status = dict(ds.get("status") or {})
        total = round(sum(by_cluster.values()), 3)
        prev = status.get("hotnessGiBPerHour")
        if prev is None and total == 0:
            return
        if isinstance(prev, int | float) and abs(total - prev) <= 0.1 * max(abs(prev), 1e-9):
            return
        status["hotnessGiBPerHour"] = total
        status["readsByCluster"] = {c: round(v, 3) for c, v in sorted(by_cluster.items())}
        meta = ds["metadata"]
        try:
            await self.registry.update_status(DATASET, meta["name"], status, meta.get("namespace") or "default",
                                              resource_version=int(meta["resourceVersion"]))
        except ApiError as e:
            if e.status != 409:
                raise

    async def _create(self, w: WantedPlan, now: float) -> None:
        obj = {"apiVersion": CACHE_PLAN.api_version, "kind": CACHE_PLAN.kind,
               "metadata": {"name": w.name, "namespace": w.namespace}, "spec": w.spec()}
        try:
            await self.registry.create(CACHE_PLAN, obj, w.namespace)
        except ApiError as e:
            if e.status != 409:
                raise
            return
        await self.registry.update_status(CACHE_PLAN, w.name, {"phase": "Proposed", "proposedTime": rfc3339_ms(now)},
                                          w.namespace)
        log.info("cache planner: proposed %s/%s (%s)", w.namespace, w.name, w.spec()["reason"])

    async def _existing(self, plan: dict[str, Any], ns: str, datasets: dict[str, dict[str, Any]],
                        hot: dict[str, dict[str, float]], now: float) -> None:
        spec, status = plan.get("spec") or {}, plan.get("status") or {}
        name = plan["metadata"]["name"]
        key = f"{ns}/{spec.get('dataset')}"
        ds = datasets.get(key)
        cluster = str(spec.get("cluster"))
        held = ds is not None and any(str(loc.get("cluster")) == cluster for loc in copies(ds))
        if spec.get("approved"):
            if status.get("phase") == "Applied":
                return
            if ds is None:
                await self.registry.update_status(CACHE_PLAN, name, {**status, "phase": "Failed",
                                                                     "message": f"Dataset {key} not found"}, ns)
                return
            if not held:
                fresh = await self.registry.get(DATASET, str(spec.get("dataset")), ns)  # CAS on what is stored now
                locs = [*copies(fresh), {"cluster": cluster, "kind": "Cache"}]
                await self.registry.update(DATASET, {**fresh, "spec": {**fresh["spec"], "locations": locs}}, ns)
            await self.registry.update_status(CACHE_PLAN, name, {**status, "phase": "Applied",
                                                                 "appliedTime": rfc3339_ms(now)}, ns)
            log.info("cache planner: %s/%s applied, %s has a Cache copy on %s", ns, name, key, cluster)
            return
        gib = (hot.get(key) or {}).get(cluster, 0.0)
        if ds is None or held or gib < self.settings.hotGiBPerHour / 2:
            try:
                await self.registry.delete(CACHE_PLAN, name, ns)
            except ApiError as e:
                if e.status != 404:
                    raise
