"""Each process's watch-fed copy of the fleet: cluster objects, status documents, surge signal.

Every API replica keeps one (SPEC A6: replicas are stateless, the store is the truth): the ingest
path reads it to notice another replica's writes, GET /api/v1/monitor/realtime and ``/metrics``
answer from it without touching the store, and ``?watch=true`` streams wake on its change signal,
which is driven by store watches (SPEC C3), not by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.machinery.informer import Handler, Informer
from drods.machinery.shared import SharedInformers
from drods.model.keys import STATUS_PREFIX, SURGE_KEY
from drods.model.kinds import CLUSTER
from drods.model.member_status import stored_document
from drods.model.timefmt import parse_rfc3339
from drods.monitor.fleet import RealtimeSnapshot, realtime, shown_level
from drods.monitor.report import NormalisedStatus
from drods.monitor.statusdoc import status_from_dict
from drods.store import KeyValue, Store

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What monitoring needs from a ``Cluster`` object."""

    name: str
    ready: bool | None  # the Ready condition; None when no controller has set one
    prometheus: str | None
    water_level_limit: float | None
    labels: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)
    conditions: tuple[Mapping[str, Any], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StatusEntry:
    """One ``/status/clusters/<name>`` document as last seen."""

    cluster: str
    revision: int
    doc: Mapping[str, Any]
    status: NormalisedStatus | None  # the visible status, rebuilt from ``observed``
    published_at: float
    latest: NormalisedStatus | None = None  # the accepted report behind this write, before rate control


def decode_cluster(kv: KeyValue) -> ClusterInfo | None:
    try:
        obj = json.loads(kv.value)
        name = obj["metadata"]["name"]
    except (ValueError, KeyError, TypeError):
        return None
    spec = obj.get("spec") or {}
    ready: bool | None = None
    conditions = tuple(c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict))
    for cond in conditions:
        if cond.get("type") == "Ready":
            ready = {"True": True, "False": False}.get(str(cond.get("status")))
    limit = spec.get("waterLevelLimit")
    return ClusterInfo(
        name=name,
        ready=ready,
        prometheus=spec.get("prometheus") or None,
        water_level_limit=float(limit) if isinstance(limit, int | float) else None,
        labels=(obj.get("metadata") or {}).get("labels") or {},
        spec=spec,
        conditions=conditions,
        annotations=(obj.get("metadata") or {}).get("annotations") or {},
    )


def decode_status(kv: KeyValue) -> StatusEntry | None:
    doc = stored_document(kv.value)
    if doc is None:
        return None
    name = kv.key[len(STATUS_PREFIX):]
    observed = doc.get("observed")
    status = status_from_dict(observed) if isinstance(observed, dict) else None
    published = parse_rfc3339(doc.get("publishedAt"))
    if published is None:
        published = status.received_ts if status is not None else 0.0
    raw = doc.get("latest")
    latest = status_from_dict(raw) if isinstance(raw, dict) else None
    return StatusEntry(name, kv.mod_revision, doc, status, published, latest)


def decode_json(kv: KeyValue) -> Any:
    try:
        return json.loads(kv.value)
    except ValueError:
        return None


class FleetView:
    """Watch-fed caches plus a change signal (`wait_change`)."""

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time,
                 informers: SharedInformers | None = None) -> None:
        self.store = store
        self.clock = clock
        # the process's informers (its manager's), or None: this view watches for itself
        self.shared = informers
        self.clusters: dict[str, ClusterInfo] = {}
        self.statuses: dict[str, StatusEntry] = {}
        self.surge: dict[str, Any] = {}
        self.surge_revision = 0
        self.version = 0
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._informers: list[Informer] = []
        self._unsubscribe: list[Callable[[], None]] = []
        self._cluster_handlers: list[Callable[[str, ClusterInfo | None, ClusterInfo | None], Any]] = []
        self.synced = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, sync_timeout_s: float = 10.0) -> None:
        if self._tasks or self._unsubscribe:
            return
        feeds: list[tuple[str, Callable[[KeyValue], Any], Handler]] = [
            (CLUSTER.key_prefix(), decode_cluster, self._on_cluster),
            (STATUS_PREFIX, decode_status, self._on_status),
            (SURGE_KEY, decode_json, self._on_surge)]
        if self.shared is None:
            self._informers = [Informer(self.store, prefix, decode) for prefix, decode, _ in feeds]
            for inf, (_, _, handler) in zip(self._informers, feeds, strict=True):
                inf.on_change(handler)
            self._tasks = [asyncio.create_task(i.run(), name=f"fleetview:{i.prefix}") for i in self._informers]
        else:
            shared = self.shared
            self._informers = [shared.informer(prefix, decode) for prefix, decode, _ in feeds]
            for inf, (_, _, handler) in zip(self._informers, feeds, strict=True):
                self._unsubscribe.append(inf.on_change(handler))
                await inf.replay(handler)
        async with asyncio.timeout(sync_timeout_s):
            await asyncio.gather(*(i.wait_synced() for i in self._informers))
        self.synced = True

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        self.synced = False

    def on_cluster_change(self, handler: Callable[[str, ClusterInfo | None, ClusterInfo | None], Any]
                          ) -> Callable[[], None]:
        """``handler(name, old, new)`` after a cluster object changes (new None: deleted); returns
        what removes it (a component that lost its lease stops hearing)."""
        self._cluster_handlers.append(handler)
        return lambda: self._cluster_handlers.remove(handler)

    # -- change signal -----------------------------------------------------------------------

    def report_accepted(self) -> None:
        """A report was accepted here without a store write (rate control held it back): the
        realtime view, which shows latest reports, changed all the same."""
        self._bump()

    def _bump(self) -> None:
        self.version += 1
        ev, self._changed = self._changed, asyncio.Event()
        ev.set()

    async def wait_change(self, since: int, max_wait_s: float) -> int:
        """Wait until ``version`` moves past ``since`` (or ``max_wait_s``); returns the version."""
        if self.version == since:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), max_wait_s)
        return self.version

    # -- informer handlers -------------------------------------------------------------------

    async def _on_cluster(self, key: str, old: ClusterInfo | None, new: ClusterInfo | None) -> None:
        name = key[len(CLUSTER.key_prefix()):]
        if new is None:
            prev = self.clusters.pop(name, None)
        else:
            prev = self.clusters.get(name)
            self.clusters[name] = new
        self._bump()
        for h in tuple(self._cluster_handlers):
            try:
                res = h(name, prev, new)
                if asyncio.iscoroutine(res):
                    await res
            except Exception:
                log.exception("cluster change handler failed for %s", name)

    def _on_status(self, key: str, old: StatusEntry | None, new: StatusEntry | None) -> None:
        name = key[len(STATUS_PREFIX):]
        if new is None:
            if self.statuses.pop(name, None) is not None:
                self._bump()
            return
        self.observe_status(new)

    def _on_surge(self, key: str, old: Any, new: Any) -> None:
        if key != SURGE_KEY:
            return
        self.surge = new if isinstance(new, dict) else {}
        self._bump()

    def observe_status(self, entry: StatusEntry) -> None:
        """Take a newer document (from the watch, or written by this process a moment ago)."""
        cur = self.statuses.get(entry.cluster)
        if cur is None or entry.revision > cur.revision:
            self.statuses[entry.cluster] = entry
            self._bump()

    def observe_surge(self, doc: dict[str, Any], revision: int) -> None:
        if revision > self.surge_revision:
            self.surge, self.surge_revision = doc, revision
            self._bump()

    # -- reads -------------------------------------------------------------------------------

    def status(self, cluster: str) -> StatusEntry | None:
        return self.statuses.get(cluster)

    def ready(self, info: ClusterInfo) -> bool:
        """Ready unless a controller said otherwise: push-only clusters have no other health source,
        and their staleness is judged from report age."""
        return info.ready is not False

    def report_age(self, cluster: str, now: float | None = None) -> float | None:
        e = self.statuses.get(cluster)
        if e is None or e.status is None:
            return None
        return max((self.clock() if now is None else now) - e.status.received_ts, 0.0)

    def realtime(self, max_age_s: float, now: float | None = None,
                 latest: Mapping[str, NormalisedStatus] | None = None) -> tuple[RealtimeSnapshot, dict[str, Any]]:
        """The API8 fleet view, plus per-cluster details (ready, active, water level, age).

        A cluster's ``ready`` there is its Ready condition as stored (``null`` while Unknown: never
        heard from); the fleet figures count an Unknown cluster as ready, as the scheduler does.

        Without ``latest`` it is the scheduler's (rate-controlled) view. With it — this replica's
        latest accepted report per cluster — each cluster shows the newest of that, the stored
        document's latest report and its visible status: what was measured last, while
        ``schedulerWaterLevel`` keeps what the scheduler decides on."""
        now = self.clock() if now is None else now
        visible = {c: e.status for c, e in self.statuses.items() if e.status is not None}
        statuses = dict(visible)
        if latest is not None:
            candidates = [(c, e.latest) for c, e in self.statuses.items() if e.latest is not None]
            candidates += [(c, st) for c, st in latest.items() if c in self.clusters]
            for c, st in candidates:
                cur = statuses.get(c)
                if cur is None or st.received_ts >= cur.received_ts:
                    statuses[c] = st
        ready = {c: self.ready(i) for c, i in self.clusters.items()}
        snap = realtime(statuses, ready, now, max_age_s=max_age_s)
        unhealthy = set(snap.unhealthyClusters)
        details: dict[str, Any] = {}
        for c in sorted(ready):
            shown = statuses.get(c)
            age = None if shown is None else max(now - shown.received_ts, 0.0)
            seen = visible.get(c)
            details[c] = {
                "ready": self.clusters[c].ready,
                "active": c not in unhealthy,
                "waterLevel": snap.waterLevel.clusters.get(c),
                "schedulerWaterLevel": None if seen is None else shown_level(seen.water_level),
                "reportAgeSeconds": None if age is None else round(age, 3),
            }
        return snap, details
