"""Collection subscriptions (SPEC C1): each cluster is collected as often as its most demanding
subscriber needs, not on one fixed tick.

A subscription is a declared need — "I need the status of these clusters no older than N
seconds" — from a component, a service or a user::

    {"name": "latency-router", "maxAgeSeconds": 5, "reason": "routes by live load",
     "clusterSelector": {"names": ["aws-dfw"], "labelSelector": {"matchLabels": {"tier": "edge"}}},
     "ttlSeconds": 60}

Stored at ``/monitor/subscriptions/<name>`` (so every API replica and the collector leader see the
same set through a prefix watch); with ``ttlSeconds`` the key is bound to a store lease, so the
need of a subscriber that stops renewing (PUT again) disappears by itself. A cluster's
**effective interval** is the smallest ``maxAgeSeconds`` among the subscriptions that match it,
clamped to ``[minCollectIntervalSeconds, collectIntervalSeconds]``; with none it is
``collectIntervalSeconds``. Pull collectors use it per cluster (`drods.monitor.collectors`) and
``PUT /api/v1/metrics`` tells pushing agents (``nextReportSeconds``).

Two subscribers are built in, derived from the monitoring settings by every process (not
stored, so they can neither go stale nor be deleted):

* ``scheduler`` — ``schedulerMaxAgeSeconds``, default ``collectIntervalSeconds``: the freshness
  the water-level placement was tuned with, so by default it changes nothing;
* ``autoops`` — ``autoopsMaxAgeSeconds``, default ``sustainedSeconds / 5``: a sustained breach is
  confirmed by at least five samples, so an evacuation is decided within ~20 % of the window
  (only while ``autoops.enabled``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drods.machinery.informer import Informer
from drods.machinery.shared import SharedInformers
from drods.model import jsondoc
from drods.model.keys import SUBSCRIPTIONS_PREFIX
from drods.model.selector import LabelSelector
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import iso
from drods.monitor.service import MonitorService, MonitorSettings
from drods.store import KeyValue, Store

log = logging.getLogger(__name__)

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
MIN_MAX_AGE_S = 1.0
MAX_MAX_AGE_S = 3600.0
MAX_SUBSCRIPTIONS = 1000  # a runaway client must not make every interval computation slow (SEC4)
BUILTIN_SETTINGS = {"scheduler": "schedulerMaxAgeSeconds", "autoops": "autoopsMaxAgeSeconds"}
AUTOOPS_SAMPLES = 5.0  # samples per sustainedSeconds window the auto-ops need asks for


# -- wire shapes ---------------------------------------------------------------------------


class ClusterSelector(BaseModel):
    """Which clusters a subscription is about: both parts must match; absent or empty = every cluster."""

    model_config = ConfigDict(extra="forbid", strict=True)

    names: list[str] = Field(default_factory=list, max_length=1000,
                             description="cluster names (any of them); empty = any name")
    labelSelector: LabelSelector | None = None


class SubscriptionBody(BaseModel):
    """``PUT /api/v1/monitor/subscriptions/{name}``: the need, as the subscriber declares it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str | None = Field(default=None, min_length=1, max_length=253, pattern=NAME_PATTERN,
                             description="optional in the body; must equal the path's name")
    maxAgeSeconds: float = Field(ge=MIN_MAX_AGE_S, le=MAX_MAX_AGE_S, examples=[5],
                                 description="status of the matching clusters must be no older than this")
    clusterSelector: ClusterSelector | None = None
    reason: str = Field(default="", max_length=1024, description="who needs it and why (shown to operators)")
    ttlSeconds: int | None = Field(default=None, ge=2, le=86_400,
                                   description="forget the subscription unless it is PUT again within this")


class SubscriptionView(BaseModel):
    name: str
    maxAgeSeconds: float
    clusterSelector: ClusterSelector | None
    reason: str
    ttlSeconds: int | None
    builtin: bool = Field(description="derived from the monitoring configuration; read-only")
    setting: str | None = Field(description="for a built-in: the setting it comes from")
    owner: str | None = Field(description="subject of the token that wrote it")
    updatedAt: str | None
    expiresAt: str | None = Field(description="with ttlSeconds: when it lapses unless renewed")


class ClusterInterval(BaseModel):
    seconds: float
    subscription: str | None = Field(description="the need that sets it; null = collectIntervalSeconds")
    notApplied: str | None = Field(
        default=None, description="what of this cluster's collection does not follow the interval (null: none)")


class SubscriptionList(BaseModel):
    items: list[SubscriptionView]
    intervals: dict[str, ClusterInterval] = Field(description="effective collection interval per cluster")
    minCollectIntervalSeconds: float
    collectIntervalSeconds: float


# -- inside --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    max_age_s: float
    reason: str = ""
    names: frozenset[str] = frozenset()
    selector: LabelSelector | None = None
    ttl_s: int | None = None
    owner: str | None = None
    updated_at: float | None = None
    builtin: bool = False

    def matches(self, cluster: ClusterInfo) -> bool:
        if self.names and cluster.name not in self.names:
            return False
        return self.selector is None or self.selector.matches(cluster.labels)

    def to_view(self) -> SubscriptionView:
        sel = None
        if self.names or self.selector is not None:
            sel = ClusterSelector(names=sorted(self.names), labelSelector=self.selector)
        expires = self.updated_at + self.ttl_s if self.updated_at is not None and self.ttl_s else None
        return SubscriptionView(
            name=self.name, maxAgeSeconds=self.max_age_s, clusterSelector=sel, reason=self.reason,
            ttlSeconds=self.ttl_s, builtin=self.builtin, setting=BUILTIN_SETTINGS.get(self.name) if self.builtin
            else None, owner=self.owner, updatedAt=iso(self.updated_at) if self.updated_at is not None else None,
            expiresAt=iso(expires) if expires is not None else None)

    @classmethod
    def from_body(cls, name: str, body: SubscriptionBody, *, owner: str | None = None,
                  updated_at: float | None = None) -> Subscription:
        sel = body.clusterSelector
        return cls(name=name, max_age_s=body.maxAgeSeconds, reason=body.reason,
                   names=frozenset(sel.names) if sel is not None else frozenset(),
                   selector=sel.labelSelector if sel is not None else None, ttl_s=body.ttlSeconds,
                   owner=owner, updated_at=updated_at)


def encode(sub: Subscription) -> bytes:
    view = sub.to_view()
    doc = {"name": sub.name, "maxAgeSeconds": sub.max_age_s, "reason": sub.reason,
           "clusterSelector": view.clusterSelector.model_dump(exclude_none=True) if view.clusterSelector else None,
           "ttlSeconds": sub.ttl_s, "owner": sub.owner, "updatedAt": sub.updated_at}
    return jsondoc.dumps(doc)


def decode(kv: KeyValue) -> Subscription | None:
    """A stored subscription; None (ignored) for anything that no longer validates."""
    try:
        doc = json.loads(kv.value)
        body = SubscriptionBody.model_validate(
            {k: doc.get(k) for k in ("maxAgeSeconds", "clusterSelector", "reason", "ttlSeconds")
             if doc.get(k) is not None})
        updated = doc.get("updatedAt")
        owner = doc.get("owner")
        return Subscription.from_body(kv.key[len(SUBSCRIPTIONS_PREFIX):], body,
                                      owner=owner if isinstance(owner, str) else None,
                                      updated_at=float(updated) if isinstance(updated, int | float) else None)
    except (ValueError, TypeError, AttributeError, ValidationError) as e:
        log.warning("ignoring malformed subscription %s: %s", kv.key, e)
        return None


def builtin_subscriptions(settings: MonitorSettings, autoops: AutoOpsPolicy | None = None) -> list[Subscription]:
    """The scheduler's and auto-ops' needs, from the settings (see the module docstring); auto-ops'
    only while its policy is enabled (the default policy is)."""
    sched = settings.schedulerMaxAgeSeconds or settings.collectIntervalSeconds
    out = [Subscription("scheduler", sched, builtin=True,
                        reason="water-level placement reads /status/clusters/<name>")]
    if autoops is None or autoops.enabled:
        need = settings.autoopsMaxAgeSeconds or settings.sustainedSeconds / AUTOOPS_SAMPLES
        out.append(Subscription("autoops", need, builtin=True,
                                reason=f"sustained-above-limit detection: {AUTOOPS_SAMPLES:g} samples per "
                                       f"sustainedSeconds ({settings.sustainedSeconds:g}s)"))
    return out


@dataclass(frozen=True, slots=True)
class Interval:
    seconds: float
    subscription: str | None  # the need that sets it; None when it is the default
    not_applied: str | None = None  # what of the cluster's collection keeps its own cadence

    def to_view(self) -> ClusterInterval:
        return ClusterInterval(seconds=round(self.seconds, 3), subscription=self.subscription,
                               notApplied=self.not_applied)


# A push member the control plane reaches is summarised on the members' own cadence (the summary is a
# listing of its nodes and pods, sized for the fleet, not for one subscriber): the interval sets its
# Prometheus pulls and the reports PUT for it, and the list says so rather than let a reader assume more.
SUMMARY_NOT_APPLIED = ("its Kubernetes summary: a push member the control plane reaches is summarised "
                       "every members.summaryIntervalSeconds")


def _summarised(cluster: ClusterInfo) -> bool:
    return cluster.spec.get("syncMode", "Push") != "Pull" and bool(cluster.spec.get("credentials"))


def effective_interval(cluster: ClusterInfo, subscriptions: Iterable[Subscription],
                       settings: MonitorSettings) -> Interval:
    """min(maxAgeSeconds of the matching subscriptions), clamped to [min, collectIntervalSeconds]."""
    ceiling = settings.collectIntervalSeconds
    floor = min(settings.minCollectIntervalSeconds, ceiling)
    best: Subscription | None = None
    for s in subscriptions:
        if s.matches(cluster) and (best is None or (s.max_age_s, s.name) < (best.max_age_s, best.name)):
            best = s
    own = SUMMARY_NOT_APPLIED if _summarised(cluster) else None
    if best is None or best.max_age_s >= ceiling:
        return Interval(ceiling, None, own)
    return Interval(max(best.max_age_s, floor), best.name, own)


@dataclass
class Subscriptions:
    """The stored subscriptions (watch-fed cache) plus the built-in ones; one per `MonitorService`.

    Started by whoever needs it (`acquire` / `release` count users: the API app and the collector
    leader share one watch); `interval_for` answers from memory, so it is cheap on the report path.
    """

    store: Store
    settings: MonitorSettings
    clock: Callable[[], float] = time.time
    autoops: AutoOpsPolicy | None = None  # the fleet's policy (None: the default, enabled)
    informers: SharedInformers | None = None  # the process's (None: these subscriptions watch for themselves)
    builtins: list[Subscription] = field(init=False)
    _informer: Informer = field(init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _users: int = field(default=0, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    # Intervals only change with the subscriptions or a cluster's labels (a new ClusterInfo), so the
    # report path and the collector's wake-ups look them up instead of matching every subscription.
    _every: tuple[Subscription, ...] = field(default=(), init=False)
    _memo: dict[str, tuple[ClusterInfo, Interval]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.builtins = builtin_subscriptions(self.settings, self.autoops)
        self._every = tuple(self.builtins)
        if self.informers is None:
            self._informer = Informer(self.store, SUBSCRIPTIONS_PREFIX, decode)
        else:
            self._informer = self.informers.informer(SUBSCRIPTIONS_PREFIX, decode)
        self._informer.on_change(self._changed)
        self._changed("", None, None)  # a shared informer may hold them already

    def _changed(self, key: str, old: Subscription | None, new: Subscription | None) -> None:
        self._every = (*self.builtins, *self.cached())
        self._memo.clear()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the watch runs (a shared one: as long as the process's manager runs)."""
        return self.informers is not None or (self._task is not None and not self._task.done())

    async def ensure_started(self, sync_timeout_s: float = 10.0) -> None:
        """Start the watch if nobody did (idempotent) and wait for the first listing."""
        async with self._lock:
            if not self.running:
                self._task = asyncio.create_task(self._informer.run(), name="monitor-subscriptions")
        async with asyncio.timeout(sync_timeout_s):
            await self._informer.wait_synced()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def acquire(self) -> None:
        """Count a user and start; a store that is slow to answer only delays the first listing
        (until then every cluster gets the default interval)."""
        self._users += 1
        try:
            await self.ensure_started()
        except TimeoutError:
            log.warning("subscriptions not listed yet; collecting at the default interval meanwhile")

    async def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self._users = 0
            await self.stop()

    @contextlib.asynccontextmanager
    async def using(self) -> AsyncIterator[Subscriptions]:
        await self.acquire()
        try:
            yield self
        finally:
            await self.release()

    # -- reads -------------------------------------------------------------------------------

    def cached(self) -> list[Subscription]:
        return [s for s in self._informer.cache.values() if s is not None]

    def interval_for(self, cluster: ClusterInfo) -> Interval:
        hit = self._memo.get(cluster.name)
        if hit is not None and hit[0] is cluster:
            return hit[1]
        interval = effective_interval(cluster, self._every, self.settings)
        self._memo[cluster.name] = (cluster, interval)
        return interval

    def seconds_for(self, cluster: ClusterInfo) -> float:
        return self.interval_for(cluster).seconds

    def builtin(self, name: str) -> Subscription | None:
        return next((s for s in self.builtins if s.name == name), None)

    async def read(self) -> list[Subscription]:
        """Straight from the store (read-your-writes for the API), built-ins included."""
        kvs, _ = await self.store.range(SUBSCRIPTIONS_PREFIX)
        stored = [s for s in (decode(kv) for kv in kvs) if s is not None]
        return sorted([*self.builtins, *stored], key=lambda s: s.name)

    async def get(self, name: str) -> Subscription | None:
        b = self.builtin(name)
        if b is not None:
            return b
        kv = await self.store.get(SUBSCRIPTIONS_PREFIX + name)
        return decode(kv) if kv is not None else None

    # -- writes ------------------------------------------------------------------------------

    async def put(self, name: str, body: SubscriptionBody, owner: str | None) -> tuple[Subscription, bool]:
        """Create or replace (renews the TTL); returns it and whether it is new."""
        sub = Subscription.from_body(name, body, owner=owner, updated_at=self.clock())
        key = SUBSCRIPTIONS_PREFIX + name
        lease = (await self.store.grant_lease(body.ttlSeconds)).id if body.ttlSeconds else 0
        prev = await self.store.get(key)
        await self.store.put(key, encode(sub), lease=lease)
        if prev is not None and prev.lease and prev.lease != lease:
            # Leases are never reused, so the key no longer holds this one: revoking it deletes nothing.
            with contextlib.suppress(Exception):
                await self.store.revoke_lease(prev.lease)
        return sub, prev is None

    async def delete(self, name: str) -> Subscription | None:
        kv = await self.store.delete(SUBSCRIPTIONS_PREFIX + name)
        return decode(kv) if kv is not None else None

    def intervals(self, clusters: Mapping[str, ClusterInfo],
                  subscriptions: Iterable[Subscription]) -> dict[str, Interval]:
        subs = list(subscriptions)
        return {n: effective_interval(info, subs, self.settings) for n, info in sorted(clusters.items())}


_BY_SERVICE: weakref.WeakKeyDictionary[MonitorService, Subscriptions] = weakref.WeakKeyDictionary()


def subscriptions_of(svc: MonitorService) -> Subscriptions:
    """The `Subscriptions` of a monitoring service (one per process, shared by the API and the
    collectors; created on first use, not started)."""
    subs = _BY_SERVICE.get(svc)
    if subs is None:
        subs = _BY_SERVICE[svc] = Subscriptions(svc.store, svc.settings, svc.clock, svc.autoops, svc.informers)
    return subs


__all__ = ["SUBSCRIPTIONS_PREFIX", "ClusterSelector", "Interval", "Subscription", "SubscriptionBody",
           "SubscriptionList", "SubscriptionView", "Subscriptions", "builtin_subscriptions", "effective_interval",
           "subscriptions_of"]
