"""The search cache controller (Karmada's karmada-search): for every ResourceRegistry, the kinds it
selects are listed and then watched in each member cluster its ``targetCluster`` takes in, through
the official Kubernetes client, and kept in `drods.members.search_cache`.

Every process that serves the API keeps its own cache, as each karmada-search replica does, so any
API replica answers a search. One follower task per (member, kind), however many registries ask for
it; the namespaces kept are the union of what those registries select. A registry removed, or a
cluster leaving its selection, stops the follower and drops its objects at once. A member that
cannot be reached keeps its last-seen objects and is retried every ``retry_s`` without holding up any
other member; a pull-mode member gives DRO-DS no way in, so nothing of it is cached (the registry's
condition says so). Each registry's ``status.conditions`` has ``Ready``: True once every selected kind
of every selected member is listed, else False naming what is missing and why — written by the
replica leading ``search-cache`` only (`SearchStatusTerm`), through its fenced registry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drods.controllers.overrides import cluster_matches
from drods.errors import AlreadyExists, Conflict, Invalid, NotFound
from drods.machinery.informer import Informer, subscribed
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import stop_tasks
from drods.members.client import MemberError, MemberOptions, MemberUnavailable, ServedResource, WatchExpired
from drods.members.clients import MemberClients
from drods.members.search_cache import CachedKind, SearchCache
from drods.model.kinds import CLUSTER, RESOURCE_REGISTRY
from drods.model.policy import OverrideClusterSelector
from drods.model.search import ResourceRegistrySpec
from drods.model.timefmt import rfc3339
from drods.registry.objects import ObjectRegistry
from drods.registry.patch import MERGE_PATCH

log = logging.getLogger(__name__)
Obj = dict[str, Any]
LEASE = "search-cache"
RESYNC_SECONDS = 10.0

# (member, apiVersion, kind): what one follower lists and watches
Wanted = tuple[str, str, str]


@dataclass
class _Follower:
    task: asyncio.Task[None]
    namespaces: frozenset[str]  # empty: every namespace
    kind: CachedKind | None = None  # once the member's discovery answered
    problem: str | None = "not listed yet"


def _what_it_asks(registry: Obj) -> tuple[Any, Any]:
    return registry.get("spec"), (registry.get("metadata") or {}).get("deletionTimestamp")


def _problem(e: Exception) -> str:
    """Why a kind of a member is not cached, worded the same on every attempt (the status changes
    only when the reason does)."""
    if isinstance(e, MemberUnavailable):
        return "the cluster is unreachable"
    if isinstance(e, MemberError):
        return f"{e.status} {e.reason}: {e.message}"[:300]
    return f"{type(e).__name__}: {e}"[:300]


def _fields(cluster: Obj) -> dict[str, str]:
    spec = cluster.get("spec") or {}
    return {k: str(spec[k]) for k in ("provider", "region", "zone", "city") if spec.get(k)}


class SearchCacheController:
    def __init__(self, registry: ObjectRegistry, clusters: Informer, registries: Informer, cache: SearchCache,
                 options: MemberOptions, *, watch_s: float = 20.0, retry_s: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.writer: ObjectRegistry | None = None  # the fenced registry while this replica leads the status
        self.clusters = clusters
        self.registries = registries
        self.cache = cache
        self.clients = MemberClients(registry, options)  # its own threads: a long watch blocks no other controller
        self.watch_s = watch_s
        self.retry_s = retry_s
        self.clock = clock
        self.followers: dict[Wanted, _Follower] = {}
        self._changed = asyncio.Event()

    async def run(self) -> None:
        await self.clusters.wait_synced()
        await self.registries.wait_synced()
        passes = Periodic("search-cache", self.tick, RESYNC_SECONDS, wake=self._changed, first_at_start=True)

        def wake(_key: str, old: Obj | None, new: Obj | None) -> None:
            if old is None or new is None or _what_it_asks(old) != _what_it_asks(new):
                self._changed.set()  # not on its own status writes

        def cluster_changed(key: str, _old: Obj | None, new: Obj | None) -> None:
            self.clients.invalidate(key[len(CLUSTER.key_prefix()):], new)
            self._changed.set()

        self.cache.active = True
        try:
            with subscribed((self.clusters, cluster_changed), (self.registries, wake)):
                await passes.run()
        finally:
            await stop_tasks([f.task for f in self.followers.values()])
            self.followers.clear()
            self.cache.clear()
            self.cache.active = False
            await self.clients.close()

    # ------------------------------------------------------------------ what is wanted
    def _specs(self) -> dict[str, ResourceRegistrySpec]:
        out = {}
        for key, obj in sorted(self.registries.cache.items()):
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            name = key[len(RESOURCE_REGISTRY.key_prefix()):]
            try:
                out[name] = ResourceRegistrySpec.model_validate(obj.get("spec") or {})
            except ValueError:  # validated on the way in; one stored by another version may not be
                log.warning("ResourceRegistry %s: invalid spec, skipped", name)
        return out

    def _selected_clusters(self, spec: ResourceRegistrySpec) -> list[str]:
        t = spec.targetCluster
        sel = OverrideClusterSelector(names=list(t.clusterNames), labelSelector=t.labelSelector,
                                      exclude=list(t.exclude), fieldSelector=t.fieldSelector)
        out = []
        for key, cluster in sorted(self.clusters.cache.items()):
            name = key[len(CLUSTER.key_prefix()):]
            if cluster_matches(sel, name, (cluster.get("metadata") or {}).get("labels") or {}, _fields(cluster)):
                out.append(name)
        return out

    def wanted(self, specs: dict[str, ResourceRegistrySpec]) -> dict[str, dict[Wanted, frozenset[str]]]:
        """Per registry, the (member, apiVersion, kind) it selects and the namespaces (empty: all)."""
        out: dict[str, dict[Wanted, frozenset[str]]] = {}
        for name, spec in specs.items():
            mine: dict[Wanted, set[str] | None] = {}
            for cluster in self._selected_clusters(spec):
                for s in spec.resourceSelectors:
                    key = (cluster, s.apiVersion, s.kind)
                    seen = mine.get(key, set())
                    mine[key] = None if seen is None or not s.namespace else seen | {s.namespace}
            out[name] = {k: frozenset(v or ()) for k, v in mine.items()}
        return out

    # ------------------------------------------------------------------ a pass
    async def tick(self) -> None:
        self._changed.clear()
        per_registry = self.wanted(self._specs())
        union: dict[Wanted, frozenset[str]] = {}  # per follower, the namespaces any registry wants
        for wants in per_registry.values():
            for key, namespaces in wants.items():
                if key in union and (not union[key] or not namespaces):
                    union[key] = frozenset()
                else:
                    union[key] = union.get(key, frozenset()) | namespaces
        for key in [k for k in self.followers if k not in union]:
            await self._stop(key)
        for key, scope in union.items():
            follower = self.followers.get(key)
            if follower is not None and follower.namespaces != scope:
                await self._stop(key)  # listed again in its new scope
                follower = None
            if follower is None or follower.task.done():
                self.followers[key] = _Follower(asyncio.create_task(self._follow(key), name=f"search {key}"), scope)
        for name, wants in per_registry.items():
            await self._report(name, wants)

    async def _stop(self, key: Wanted) -> None:
        follower = self.followers.pop(key)
        await stop_tasks([follower.task])
        if follower.kind is not None:
            self.cache.drop(follower.kind)

    # ------------------------------------------------------------------ one member's kind
    async def _follow(self, key: Wanted) -> None:
        """List, then watch until the watch fails; list again at once when the member's history is
        gone (410), after ``retry_s`` on any other failure (never gives up while wanted: a member
        coming back is cached again)."""
        while True:
            follower = self.followers[key]
            try:
                await self._list_and_watch(key, follower)
            except asyncio.CancelledError:
                raise
            except WatchExpired:
                continue
            except MemberError as e:
                if e.status == 410:  # Gone: list again now
                    continue
                self._failed(key, follower, e)
            except Exception as e:  # noqa: BLE001 - any failure of one member: retry it, nobody waits
                self._failed(key, follower, e)
            await asyncio.sleep(self.retry_s)

    def _failed(self, key: Wanted, follower: _Follower, e: Exception) -> None:
        problem = _problem(e)
        if follower.problem != problem:
            follower.problem = problem
            self._changed.set()
            log.info("search cache: %s %s in %s: %s", key[1], key[2], key[0], problem)

    async def _list_and_watch(self, key: Wanted, follower: _Follower) -> None:
        cluster, api_version, kind_name = key
        client, why = await self.clients.get(cluster)
        if client is None:
            if follower.problem != why:
                follower.problem = why or "no client"
                self._changed.set()
            return
        res = await client.resource(api_version, kind_name)
        kind = follower.kind = self._kind(cluster, res)
        self.cache.scope(kind, follower.namespaces)
        items, rv = await client.list_versioned(res)
        self.cache.replace(kind, items)
        if follower.problem is not None:
            follower.problem = None
            self._changed.set()
        deliver = self._deliver(asyncio.get_running_loop(), key, kind)
        while True:
            rv = await client.watch_from(res, rv, self.watch_s, deliver)

    @staticmethod
    def _kind(cluster: str, res: ServedResource) -> CachedKind:
        return CachedKind(cluster, res.api_version, res.kind, res.plural, res.namespaced)

    def _deliver(self, loop: asyncio.AbstractEventLoop, key: Wanted, kind: CachedKind) -> Callable[[str, Obj], None]:
        """Events come from a worker thread; they reach the cache on the loop, and only while this
        follower is still the one wanted (a stopped one's watch may run on a little)."""
        def on_loop(event: str, obj: Obj) -> None:
            follower = self.followers.get(key)
            if follower is not None and follower.kind == kind and not follower.task.done():
                self.cache.apply(kind, event, obj)

        def deliver(event: str, obj: Obj) -> None:
            loop.call_soon_threadsafe(on_loop, event, obj)

        return deliver

    # ------------------------------------------------------------------ status
    def report_with(self, writer: ObjectRegistry | None) -> None:
        """Write the registries' status through ``writer`` from now on (None: write nothing); a pass
        runs at once, so a new leader reports what this replica's cache holds."""
        self.writer = writer
        self._changed.set()

    def condition(self, wants: dict[Wanted, frozenset[str]]) -> Obj:
        if not wants:
            return {"type": "Ready", "status": "False", "reason": "NoClusterSelected",
                    "message": "targetCluster selects no registered cluster: nothing is cached"}
        missing = sorted((k, f.problem) for k in wants if (f := self.followers.get(k)) is not None and f.problem)
        if not missing:
            return {"type": "Ready", "status": "True", "reason": "Synced",
                    "message": f"{len(wants)} kind(s) of the selected clusters are cached"}
        what = "; ".join(f"{kind} ({api}) in {cluster}: {problem}" for (cluster, api, kind), problem in missing[:5])
        return {"type": "Ready", "status": "False", "reason": "NotCached", "message": what[:1000]}

    async def _report(self, name: str, wants: dict[Wanted, frozenset[str]]) -> None:
        if self.writer is None:
            return  # another replica leads the status; this one only keeps and serves its cache
        cond = self.condition(wants)
        obj = self.registries.cache.get(RESOURCE_REGISTRY.key(name)) or {}
        current: Obj = next((c for c in (obj.get("status") or {}).get("conditions") or []
                             if isinstance(c, dict) and c.get("type") == "Ready"), {})
        if all(current.get(k) == v for k, v in cond.items()):
            return
        cond["lastTransitionTime"] = current.get("lastTransitionTime") if current.get("status") == cond["status"] \
            else rfc3339(self.clock())
        with contextlib.suppress(NotFound, Conflict, AlreadyExists, Invalid):
            await self.writer.patch(RESOURCE_REGISTRY, name, {"status": {"conditions": [cond]}}, MERGE_PATCH,
                                      subresource="status")


class SearchStatusTerm:
    """While this replica leads ``search-cache``: its cache's view is what the registries'
    ``Ready`` condition says (one writer, fenced, whichever replica it is)."""

    def __init__(self, controller: SearchCacheController, registry: ObjectRegistry) -> None:
        self.controller = controller
        self.registry = registry

    async def run(self) -> None:
        self.controller.report_with(self.registry)
        try:
            await asyncio.Event().wait()
        finally:
            self.controller.report_with(None)
