"""The scheduler's cache: Cluster objects and ``/status/clusters/<name>`` documents → one Snapshot.

Fed by informers, row by row (never a full rebuild per task). It also decides readiness and
keeps the assumed load (S7) honest:

* **Readiness** — the Cluster's ``status.conditions[type=Ready]``: ``True`` is ready, ``False``
  and ``Unknown`` are not. Without that condition (no health controller has judged the cluster
  yet, e.g. a pull-mode cluster fed only by ``PUT /api/v1/metrics``) a cluster is ready while its
  status document is fresh: published within ``status_max_age`` seconds (default 180, monitoring's
  ``staleAfterSeconds``). ``sweep()`` re-judges freshness as time passes.
* **Assumed load** — right after a decision the snapshot counts the replicas it placed
  (``assume``), because the member's status will show them only later. The assumption of a binding
  is dropped when the binding is deleted, replaced when it is rescheduled, and forgotten cluster by
  cluster: a cluster's part once that cluster has published a status document at least ``assume_ttl``
  seconds (default 60) after the decision — by then that status includes the new replicas — or,
  sooner, once the binding's status shows its copy there with all its replicas (``observedReplicas``,
  read at ``observedTime``) and the cluster has published a status since: their requests are in its
  allocated load from then on.
  A scheduler that starts (or takes over) assumes the placements whose clusters have not yet
  published such a status, so a fail-over never forgets recent decisions.
* **GPUs by model, storage by tier** (F1) — assumed like cpu and memory where the member reports
  them; a member may never report them, so each binding's placement also holds its GPUs and tier
  storage for as long as it is placed (``Snapshot.place_offers``), the load of such members.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from drods.model import jsondoc
from drods.model import member_status as ms
from drods.model.cluster import ClusterSpec
from drods.model.conditions import condition
from drods.model.keys import pair_of
from drods.model.preallocation import PreallocationHold, parse_hold
from drods.model.timefmt import parse_rfc3339
from drods.model.traffic import peers
from drods.model.workload_usage import WorkloadUsage
from drods.scheduler.offers import OfferDemand
from drods.scheduler.selection import ClusterFacts
from drods.scheduler.snapshot import LiftedLoad, Snapshot
from drods.scheduler.status import parse_status
from drods.schedulerd.fleet import (
    CAPABILITIES_CHANGED,
    CLUSTER_ADDED,
    CLUSTER_READY,
    CLUSTER_REMOVED,
    COST_CHANGED,
    LABELS_CHANGED,
    TAINTS_LIFTED,
    TOPOLOGY_CHANGED,
    UNCORDONED,
    FleetChange,
)
from drods.schedulerd.records import Placement
from drods.store import KeyValue

log = logging.getLogger(__name__)

SURGE_SIGNAL = "trafficSurge"
GIB = 1024.0**3


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    name: str
    labels: Mapping[str, str]
    spec: ClusterSpec
    ready: bool | None  # the Ready condition; None when there is none
    hold: PreallocationHold | None = None  # F6: the forecast water level to assume until it expires
    # when it last became a candidate, by its own object: created, or Ready since (None: not known)
    candidate_since: float | None = None

    @property
    def facts(self) -> ClusterFacts:
        return ClusterFacts.of(self.name, self.labels, self.spec)


@dataclass(frozen=True, slots=True)
class StatusRecord:
    name: str
    status: Mapping[str, Any] | None
    time: float  # when it was published (its own timestamp, else when we first saw it)


def decode_cluster(kv: KeyValue) -> ClusterRecord | None:
    try:
        obj = jsondoc.loads(kv.value)
        name = obj["metadata"]["name"]
        spec = ClusterSpec.model_validate({k: v for k, v in (obj.get("spec") or {}).items() if k != "credentials"})
    except (ValueError, KeyError, TypeError, ValidationError):
        log.warning("scheduler: cannot read cluster object %s", kv.key)
        return None
    cond = condition(obj, "Ready")
    ready = None if cond is None else str(cond.get("status")) == "True"
    meta = obj.get("metadata") or {}
    times = [parse_rfc3339(meta.get("creationTimestamp")),
             parse_rfc3339(cond.get("lastTransitionTime")) if cond is not None and ready else None]
    # a time in whole seconds may stand for any instant of that second: its end, so a decision made in
    # the same second is not taken to have seen the change
    known = [t + 1.0 if t == math.floor(t) else t for t in times if t is not None]
    return ClusterRecord(name, dict(meta.get("labels") or {}), spec, ready, parse_hold(meta.get("annotations")),
                         max(known) if known else None)


def status_decoder(clock: Callable[[], float]) -> Callable[[KeyValue], StatusRecord | None]:
    def decode(kv: KeyValue) -> StatusRecord | None:
        name = kv.key.rsplit("/", 1)[-1]
        doc = ms.stored_document(kv.value)
        if doc is None:
            return None
        st = doc.get("status") if isinstance(doc.get("status"), dict) else None
        t = parse_rfc3339(doc.get("publishedAt"))
        if t is None and st is not None:
            t = parse_rfc3339(st.get("receivedAt")) or parse_rfc3339(st.get("timestamp"))
        return StatusRecord(name, st, t if t is not None else clock())

    return decode


def measured_use(obj: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """A Binding's measured (cpu cores, memory GiB) per cluster (``status.clusters[].usage``), where
    measured: the part of its clusters' observed load that is its own (`SchedulerCache.excluding`)."""
    out: dict[str, tuple[float, float]] = {}
    status = obj.get("status")
    for c in (status.get("clusters") if isinstance(status, Mapping) else None) or []:
        u = WorkloadUsage.from_doc(c.get("usage")) if isinstance(c, Mapping) else None
        if u is not None and u.used is not None and isinstance(c.get("cluster"), str):
            out[c["cluster"]] = (u.used["cpu"], u.used["memory"] / GIB)
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _moved(before: float | None, after: float | None) -> bool:
    if before is None or after is None:
        return before is not after
    return abs(after - before) > 0.1 * max(abs(before), 1e-9)


def _offer_room(snap: Snapshot, row: int) -> np.ndarray:
    """What the member reports free of each GPU model and storage tier (inf: not reported)."""
    room = [np.where(np.isnan(t.status_cap[row]), t.spec_cap[row], t.status_cap[row]) - t.reported[row]
            for t in (snap.offers.gpus, snap.offers.tiers)]
    return np.nan_to_num(np.concatenate(room), nan=np.inf)


def _offers_freed(before: np.ndarray, after: np.ndarray) -> bool:
    return before.shape != after.shape or bool(np.any(after > before + 1e-9))


@dataclass(slots=True)
class _Assumption:
    counts: dict[str, int]
    req: tuple[float, ...]
    time: float
    checks: int = 0
    demand: OfferDemand | None = None
    placed: dict[str, int] = field(default_factory=dict)  # the binding's whole placement
    shown: dict[str, tuple[int, float]] = field(default_factory=dict)  # cluster → (copy's replicas, read at)


@dataclass(slots=True)
class _Release:
    """Replicas a decision took off a cluster that its status still counts (their pods go after it)."""

    key: str
    left: np.ndarray  # cpu, memory, gpu, pods (storage is not per pod) still to come off the status
    time: float  # the decision's


# what of a replica's requests a member stops reporting when its pod goes (storage is the volumes' own)
_POD_RESOURCES = np.array([1.0, 1.0, 1.0, 1.0, 0.0])


@dataclass(slots=True)
class CacheEvents:
    """What a cache update means for parked bindings."""

    retry: bool = False  # a cluster was added, recovered, changed, or freed capacity
    reasons: list[str] = field(default_factory=list)
    fleet: list[FleetChange] = field(default_factory=list)  # placed bindings it may concern (S11)


def spec_changes(old: ClusterSpec, new: ClusterSpec) -> list[str]:
    """What of a cluster's spec changed that can make it admit bindings it did not (S11); taints
    added and cordons are left to failover and drains."""
    kinds: list[str] = []
    if (old.region, old.zone, old.provider, old.city) != (new.region, new.zone, new.provider, new.city):
        kinds.append(TOPOLOGY_CHANGED)
    if any(t not in new.taints for t in old.taints):
        kinds.append(TAINTS_LIFTED)
    if (old.capabilities, old.gpuModels, old.storageTiers, old.gpus, old.storage) != \
            (new.capabilities, new.gpuModels, new.storageTiers, new.gpus, new.storage):
        kinds.append(CAPABILITIES_CHANGED)
    if old.cost != new.cost:
        kinds.append(COST_CHANGED)
    if old.unschedulable and not new.unschedulable:
        kinds.append(UNCORDONED)
    return kinds


def only_restricts(old: ClusterSpec, new: ClusterSpec) -> bool:
    """``new`` differs from ``old`` by taints added or a cordon at most: it admits no binding ``old`` did
    not, so parked bindings are not retried for it (Kubernetes' queueing hints). In a failure storm every
    cluster that turns NotReady gets the not-ready taint; each retried every parked binding."""
    return all(t in new.taints for t in old.taints) and (new.unschedulable or not old.unschedulable) \
        and old.model_copy(update={"taints": new.taints, "unschedulable": new.unschedulable}) == new


class SchedulerCache:
    def __init__(self, *, clock: Callable[[], float] = time.time, status_max_age: float = 180.0,
                 assume_ttl: float = 60.0) -> None:
        self.snap = Snapshot(capacity=64, clock=clock)
        self.clock = clock
        self.status_max_age = status_max_age
        self.assume_ttl = assume_ttl
        self.clusters: dict[str, ClusterRecord] = {}
        self.statuses: dict[str, StatusRecord] = {}
        self._assumed: dict[str, _Assumption] = {}
        self._due: list[tuple[float, str, float]] = []
        self.settled = False  # an assumption's part went since the last sweep (members' status counts it)
        self._waiting: dict[str, set[str]] = {}  # cluster → assumptions whose part there its next status counts
        self._held: set[str] = set()  # clusters whose status the scheduler raises to a hold's forecast
        self.unknown: set[str] = set()  # registered clusters with neither a status nor a Ready condition
        self._released: dict[str, list[_Release]] = {}  # cluster → releases, oldest first
        # binding → the clusters holding a release of it: an unwritten decision's releases are found without
        # a pass over every cluster's (a storm's return undid decisions over tens of thousands of them)
        self._released_of: dict[str, set[str]] = {}
        self._reported: dict[str, np.ndarray] = {}  # cluster with releases → its load as its status says

    # ------------------------------------------------------------------ readiness
    def _became_ready(self, name: str, ev: CacheEvents) -> None:
        c = self.clusters.get(name)
        if c is not None:
            ev.fleet.append(FleetChange(name, (CLUSTER_READY,), c.facts, None, True))

    def _unknown_update(self, name: str) -> None:
        """A registered cluster is unknown until it publishes a status or a health controller
        judges it (a Ready condition): deciding before would ignore it (S11)."""
        c = self.clusters.get(name)
        st = self.statuses.get(name)
        if c is not None and c.ready is None and (st is None or st.status is None):
            self.unknown.add(name)
        else:
            self.unknown.discard(name)

    def _ready(self, name: str) -> bool:
        c = self.clusters.get(name)
        if c is not None and c.ready is not None:
            return c.ready
        st = self.statuses.get(name)
        return st is not None and st.status is not None and self.clock() - st.time <= self.status_max_age

    def _floor(self, name: str) -> float | None:
        c = self.clusters.get(name)
        if c is None or c.hold is None or not c.hold.active(self.clock()):
            self._held.discard(name)
            return None
        self._held.add(name)
        return c.hold.water_level

    # ------------------------------------------------------------------ informer feeds
    def on_cluster(self, name: str, rec: ClusterRecord | None) -> CacheEvents:
        ev = CacheEvents()
        old = self.clusters.get(name)
        if rec is None:
            self.clusters.pop(name, None)
            self.unknown.discard(name)
            self._unindex(name, self._released.pop(name, ()))
            self._reported.pop(name, None)
            if name in self.snap:
                self.snap.remove_cluster(name)
            if old is not None:  # its bindings' replicas there go elsewhere
                ev.fleet.append(FleetChange(name, (CLUSTER_REMOVED,), None, old.facts, False))
            return ev
        self.clusters[name] = rec
        st = self.statuses.get(name)
        was_ready = bool(self.snap.ready[self.snap.index[name]]) if name in self.snap else False
        self.snap.upsert_cluster(name, rec.labels, rec.spec, self._ready(name), st.status if st else None,
                                 self._floor(name))
        self._ease(name)
        now_ready = self._ready(name)
        if old is None or (now_ready and not was_ready) or old.labels != rec.labels or old.hold != rec.hold \
                or (old.spec != rec.spec and not only_restricts(old.spec, rec.spec)):
            ev.retry = True
            ev.reasons.append("ClusterAdd" if old is None else "ClusterChanged")
        self._unknown_update(name)
        if old is None or not was_ready:
            if now_ready:
                ev.fleet.append(FleetChange(name, (CLUSTER_ADDED if old is None else CLUSTER_READY,), rec.facts,
                                            None, True))
            elif old is not None and old.labels != rec.labels:  # copies there may have to go
                ev.fleet.append(FleetChange(name, (LABELS_CHANGED,), rec.facts, old.facts, False))
            return ev
        kinds = ([LABELS_CHANGED] if old.labels != rec.labels else []) + spec_changes(old.spec, rec.spec)
        if kinds:
            ev.fleet.append(FleetChange(name, tuple(kinds), rec.facts, old.facts, now_ready))
        return ev

    def on_status(self, name: str, rec: StatusRecord | None) -> CacheEvents:
        ev = CacheEvents()
        if rec is None:
            self.statuses.pop(name, None)
            self._waiting.pop(name, None)  # no status will settle what waited for it (gone: not counted there)
        else:
            self.statuses[name] = rec
        row = self.snap.index.get(name)
        if row is None:
            return ev
        snap = self.snap
        before_free = snap.alloc[row, :3] - snap.load[row, :3]
        before_offers = _offer_room(snap, row)
        before_off = snap.wl_offset[row]
        was_ready = bool(snap.ready[row])
        had = bool(snap.has_status[row])
        snap.set_status(name, rec.status if rec else None, self._floor(name))
        self._ease(name, rec.time if rec is not None else None)
        ready = self._ready(name)
        if ready != was_ready:
            snap.set_ready(name, ready)
        after_free = snap.alloc[row, :3] - snap.load[row, :3]
        self._unknown_update(name)
        if ready and not was_ready:
            self._became_ready(name, ev)
        if (ready and not was_ready) or (snap.has_status[row] and not had):
            ev.retry = True
            ev.reasons.append("ClusterRecovered")
        elif bool(np.any(after_free > before_free + 1e-9)) or snap.wl_offset[row] < before_off - 1e-9 \
                or _offers_freed(before_offers, _offer_room(snap, row)):
            ev.retry = True
            ev.reasons.append("ClusterCapacityFreed")
        if rec is not None and self._settle_waiting(name):
            ev.retry = True
            ev.reasons.append("AssumedLoadShown")
        return ev

    def _settle_waiting(self, cluster: str) -> bool:
        settled = False
        for key in self._waiting.pop(cluster, ()):
            a = self._assumed.get(key)
            if a is not None and self._settle(key, a):
                settled = True
            self._await_status(key)  # not counted yet (a status read before the copy): the next one
        return settled

    def on_traffic(self, doc: Any) -> None:
        """H1: the graph, decayed to now; the TrafficAffinity score reads it from the snapshot."""
        self.snap.traffic = peers(doc if isinstance(doc, dict) else None, self.clock())

    def on_network(self, key: str, old: Any, new: Any) -> bool:
        """F1/C2: a measured site or cluster pair; its delay and bandwidth win over the cluster
        profiles (NetworkFit, TrafficAffinity, DataLocality read them from the snapshot). True when
        parked bindings should be retried: a pair appeared, went or moved by more than 10 %."""
        pair = pair_of(key)
        if pair is None:
            return False
        doc = new if isinstance(new, dict) else {}
        was = old if isinstance(old, dict) else {}
        delay, bw = _num(doc.get("delayMs")), _num(doc.get("bandwidthMbps"))
        self.snap.set_network_pair(pair[0], pair[1], delay, bw)
        return _moved(_num(was.get("delayMs")), delay) or _moved(_num(was.get("bandwidthMbps")), bw)

    def on_dataset(self, old: Any, new: Any) -> None:
        """F4: where each Dataset's copies are; the DataLocality score reads it from the snapshot."""
        obj = new if isinstance(new, dict) else old if isinstance(old, dict) else None
        if obj is None:
            return
        meta = obj.get("metadata") or {}
        self.snap.set_dataset(f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
                              new if isinstance(new, dict) else None)

    def on_surge(self, doc: Mapping[str, Any] | None) -> None:
        fleet = (doc or {}).get("fleet") if isinstance(doc, Mapping) else None
        mag = fleet.get("magnitude") if isinstance(fleet, Mapping) else None
        val = float(mag) if isinstance(mag, int | float) and math.isfinite(mag) else 0.0
        self.snap.signals[SURGE_SIGNAL] = min(1.0, max(0.0, val))

    # ------------------------------------------------------------------ assumed load (S7)
    def assuming(self, key: str) -> bool:
        """Is ``key``'s placement assumed now (its members' status does not count it all yet)?"""
        return key in self._assumed

    def assumed(self, key: str) -> dict[str, int] | None:
        a = self._assumed.get(key)
        return dict(a.counts) if a is not None else None

    def assume_decision(self, key: str, old: Placement, new: Placement,
                        req: tuple[float, ...], ts: float, demand: OfferDemand | None = None) -> bool:
        """Count what a new decision adds beyond the placement already in the status.

        Replicas of ``old`` that are still assumed stay assumed; replicas of ``old`` whose
        assumption was already forgotten are in the clusters' status, so only growth is added. A
        shrink takes its replicas off the assumed ones first (they are the ones the status does not
        show), and a cluster never has more assumed than placed: kept whole, scale-downs and -ups in
        turn (an autoscaler's, a cron rule's) piled up assumed load until the fleet looked full.
        True when the new placement holds fewer GPUs or less tier storage somewhere (a retry cue).

        A decision that keeps the placement adds nothing: what is assumed of it keeps its time and what the
        members showed of it (a partial binding retried on every capacity change to the same verdict had its
        own replicas assumed afresh each time, counted twice for good, and never placed the rest)."""
        prev = self._assumed.get(key)
        if tuple(old) == tuple(new) and (prev is None or prev.req == tuple(req)):
            return self.snap.place_offers(key, new, demand)
        was: dict[str, int] = dict(prev.counts) if prev is not None else {}
        counts = dict(was)
        old_map, new_map = dict(old), dict(new)
        for cluster, replicas in new:
            counts[cluster] = counts.get(cluster, 0) + replicas - old_map.get(cluster, 0)
        counts = {c: min(n, new_map[c]) for c, n in counts.items() if n > 0 and c in new_map}
        self._set(key, counts, req, ts, demand)
        # what the status counts of it beyond what it counts of the new placement: replicas removed
        # (scaled down, moved off) whose pods the status shows until they go
        for cluster, n in old_map.items():
            shown = (n - was.get(cluster, 0)) - (new_map.get(cluster, 0) - counts.get(cluster, 0))
            if shown > 0 and req:
                self._release(key, cluster, shown * np.asarray(req, dtype=np.float64) * _POD_RESOURCES, ts)
        return self.snap.place_offers(key, new, demand)

    # ------------------------------------------------------------------ released load
    def _release(self, key: str, cluster: str, amount: np.ndarray, ts: float) -> None:
        """Stop counting ``amount`` of ``cluster``'s reported load now: a decision removed the replicas
        behind it (as kube-scheduler forgets a pod once its binding goes), though the member reports
        their requests until the pods are gone and monitoring's rate control lets the fall through —
        a scale-down from 15 replicas to 1 kept the cluster at 74 % for a minute, and the next
        placement went there against a real 16 %. Each status consumes the release by as much as its
        reported load fell (`_ease`)."""
        row = self.snap.index.get(cluster)
        if row is None or not self.snap.has_status[row]:
            return
        if cluster not in self._released:
            self._reported[cluster] = self.snap.load[row].copy()
        amount = np.minimum(amount, self.snap.load[row])  # never more than the status counts (nor what it omits)
        if not bool(np.any(amount > 1e-9)):
            if not self._released.get(cluster):
                self._reported.pop(cluster, None)
            return
        self._released.setdefault(cluster, []).append(_Release(key, amount, ts))
        self._released_of.setdefault(key, set()).add(cluster)
        self.snap.lower_load(cluster, amount)

    def _unindex(self, cluster: str, gone: Iterable[_Release], kept: Iterable[_Release] = ()) -> None:
        """``cluster`` no longer holds the releases ``gone``: their bindings hold none there unless ``kept``
        has one of them."""
        left = {r.key for r in kept}
        for key in {r.key for r in gone} - left:
            clusters = self._released_of.get(key)
            if clusters is not None:
                clusters.discard(cluster)
                if not clusters:
                    del self._released_of[key]

    def _ease(self, cluster: str, published: float | None = None) -> None:
        """The cluster's load was set from its status (``snap.load``): what it fell by since the last
        one is its released replicas going (oldest release first); what is left of them comes off the
        load again. A status published ``assume_ttl`` after a decision no longer counts what it removed
        (its pods are gone by then), as for the load a decision adds (`_part_covered`)."""
        releases = self._released.get(cluster)
        row = self.snap.index.get(cluster)
        if row is None:
            return
        if not releases:
            self._released.pop(cluster, None)
            self._reported.pop(cluster, None)
            return
        reported = self.snap.load[row].copy()
        fell = np.maximum(self._reported[cluster] - reported, 0.0)
        kept: list[_Release] = []
        for r in releases:
            took = np.minimum(r.left, fell)
            r.left, fell = r.left - took, fell - took
            if bool(np.any(r.left > 1e-9)) and (published is None or published < r.time + self.assume_ttl):
                kept.append(r)
        self._unindex(cluster, releases, kept)
        if not kept:
            del self._released[cluster], self._reported[cluster]
            return
        self._released[cluster] = kept
        self._reported[cluster] = reported
        self.snap.lower_load(cluster, np.sum([r.left for r in kept], axis=0))

    def unrelease(self, key: str) -> None:
        """``key``'s decision was not written: the replicas it removed run on, and their load counts again."""
        for cluster in self._released_of.pop(key, ()):
            self._released[cluster] = [r for r in self._released[cluster] if r.key != key]
            row = self.snap.index.get(cluster)
            if row is not None:  # the load as reported, less the releases that stay
                self.snap.restore_load(LiftedLoad(np.asarray([row], dtype=np.intp),
                                                             self._reported[cluster][None, :].copy()))
            self._ease(cluster)

    def released(self, cluster: str) -> np.ndarray | None:
        """What ``cluster``'s reported load counts that decisions removed (None: nothing)."""
        rs = self._released.get(cluster)
        return np.sum([r.left for r in rs], axis=0) if rs else None

    def observe(self, key: str, placement: Placement, scheduled_time: float | None, req: tuple[float, ...],
                demand: OfferDemand | None = None, *, unschedulable: bool = False,
                shown: tuple[tuple[str, int, float], ...] = ()) -> bool:
        """A binding's status as stored: adopt its assumption when this process did not make it;
        its placement holds its GPUs and tier storage either way (True: it holds less than before).

        An ``unschedulable`` status placed nothing: its placement is the one from before, whose
        replicas the members report, so it adopts no assumption (in a failure storm every binding
        would otherwise be counted twice on its dead clusters, and kept so until they report)."""
        freed = self.snap.place_offers(key, placement, demand)
        prev = self._assumed.get(key)
        if scheduled_time is None or not placement or unschedulable:
            return freed
        seen = {c: (n, t) for c, n, t in shown}
        placed = dict(placement)
        # the decision assumed, or a later one that kept its placement (a partial binding's retry whose verdict
        # read differently is written anew): the assumption keeps its time and what the members showed of it
        if prev is not None and (abs(prev.time - scheduled_time) < 5e-4 or placed == prev.placed):
            for c, (n, t) in seen.items():  # a copy's later reads (its pods turning ready) do not move when
                was = prev.shown.get(c)     # it first showed them all: a status taken since counts them
                if was is not None and was[0] >= placed.get(c, 0) and n >= placed.get(c, 0):
                    seen[c] = (n, min(t, was[1]))
            if seen != prev.shown:  # the members showed more of its copies: their status may count them now
                prev.placed, prev.shown = placed, seen
                if self._settle(key, prev):
                    self.settled = True
                self._await_status(key)
            return freed
        counts = {c: n for c, n in placement if n > 0}
        adopted = _Assumption(counts, req, scheduled_time, demand=demand, placed=dict(placement), shown=seen)
        if all(self._part_covered(c, adopted) for c in counts):
            if prev is not None:
                self.forget(key)
            return freed
        self._set(key, counts, req, scheduled_time, demand, placed=dict(placement), shown=seen)
        return freed

    def _set(self, key: str, counts: dict[str, int], req: tuple[float, ...], ts: float,
             demand: OfferDemand | None = None, *, placed: dict[str, int] | None = None,
             shown: dict[str, tuple[int, float]] | None = None) -> None:
        if not counts:
            self.forget(key)
            return
        self.snap.assume(tuple(counts.items()), np.asarray(req, dtype=np.float64), key=key, demand=demand,
                         hold=False)
        self._assumed[key] = _Assumption(counts, req, ts, demand=demand, placed=dict(counts) if placed is None
                                         else placed, shown=shown or {})
        heapq.heappush(self._due, (ts + self.assume_ttl, key, ts))

    @contextlib.contextmanager
    def excluding(self, key: str, placement: Placement = (), req: tuple[float, ...] = (),
                  used: Mapping[str, tuple[float, float]] | None = None) -> Iterator[None]:
        """The snapshot without ``key``'s replicas for a while: a fresh division of a placed binding must
        not see its own replicas as another workload's load (S11) — neither those still assumed nor, given
        its ``placement`` and per-replica ``req``, those its clusters' status already shows (else the
        clusters it runs on look busier than an empty one by its own load, and it moves there whole).
        ``used`` (`measured_use`): what it uses there beyond its requests is its own load too."""
        a = self._assumed.get(key)
        assumed = a.counts if a is not None else {}
        shown = tuple((c, n - assumed.get(c, 0)) for c, n in placement if n > assumed.get(c, 0))
        if a is not None:
            self.snap.forget(key=key, offers=False)
        try:
            with self.lifted(shown, req, used):
                yield
        finally:
            if a is not None:
                self.snap.assume(tuple(a.counts.items()), np.asarray(a.req, dtype=np.float64), key=key,
                                 demand=a.demand, hold=False)

    @contextlib.contextmanager
    def lifted(self, copies: Placement, req: tuple[float, ...],
               used: Mapping[str, tuple[float, float]] | None = None) -> Iterator[None]:
        """``copies`` (a binding's own: placed, or kept, `kept_copies`) off their clusters' observed load
        for a while, ``used`` beyond their requests with them."""
        copies = tuple((c, n) for c, n in copies if c in self.snap.index)
        saved = self.snap.lift_load(copies, np.asarray(req, dtype=np.float64), used) if copies and req else None
        try:
            yield
        finally:
            if saved is not None:
                self.snap.restore_load(saved)

    @contextlib.contextmanager
    def holds_set_aside(self) -> Iterator[tuple[str, ...]]:
        """The clusters under a pre-allocation hold at their observed level for a while (the ones it
        raised, yielded): a hold steers new replicas elsewhere before a forecast peak; where nowhere else
        has room, they go to the room the held clusters have now rather than wait out the horizon."""
        names: list[str] = []
        rows: list[int] = []
        offsets: list[float] = []
        for name in sorted(self._held):
            row, st = self.snap.index.get(name), self.statuses.get(name)
            if row is None or st is None or st.status is None:
                continue
            observed = parse_status(st.status).wl_offset
            if observed < self.snap.wl_offset[row] - 1e-9:
                names.append(name)
                rows.append(row)
                offsets.append(observed)
        at = np.asarray(rows, dtype=np.intp)
        saved = self.snap.set_offsets(at, np.asarray(offsets, dtype=np.float64))
        try:
            yield tuple(names)
        finally:
            self.snap.set_offsets(at, saved)

    def forget(self, key: str) -> bool:
        """Drop the assumed cpu/memory/... of ``key`` (the status shows it now); its GPUs and tier
        storage stay held while it is placed."""
        if self._assumed.pop(key, None) is None:
            return False
        self.snap.forget(key=key, offers=False)
        return True

    def release(self, key: str) -> bool:
        """The binding is gone (or its decision was not written): drop all it held; True if anything."""
        held = key in self.snap.offers.placements
        self.snap.drop_offers(key)
        return self.forget(key) or held

    def _part_covered(self, cluster: str, a: _Assumption) -> bool:
        """The cluster's status counts its part of ``a``: published ``assume_ttl`` after the decision, or
        taken since the member showed the binding's copy there with all its replicas (their requests are
        in the cluster's allocated load from then on: counted twice, a cluster looked full at half its
        capacity, and a scale-up stopped at 28 of 40 on a fleet at 60 %)."""
        if cluster not in self.clusters:
            return True
        st = self.statuses.get(cluster)
        if st is None:
            return False
        if st.time >= a.time + self.assume_ttl:
            return True
        return self._shown_whole(cluster, a) and st.time >= a.shown[cluster][1] + 1.0  # read at whole seconds

    @staticmethod
    def _shown_whole(cluster: str, a: _Assumption) -> bool:
        """The member showed the binding's copy on ``cluster`` with all its replicas, read after the
        decision (``observedTime`` has whole seconds: a read in the decision's second counts)."""
        seen = a.shown.get(cluster)
        return seen is not None and seen[0] >= a.placed.get(cluster, 0) and seen[1] >= math.floor(a.time)

    def _await_status(self, key: str) -> None:
        """The clusters whose part of ``key``'s assumption the members have shown whole: their next status
        counts it (`on_status` settles it then, not at the next expiry check)."""
        a = self._assumed.get(key)
        if a is None:
            return
        for c in a.counts:
            if self._shown_whole(c, a):
                self._waiting.setdefault(c, set()).add(key)

    def _settle(self, key: str, a: _Assumption) -> bool:
        """Forget the parts of ``a`` its clusters' status now counts; True when any went."""
        left = {c: k for c, k in a.counts.items() if not self._part_covered(c, a)}
        if left == a.counts:
            return False
        if not left:
            self.forget(key)
            return True
        # one slow member does not keep the others' counted twice (a second assume under the key replaces the first)
        self.snap.assume(tuple(left.items()), np.asarray(a.req, dtype=np.float64), key=key, demand=a.demand,
                         hold=False)
        a.counts = left
        return True

    def expire(self) -> int:
        """Forget the assumptions (or each cluster's part of one) that fresh status now covers; returns how
        many it forgot or shrank."""
        now = self.clock()
        n = 0
        while self._due and self._due[0][0] <= now:
            _, key, ts = heapq.heappop(self._due)
            a = self._assumed.get(key)
            if a is None or abs(a.time - ts) >= 5e-4:
                continue  # replaced or forgotten since
            if self._settle(key, a):
                n += 1
                if key not in self._assumed:
                    continue
            a.checks += 1
            heapq.heappush(self._due, (now + min(self.assume_ttl, 2.0 * 2 ** min(a.checks, 10)), key, ts))
        return n

    def sweep(self) -> CacheEvents:
        """Re-judge freshness-based readiness, end expired pre-allocation holds and expire assumptions
        (run every few seconds)."""
        ev = CacheEvents()
        snap = self.snap
        for name, c in self.clusters.items():
            if c.ready is not None:
                continue
            row = snap.index.get(name)
            if row is None:
                continue
            ready = self._ready(name)
            if ready != bool(snap.ready[row]):
                snap.set_ready(name, ready)
                if ready:
                    ev.retry = True
                    ev.reasons.append("ClusterRecovered")
                    self._became_ready(name, ev)
        for name in list(self._held):
            if name in snap and self._floor(name) is None:  # the hold ran out: the observed level again
                st = self.statuses.get(name)
                snap.set_status(name, st.status if st else None)
                self._ease(name)
                ev.retry = True
                ev.reasons.append("PreallocationExpired")
        if self.expire() or self.settled:  # the load it assumed is now the members' to report: room may be back
            self.settled = False
            ev.retry = True
            ev.reasons.append("AssumedLoadExpired")
        return ev
