"""Cache planner (F4): hot data read from far away → a ``CachePlan``; an approved plan → a Cache copy.

Every ``intervalSeconds`` the planner reads the decayed access document (`drods.model.dataset_access`),
the Datasets, the Clusters and C2's measured network pairs (``/status/network/``), and wants one
CachePlan per (Dataset, reading cluster) whose reads reach ``hotGiBPerHour`` from **far away**: the
transfer cost of those reads from the nearest copy exceeds ``farCostPerHour``. The cost is the
DataLocality score's (`drods.scheduler.plugins.data_locality.nearest_copy`, over a `Snapshot` of the
clusters and pairs, so both agree): GiB/h × the copy cluster's egress price × 1000 Mbps ÷ the link's
bandwidth (measured pair, else the narrower of the two clusters' ``network.bandwidthMbps``, else
1000); the nearest copy is the cheapest. A reader in the same region as a copy over a fast, cheap
link gets no plan; one across an ocean does. The plan says which dataset to replicate where, from
which copy, and why, with the figures (GiB/h, $/h, link Mbps).

A person or another tool approves a plan (``spec.approved: true``); the planner then moves the
bytes (`drods.controllers.cache_copy`): a copy Job in the chosen cluster pulls the Dataset from a
cluster that holds it, and the Dataset gains ``{cluster, kind: Cache}`` only once the copy completed
and its checksum equals the source's (``status.phase`` Pending → Copying → Verifying → Ready, or
Failed); from then on the scheduler sees the copy. ``spec.approved: false`` after that, or deleting
the plan, withdraws it (the copy Job and the location go). Each Dataset's
``status.hotnessGiBPerHour`` and ``status.readsByCluster`` show its decayed reads (rewritten when
they move by more than 10 %). A plan nobody approved is deleted once its
reads cool below half the threshold or its cost falls below half of ``farCostPerHour``
(hysteresis), its Dataset is gone, or the cluster got a copy some other way. Single-active
(``/leases/cache-planner``): its writes are fenced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.controllers.cache_copy import COPYING, READY, VERIFYING, CacheCopies, labels, orphans
from drods.controllers.cache_decisions import cache_plan_decision
from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery import metrics
from drods.machinery.decision_log import decision_log, record_decisions
from drods.machinery.periodic import Periodic
from drods.model.annotations import CACHE_PLAN_LABEL
from drods.model.dataset_access import hotness
from drods.model.keys import DATASET_ACCESS_KEY, NETWORK_PREFIX, pair_of
from drods.model.kinds import CACHE_PLAN, CLUSTER, DATASET
from drods.model.migration import COPY_IMAGE
from drods.model.timefmt import rfc3339_ms
from drods.registry.objects import ObjectRegistry
from drods.scheduler.plugins.data_locality import egress_prices, nearest_copy
from drods.scheduler.snapshot import Snapshot
from drods.schedulerd.cache import decode_cluster
from drods.store import Store

log = logging.getLogger(__name__)
LEASE = "cache-planner"


class CachePlannerSettings(BaseModel):
    """The ``datasets`` section of the configuration file."""

    model_config = ConfigDict(extra="forbid")

    hotGiBPerHour: float = Field(default=50.0, gt=0)  # reads from one cluster that make a plan
    # the transfer cost per hour from the nearest copy above which those reads are "far"
    farCostPerHour: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    intervalSeconds: float = Field(default=30.0, gt=0)
    copyImage: str = Field(default=COPY_IMAGE, min_length=1)  # an approved plan's copy Job: the transport client
    copyTimeoutSeconds: float = Field(default=3600.0, gt=0)  # a copy running longer fails its plan


@dataclass(frozen=True, slots=True)
class Transfer:
    """Reading a dataset on one cluster from its nearest copy: the copy, $ per hour, link Mbps."""

    source: str
    cost: float
    bandwidth: float | None


@dataclass(frozen=True, slots=True)
class WantedPlan:
    namespace: str
    name: str
    dataset: str
    cluster: str
    source: str | None
    gib: float
    transfer: Transfer | None = None
    far_cost: float = 0.0
    size_gib: float | None = None  # the Dataset's declared spec.sizeGiB: what the cache would place

    def size_status(self) -> dict[str, Any]:
        """``sizeGiB`` and ``bytes`` the plan would place (absent when the Dataset declares no size)."""
        if self.size_gib is None:
            return {}
        return {"sizeGiB": self.size_gib, "bytes": int(self.size_gib * 2**30)}

    def spec(self) -> dict[str, Any]:
        t = self.transfer
        if t is None:
            why = "which holds no copy"
        else:
            link = f"{t.bandwidth:g} Mbps link" if t.bandwidth is not None else "link of unknown bandwidth"
            why = (f"{t.cost:.2f}/h to move from the nearest copy on {t.source} over a {link}, "
                   f"above farCostPerHour {self.far_cost:g}")
        return {"dataset": self.dataset, "cluster": self.cluster, "sourceCluster": self.source,
                "readGiBPerHour": round(self.gib, 3),
                **({"transferCostPerHour": round(t.cost, 4)} if t is not None else {}),
                "reason": f"{self.gib:.1f} GiB/h of {self.dataset} read on {self.cluster}: {why}"}


class Links:
    """Prices and links between clusters as the scheduler sees them: a `Snapshot` of the Cluster
    specs and C2's measured pairs; a cluster it does not know counts with the defaults."""

    def __init__(self, snap: Snapshot | None = None) -> None:
        self.snap = snap or Snapshot()

    def transfers(self, copies: list[str], readers: list[str]) -> dict[str, Transfer]:
        """Per GiB/h read on each of ``readers`` from the cheapest of ``copies``."""
        snap = self.snap
        for c in (*copies, *readers):
            if c not in snap.index:
                snap.upsert_cluster(c, {}, None, False, None)
        rows = [snap.index[c] for c in copies]
        best, src = nearest_copy(snap, rows, egress_prices(snap), sources=True)
        assert src is not None
        out: dict[str, Transfer] = {}
        for r in readers:
            row = snap.index[r]
            s = int(src[row])
            bw = float(snap.bandwidth_between(s)[row])
            out[r] = Transfer(snap.names[s], float(best[row]), None if bw != bw else bw)  # NaN: unknown
        return out


def plan_name(dataset: str, cluster: str) -> str:
    """A DNS-1123 name for the plan of ``dataset`` on ``cluster``."""
    raw = re.sub(r"[^a-z0-9-]+", "-", f"{dataset}-{cluster}".lower()).strip("-")
    return raw[:253] or "cache"


def copies(ds: dict[str, Any]) -> list[dict[str, Any]]:
    return [loc for loc in (ds.get("spec") or {}).get("locations") or [] if isinstance(loc, dict)]


def wanted(datasets: dict[str, dict[str, Any]], hot: dict[str, dict[str, float]], threshold: float,
           links: Links | None = None, far_cost: float = 0.0) -> dict[str, WantedPlan]:
    """Plans wanted now, by "namespace/plan-name" (pure but for ``links``' snapshot)."""
    links = links or Links()
    out: dict[str, WantedPlan] = {}
    for key, by_cluster in hot.items():
        ds = datasets.get(key)
        if ds is None:
            continue
        held = [str(loc.get("cluster")) for loc in copies(ds)]
        readers = [c for c, gib in by_cluster.items() if gib >= threshold and c not in held]
        if not held or not readers:
            continue
        cost = links.transfers(held, readers)
        ns, _, name = key.partition("/")
        for cluster in readers:
            gib = by_cluster[cluster]
            t = cost[cluster]
            t = Transfer(t.source, t.cost * gib, t.bandwidth)
            if t.cost > far_cost:
                pn = plan_name(name, cluster)
                size = (ds.get("spec") or {}).get("sizeGiB")
                out[f"{ns}/{pn}"] = WantedPlan(ns, pn, name, cluster, t.source, gib, t, far_cost,
                                               float(size) if isinstance(size, (int, float)) else None)
    return out


async def links_of(store: Store) -> Links:
    """The fleet's prices and links from the store: Cluster objects and measured network pairs."""
    snap = Snapshot()
    for kv in (await store.range(CLUSTER.key_prefix()))[0]:
        rec = decode_cluster(kv)
        if rec is not None:
            snap.upsert_cluster(rec.name, rec.labels, rec.spec, bool(rec.ready), None)
    for kv in (await store.range(NETWORK_PREFIX))[0]:
        pair = pair_of(kv.key)
        try:
            doc = json.loads(kv.value)
        except ValueError:
            continue
        bw = doc.get("bandwidthMbps") if isinstance(doc, dict) else None
        if pair is not None and isinstance(bw, int | float) and not isinstance(bw, bool):
            snap.set_network_pair(pair[0], pair[1], None, float(bw))
    return Links(snap)


class CachePlanner:
    def __init__(self, store: Store, registry: ObjectRegistry, settings: CachePlannerSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings or CachePlannerSettings()
        self.clock = clock
        self.decisions = decision_log(store)  # X1: each proposed plan, each copy's outcome
        self.copies = CacheCopies(registry, self.decisions, clock, self.settings.copyImage,
                                  self.settings.copyTimeoutSeconds, far_cost=self.settings.farCostPerHour)

    async def run(self) -> None:
        with metrics.reconcile(LEASE):  # the first pass fails the runnable: the manager restarts it
            await self.reconcile()
        await Periodic(LEASE, self.reconcile, self.settings.intervalSeconds).run()

    async def reconcile(self) -> None:
        kv = await self.store.get(DATASET_ACCESS_KEY)
        now = self.clock()
        hot = hotness(json.loads(kv.value) if kv is not None else None, now)
        items, _ = await self.registry.list(DATASET)
        datasets = {f"{o['metadata'].get('namespace') or 'default'}/{o['metadata']['name']}": o for o in items}
        plans, _ = await self.registry.list(CACHE_PLAN)
        if not datasets and not plans:
            return  # nothing to plan: no view of the fleet's links is built
        for key, ds in datasets.items():
            await self._hotness(ds, hot.get(key) or {})
        links = await links_of(self.store)
        self.copies.price = lambda src, dst, gib: links.transfers([src], [dst])[dst].cost * gib
        want = wanted(datasets, hot, self.settings.hotGiBPerHour, links, self.settings.farCostPerHour)
        have: set[str] = set()
        for plan in plans:
            meta = plan["metadata"]
            ns = meta.get("namespace") or "default"
            have.add(f"{ns}/{meta['name']}")
            await self._existing(plan, ns, datasets, hot, links, now)
        for key, w in want.items():
            if key not in have:
                await self._create(w, now)
        await self._orphans(plans, datasets)

    async def _orphans(self, plans: list[dict[str, Any]], datasets: dict[str, dict[str, Any]]) -> None:
        """Copies whose plan was deleted: their Job and the Dataset's Cache location go."""
        mine = {labels(p)[CACHE_PLAN_LABEL] for p in plans}
        for job, ns, dataset, cluster in await orphans(self.registry, mine):
            log.info("cache planner: the plan of copy %s/%s is gone; withdrawing it", ns, job[0])
            await self.copies.withdraw(None, datasets.get(f"{ns}/{dataset}"), "", job=job, namespace=ns,
                                       cluster=cluster)

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
        with contextlib.suppress(Conflict, AlreadyExists):
            await self.registry.update_status(DATASET, meta["name"], status, meta.get("namespace") or "default",
                                              resource_version=int(meta["resourceVersion"]))

    async def _create(self, w: WantedPlan, now: float) -> None:
        obj = {"apiVersion": CACHE_PLAN.api_version, "kind": CACHE_PLAN.kind,
               "metadata": {"name": w.name, "namespace": w.namespace}, "spec": w.spec()}
        try:
            await self.registry.create(CACHE_PLAN, obj, w.namespace)
        except (AlreadyExists, Conflict):
            return
        await self.registry.update_status(CACHE_PLAN, w.name, {"phase": "Proposed", "proposedTime": rfc3339_ms(now),
                                                               **w.size_status()}, w.namespace)
        log.info("cache planner: proposed %s/%s (%s)", w.namespace, w.name, w.spec()["reason"])
        rec = cache_plan_decision(w.namespace, w.name, w.spec(), self.settings.hotGiBPerHour, w.far_cost)
        try:
            await record_decisions(self.decisions, [(now, rec)])
        except Exception:  # a lost explanation never stops planning
            log.warning("cache planner: decision for %s/%s not recorded", w.namespace, w.name, exc_info=True)

    async def _existing(self, plan: dict[str, Any], ns: str, datasets: dict[str, dict[str, Any]],
                        hot: dict[str, dict[str, float]], links: Links, now: float) -> None:
        spec, status = plan.get("spec") or {}, plan.get("status") or {}
        name = plan["metadata"]["name"]
        key = f"{ns}/{spec.get('dataset')}"
        ds = datasets.get(key)
        cluster = str(spec.get("cluster"))
        held = ds is not None and any(str(loc.get("cluster")) == cluster for loc in copies(ds))
        if spec.get("approved") or status.get("phase") in (COPYING, VERIFYING, READY):
            await self.copies.advance(plan, ds)  # the copy, its verification, or its withdrawal
            return
        gib = (hot.get(key) or {}).get(cluster, 0.0)
        near = False
        if ds is not None and not held and copies(ds):
            cost = links.transfers([str(loc.get("cluster")) for loc in copies(ds)], [cluster])[cluster].cost * gib
            near = cost < self.settings.farCostPerHour / 2
        if ds is None or held or near or gib < self.settings.hotGiBPerHour / 2:
            with contextlib.suppress(NotFound):
                await self.registry.delete(CACHE_PLAN, name, ns)
