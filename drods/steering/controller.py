"""The steering controller (SPEC C3, C6-C8): registrations + status → published ServiceRoutes.

Single-active (``/leases/steering``), its writes fenced. It subscribes to the process's shared
informers — ServiceRegistrations, Bindings (a workload's instances are the clusters its Binding
places it on), Clusters, cluster status documents (``/status/clusters/``) and network status
(``/status/network/``) — and recomputes when they change: a cluster's CPU crossing 70 % or a
latency change is a watch event, not a poll. A burst of events within ``coalesceSeconds`` is one
recomputation; only services with an instance on a changed cluster (or whose registration or
binding changed) are evaluated again. The only timer is a deadline: when damping holds a better
route back, the moment it becomes allowed.

Routes are published as ``ServiceRoute`` objects (named by the Service ID) when a client site's
route changes, or when its metric moved by more than the change threshold (at most once per
minimum interval). The controller owns them as a Kubernetes controller owns its objects: it watches
them (``SteeringInformers.routes``), and one changed or deleted by anyone else is put back as it last
published it by the next pass — ``coalesceSeconds`` after the watch event, once a pass under way has
ended — with a warning logged and a ``RouteRestored`` Event on the ServiceRoute. Each registration's
``status`` says whether it is active, its instances, any conflict (the Service ID is unique: the
oldest registration keeps it), and why a client site has no route (no measurement from it to any
instance, …).

CCC: a client site no instance serves within the SLA makes the controller look for the nearest
cluster that would (evaluating the service against every cluster), and offer it to the service's
workload through the `RescheduleHook` (``offer``), at most once per ``offerCooldownSeconds``. One
owner per Binding: a Binding whose placement follows the users learned for the service
(`drods.steering.users`, `drods.model.annotations.follows_learned_users`) is offered nothing — the
learned demand already holds those client sites and the scheduler's latency SLO decides where they are
served, so an offer only bought a re-decision that SLO filter then undid. A Binding without learned
users (demand below ``minRequestsPerSecond``, or users declared on its placement, which rule over
learned ones) is still offered clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from drods.errors import AlreadyExists, ApiError, Conflict, NotFound
from drods.machinery.decision_log import decision_log, record_decisions
from drods.machinery.event_log import EventLog
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.machinery.memory import collections_deferred
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import yielding
from drods.model.annotations import follows_learned_users
from drods.model.conditions import is_false
from drods.model.keys import NETWORK_PREFIX, STATUS_PREFIX, network_key, pair_of
from drods.model.kinds import BINDING, CLUSTER, SERVICE_REGISTRATION, SERVICE_ROUTE
from drods.model.migration import traffic_withdrawn
from drods.model.reschedule import RescheduleHook, RescheduleRequest
from drods.model.steering import ServiceRegistrationSpec, foreign_workload, workload_key
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.registry.patch import MERGE_PATCH
from drods.steering.engine import I64, Chunk, Fleet, ServiceEval, ServicePlan, evaluate, evaluate_chunks
from drods.steering.evaluation import EVALUATIONS, B
from drods.steering.metrics import F
from drods.steering.plans import compile_plan
from drods.steering.route_decisions import Evaluated, route_decision
from drods.steering.routing import ChunkStep, Rendered, RouteState, broken_text, render_chunk, step_chunk
from drods.steering.settings import SteeringSettings
from drods.steering.status import build_fleet, utilisation
from drods.store import KeyValue
from drods.store.cas import read_modify_write

log = logging.getLogger(__name__)

LEASE = "steering"
# A status change counts as "worse" above these (smaller moves are treated as improvements or noise).
_WORSE_UTILISATION = 0.005
_WORSE_DELAY_MS = 0.05


def route_revision(kv: KeyValue) -> int:
    """What the controller's informer of ServiceRoutes keeps of one: its revision (the routes
    themselves it holds as it wrote them, `SteeringController.route_objects`)."""
    return kv.mod_revision


@dataclass(frozen=True, slots=True)
class SteeringInformers:
    registrations: Informer
    bindings: Informer
    clusters: Informer
    status: Informer
    network: Informer
    routes: Informer | None = None  # the ServiceRoutes (`route_revision`): one written by others is put back

    @classmethod
    def of(cls, manager: Manager) -> SteeringInformers:
        return cls(manager.informer(SERVICE_REGISTRATION.key_prefix(), decode_stored),
                   manager.informer(BINDING.key_prefix(), decode_binding_kept),
                   manager.informer(CLUSTER.key_prefix(), decode_stored),
                   manager.informer(STATUS_PREFIX, decode_stored),
                   manager.informer(NETWORK_PREFIX, decode_stored),
                   manager.informer(SERVICE_ROUTE.key_prefix(), route_revision))

    def all(self) -> tuple[Informer, ...]:
        own = (self.registrations, self.bindings, self.clusters, self.status, self.network)
        return own if self.routes is None else (*own, self.routes)


@dataclass(frozen=True, slots=True)
class Recomputation:
    """What one recomputation did (for metrics and the benchmark)."""

    started: float  # clock time
    seconds: float  # wall time it took, publishing included
    evaluated: int  # services evaluated
    written: int  # ServiceRoutes written
    revision: int  # the store revision its inputs were read at (the informers' highest)


@dataclass(slots=True)
class _Service:
    """One active registration, compiled."""

    key: str
    obj: dict[str, Any]
    spec: ServiceRegistrationSpec
    plan: ServicePlan
    binding: str | None
    signature: str  # what its route state depends on (`_signature`)


def _ref_key(ref: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (str(ref.get("apiVersion")), str(ref.get("kind")), str(ref.get("namespace") or "default"),
            str(ref.get("name")))


@dataclass(frozen=True, slots=True)
class _Served:
    """What a chunk's step means for publishing, read from the pairs in use and recently used only."""

    metric: F  # (services, client sites): the metric each site is served with (0 where none)
    in_use: B  # (services, instances): used by a route or by flows that may stay on it
    short: B  # (services, client sites): no instance meets the SLA
    flows: tuple[I64, ...]  # (service, site, instance) of the pairs flows may stay on, by service
    bounds: I64  # each service's range in ``flows``

    @classmethod
    def of(cls, chunk: Chunk, stepped: ChunkStep) -> _Served:
        n_s, n_c, n_i = chunk.metric.shape
        us, ur, uj = stepped.used
        metric = chunk.metric[us, ur, uj]
        served = np.asarray(np.bincount(us * n_c + ur, weights=np.where(np.isfinite(metric), metric, 0.0),
                                        minlength=n_s * n_c), dtype=np.float64).reshape(n_s, n_c)
        in_use = np.zeros((n_s, n_i), dtype=bool)
        in_use[us, uj] = True
        in_use[stepped.recent[0], stepped.recent[2]] = True
        flows = stepped.eligible
        short = np.asarray(~chunk.valid.any(axis=-1), dtype=bool)
        return cls(served, in_use, short, flows, np.searchsorted(flows[0], np.arange(n_s + 1)))

    def eligible(self, s: int, n_instances: int) -> I64:
        """Service ``s``'s eligible pairs as site x ``n_instances`` + instance, ascending."""
        lo, hi = int(self.bounds[s]), int(self.bounds[s + 1])
        return self.flows[1][lo:hi] * n_instances + self.flows[2][lo:hi]


def _signature(spec: ServiceRegistrationSpec) -> str:
    """What, when changed, starts a service's routes afresh (strategy, SLA, evaluation …)."""
    return spec.model_dump_json(exclude={"clientSites", "workload", "placementFeedback"})


class SteeringController:
    def __init__(self, registry: ObjectRegistry, informers: SteeringInformers, settings: SteeringSettings,
                 placement: RescheduleHook | None = None, clock: Callable[[], float] = time.time,
                 observer: Callable[[Recomputation], None] | None = None) -> None:
        self.registry = registry
        self.inf = informers
        self.settings = settings
        self.damping = settings.damping()
        self.placement = placement
        self.clock = clock
        self.states: dict[str, RouteState] = {}
        self.signatures: dict[str, str] = {}
        self.published: dict[str, dict[str, Any]] = {}  # service ID → the spec last published
        self.decisions = decision_log(registry.store, clock=clock)  # X1: route changes
        self.published_at: dict[str, float] = {}
        self.recheck: dict[str, float] = {}
        self.offered: dict[tuple[str, str], float] = {}  # (service ID, client site) → when
        self.reg_status: dict[str, dict[str, Any]] = {}
        self.pub_keys: dict[str, tuple[Any, ...]] = {}  # what the last published routes were computed for
        self.pub_metrics: dict[str, F] = {}  # per client site, the metric served when last published
        self.pub_eligible: dict[str, I64] = {}  # the eligible (flow-affinity) pairs last published
        self.rendered: dict[str, Rendered] = {}  # the routes last published, as rendered (reused per site)
        self.route_objects: dict[str, dict[str, Any]] = {}  # store key → the ServiceRoute as last written
        # store key → the revision a watch saw it written at by someone else (None: deleted), until a pass
        # puts it back
        self._tampered: dict[str, int | None] = {}
        self.restored = 0  # ServiceRoutes put back after someone else changed or deleted them
        self.events = EventLog(registry.store, "steering-controller")
        self.unrouted: dict[str, dict[str, str]] = {}  # service ID → client site → why it has no instance
        self.recomputations = 0
        self.observer = observer
        self._wake = asyncio.Event()
        self.ready = asyncio.Event()  # set once it has resumed from the published routes and reacts
        self._all = True
        self._worse: set[str] = set()  # clusters whose status got worse since the last recomputation
        self._better: set[str] = set()  # … whose status changed otherwise
        self._worse_sites: set[str] = set()  # network targets (clusters or sites) whose delay grew
        self._better_sites: set[str] = set()
        self.worsened_at: dict[str, float] = {}  # cluster → when its status last got worse
        self.uses: dict[str, frozenset[str]] = {}  # service ID → clusters its routes (or their flows) use
        self.short: set[str] = set()  # services with a client site no instance serves within the SLA
        # What only a structural change (registrations, Bindings, Clusters) or a network change alters.
        self._services_cache: tuple[dict[str, _Service], dict[str, dict[str, Any]]] | None = None
        self._clients: set[str] = set()  # every registered service's client sites
        self._fleet_cache: Fleet | None = None
        # workload → (its Binding, the clusters serving it), kept per Binding event rather than read
        # from 100,000 Bindings on each structural change; and the workloads registrations name
        self._placed: dict[tuple[str, str, str, str], tuple[str, list[str]]] = {}
        self._named: set[tuple[str, str, str, str]] = set()

    # ------------------------------------------------------------------ triggers
    def _on_structure(self, _key: str, _old: Any, _new: Any) -> None:
        self._all = True
        self._wake.set()

    def _on_cluster(self, key: str, old: Any, new: Any) -> None:
        if self.inf.registrations.cache:  # else no route depends on any cluster
            self._on_structure(key, old, new)

    def _on_binding(self, key: str, old: Any, new: Any) -> None:
        refs = {r for r in (self._index_binding(old, None), self._index_binding(new, new)) if r is not None}
        if self.inf.registrations.cache and refs & self._named:  # else no route depends on it
            self._on_structure(key, old, new)

    def _index_binding(self, obj: Any, now: Any) -> tuple[str, str, str, str] | None:
        """Index ``now`` (the Binding as it is) or drop ``obj`` (as it was); its workload's key."""
        ref = ((obj or {}).get("spec") or {}).get("resource") if isinstance(obj, dict) else None
        if not isinstance(ref, dict):
            return None
        rk, name = _ref_key(ref), str(obj["metadata"]["name"])
        if now is None or (now.get("metadata") or {}).get("deletionTimestamp"):
            if self._placed.get(rk, ("",))[0] == name:
                del self._placed[rk]
            return rk
        withdrawn = traffic_withdrawn(now)  # F3: a migration moved the traffic off these copies
        self._placed[rk] = (name, [str(p["cluster"]) for p in (now.get("status") or {}).get("placement") or []
                                   if isinstance(p, dict) and int(p.get("replicas") or 0) > 0 and p.get("cluster")
                                   and str(p["cluster"]) not in withdrawn])
        return rk

    def _on_status(self, key: str, old: Any, new: Any) -> None:
        if not self.inf.registrations.cache:
            return  # no service to route: a registration's arrival evaluates everything anyway
        cluster = key[len(STATUS_PREFIX):]
        before, after = utilisation(old), utilisation(new)
        if new is None or after > before + _WORSE_UTILISATION:
            self._worse.add(cluster)
        else:
            self._better.add(cluster)
        self._wake.set()

    def _on_network(self, key: str, old: Any, new: Any) -> None:
        pair = pair_of(key)
        if pair is not None:
            before = (old or {}).get("delayMs") if isinstance(old, dict) else None
            after = (new or {}).get("delayMs") if isinstance(new, dict) else None
            grew = after is None or (isinstance(before, int | float) and after > before + _WORSE_DELAY_MS)
            (self._worse_sites if grew else self._better_sites).add(pair[1])
        self._wake.set()

    def _on_route(self, key: str, _old: Any, new: Any) -> None:
        """A ServiceRoute written or deleted: when by someone else (a revision after the one this
        controller wrote, or a deletion of one it published), the next pass puts it back."""
        ours = self.route_objects.get(key)
        if ours is None:
            return  # not one of ours (or one it deleted itself)
        if new is not None and (not isinstance(new, int) or new <= _revision_of(ours)):
            return  # its own write (or an older event)
        self._tampered[key] = new if isinstance(new, int) else None
        self._wake.set()

    def _dirty(self) -> bool:
        return self._all or bool(self._worse or self._better or self._worse_sites or self._better_sites
                                 or self._tampered)

    async def run(self) -> None:
        handlers = [(self.inf.registrations, self._on_structure), (self.inf.bindings, self._on_binding),
                    (self.inf.clusters, self._on_cluster), (self.inf.status, self._on_status),
                    (self.inf.network, self._on_network)]
        if self.inf.routes is not None:
            handlers.append((self.inf.routes, self._on_route))
        with subscribed(*handlers):
            try:
                await self.apply_files()
                await wait_synced(*self.inf.all())
                self._placed = {}
                async for key in yielding(list(self.inf.bindings.cache)):  # each as it is now: events go on
                    obj = self.inf.bindings.cache.get(key)
                    self._index_binding(obj, obj)
                await self._load_published()
                self._all = True  # a new term evaluates everything once, from the published routes
                self.ready.set()
                # A failed pass ends the term's run: the manager restarts it, and the new run
                # evaluates everything again from the published routes.
                await Periodic(LEASE, self.recompute, None, wait=self._wait_coalesced,
                               restart_on_failure=True).run()
            finally:
                self.ready.clear()

    async def apply_files(self) -> list[str]:
        """C4: create or update the registrations of ``registrationFiles`` (YAML, several documents
        each); a bad file or document is logged and skipped, never fatal. Returns what was applied."""
        applied: list[str] = []
        for path in self.settings.registrationFiles:
            try:
                text = await asyncio.to_thread(Path(path).read_text)
                docs = [d for d in yaml.safe_load_all(text) if d]
            except (OSError, yaml.YAMLError) as e:
                log.warning("steering: registration file %s: %s", path, e)
                continue
            for doc in docs:
                if not isinstance(doc, dict) or doc.get("kind") != SERVICE_REGISTRATION.kind:
                    log.warning("steering: %s: skipping a document that is not a ServiceRegistration", path)
                    continue
                meta = doc.get("metadata") or {}
                try:
                    try:
                        await self.registry.create(SERVICE_REGISTRATION, doc)
                    except (AlreadyExists, Conflict):
                        await self.registry.patch(SERVICE_REGISTRATION, str(meta.get("name")),
                                                  {"spec": doc.get("spec") or {}}, MERGE_PATCH,
                                                  str(meta.get("namespace") or "default"))
                    applied.append(f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
                except ApiError as e:
                    log.warning("steering: %s: registration %s: %s %s", path, meta.get("name"), e.message, e.details)
        return applied

    async def _wait_coalesced(self) -> None:
        await self._wait()
        if self.settings.coalesceSeconds:
            await asyncio.sleep(self.settings.coalesceSeconds)

    async def _wait(self) -> None:
        if self._dirty():
            return
        timeout = None
        if self.recheck:
            timeout = max(0.0, min(self.recheck.values()) - self.clock())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)
        self._wake.clear()

    async def _load_published(self) -> None:
        """Resume from the routes already published (a new leader does not jump every route)."""
        items, _ = await self.registry.list(SERVICE_ROUTE)
        self.route_objects.clear()
        self.rendered.clear()
        for obj in items:
            spec = obj.get("spec") or {}
            sid = obj["metadata"]["name"]
            self.route_objects[SERVICE_ROUTE.key(sid)] = obj
            self.published[sid] = spec
            routes = spec.get("routes") or []
            clients = tuple(str(r.get("clientSite")) for r in routes)
            instances = tuple(sorted({str(i.get("cluster")) for r in routes for i in r.get("instances") or []}))
            col = {c: j for j, c in enumerate(instances)}
            w = np.zeros((len(clients), len(instances)))
            t = np.full(len(clients), -np.inf)
            for r, route in enumerate(routes):
                for inst in route.get("instances") or []:
                    w[r, col[str(inst.get("cluster"))]] = float(inst.get("weight") or 0.0)
                ts = parse_rfc3339(route.get("changedAt"))
                if ts is not None:
                    t[r] = ts
            self.states[sid] = RouteState(clients, instances, w, t, int(spec.get("changes") or 0))
            self.uses[sid] = frozenset(instances)

    # ------------------------------------------------------------------ inputs
    def _services(self) -> tuple[dict[str, _Service], dict[str, dict[str, Any]]]:
        """Active services by ID, and the status each registration should show."""
        regs = sorted((o for o in self.inf.registrations.cache.values()
                       if o and not (o.get("metadata") or {}).get("deletionTimestamp")),
                      key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"].get("namespace", ""),
                                     o["metadata"]["name"]))
        services: dict[str, _Service] = {}
        statuses: dict[str, dict[str, Any]] = {}
        known = self._cluster_names()
        self._named = set()
        for obj in regs:
            meta = obj["metadata"]
            key = f"{meta.get('namespace', 'default')}/{meta['name']}"
            gen = meta.get("generation")
            try:
                spec = ServiceRegistrationSpec.model_validate(obj.get("spec") or {})
            except ValidationError as e:
                statuses[key] = {"phase": "Invalid", "message": str(e.errors()[0].get("msg")),
                                 "observedGeneration": gen}
                continue
            if spec.evaluation not in EVALUATIONS:
                statuses[key] = {"phase": "Invalid", "observedGeneration": gen,
                                 "message": f"unknown evaluation function {spec.evaluation!r}; known: "
                                            f"{', '.join(sorted(EVALUATIONS))}"}
                continue
            if (foreign := foreign_workload(obj)) is not None:  # stored before admission refused it
                statuses[key] = {"phase": "Invalid", "message": foreign, "observedGeneration": gen}
                continue
            if spec.serviceId in services:
                owner = services[spec.serviceId].key
                statuses[key] = {"phase": "Conflict", "observedGeneration": gen,
                                 "message": f"serviceId {spec.serviceId} is registered by {owner}"}
                continue
            named = workload_key(obj)
            self._named.add(named)
            binding, instances = self._placed.get(named, (None, []))
            instances = [c for c in instances if c in known]
            plan = compile_plan(spec, instances)
            services[spec.serviceId] = _Service(key, obj, spec, plan, binding, _signature(spec))
            statuses[key] = {"phase": "Active", "observedGeneration": gen, "binding": binding,
                             "instances": list(plan.instances),
                             "message": "" if instances else "the workload has no instances yet"}
        return services, statuses

    def _cluster_names(self) -> set[str]:
        return {str(o["metadata"]["name"]) for o in self.inf.clusters.cache.values() if o}

    def _fleet(self, clients: set[str], rebuild: bool, status_changed: set[str]) -> Fleet:
        """The status arrays: rebuilt after a structural or network change; after cluster status
        changes alone, the cached arrays with those clusters' utilisation replaced."""
        cached = self._fleet_cache
        if not rebuild and cached is not None and set(cached.clients) == clients:
            index = {c: j for j, c in enumerate(cached.clusters)}
            util = cached.utilisation.copy()
            for c in status_changed:
                j = index.get(c)
                if j is not None:
                    util[j] = utilisation(self.inf.status.cache.get(f"{STATUS_PREFIX}{c}"))
            fleet = dataclasses.replace(cached, utilisation=util)
        else:
            fleet = self._build_fleet(clients)
        worsened = np.array([self.worsened_at.get(c, -np.inf) for c in fleet.clusters])
        self._fleet_cache = dataclasses.replace(fleet, worsened_at=worsened)
        return self._fleet_cache

    def _build_fleet(self, clients: set[str]) -> Fleet:
        clusters = {str(o["metadata"]["name"]): o for o in self.inf.clusters.cache.values() if o}
        statuses = {k[len(STATUS_PREFIX):]: v for k, v in self.inf.status.cache.items()}
        network: dict[tuple[str, str], dict[str, Any]] = {}
        for key, doc in self.inf.network.cache.items():
            pair = pair_of(key)
            if pair is not None and doc:
                network[pair] = doc
        return build_fleet(clusters, statuses, network, clients)

    # ------------------------------------------------------------------ the work
    async def recompute(self) -> int:
        """Evaluate what changed, publish what moved; returns how many ServiceRoutes were written."""
        with collections_deferred():
            return await self._recompute()

    async def _recompute(self) -> int:
        everything, worse, better = self._all, self._worse, self._better
        worse_sites, better_sites = self._worse_sites, self._better_sites
        tampered, self._tampered = self._tampered, {}
        self._all, self._worse, self._better, self._worse_sites, self._better_sites = False, set(), set(), set(), set()
        now = self.clock()
        wall = time.perf_counter()
        revision = max(inf.revision for inf in self.inf.all())
        self.recomputations += 1
        if everything or self._services_cache is None:
            self._services_cache = self._services()
            self._clients = {c for s in self._services_cache[0].values() for c in s.plan.clients}
        services, statuses = self._services_cache
        city_of = {str(o["metadata"]["name"]): (o.get("spec") or {}).get("city")
                   for o in self.inf.clusters.cache.values() if o}
        worse |= {c for c, city in city_of.items() if c in worse_sites or (city and city in worse_sites)}
        better |= {c for c, city in city_of.items() if c in better_sites or (city and city in better_sites)}
        for c in worse:
            self.worsened_at[c] = now
        fleet = self._fleet(self._clients, everything or bool(worse_sites or better_sites), worse | better)
        if not everything:
            # A cluster that got worse matters now only to the services using it; the others' hold-down
            # counts from `worsened_at`. One that got better is evaluated now by the services using it
            # or short of an instance, and by the others once it could be chosen (after the hold-down).
            changed = worse | better
            due = {sid for sid, at in self.recheck.items() if at <= now + 1e-3}
            chosen = [one for sid, one in services.items()
                      if sid in due or sid not in self.states or not changed.isdisjoint(self.uses.get(sid, ()))
                      or (sid in self.short and not better.isdisjoint(one.plan.instances))]
            picked = {one.plan.service_id for one in chosen}
            later = now + self.damping.minIntervalSeconds
            for sid, one in services.items():
                if sid not in picked and not better.isdisjoint(one.plan.instances):
                    self.recheck[sid] = min(self.recheck.get(sid, later), later)
        else:
            chosen = list(services.values())
        evaluated = {one.plan.service_id for one in chosen}
        for sid in [sid for sid in self.recheck if (sid in evaluated and self.recheck[sid] <= now + 1e-3)
                    or sid not in services]:
            self.recheck.pop(sid, None)
        updated = rfc3339_ms(now)
        stamps: dict[float, str | None] = {}  # a recomputation's changes share a few instants

        def stamp(t: float) -> str | None:
            text = stamps.get(t, "")
            if text == "":
                text = stamps[t] = rfc3339_ms(t) if np.isfinite(t) else None
            return text

        shortfalls: list[tuple[_Service, ServiceEval, list[int]]] = []
        publishing: list[asyncio.Task[int]] = []
        evaluated_now: dict[str, Evaluated] = {}  # service ID → its pairs as evaluated (a route decision's facts)
        try:
            # The smallest chunk last: its routes are the last transaction, the one waited for.
            chunks = sorted(evaluate_chunks(fleet, [s.plan for s in chosen], self.damping.hysteresis),
                            key=lambda c: -len(c.positions))
            for chunk in chunks:
                objects = self._route_chunk(chunk, [chosen[n] for n in chunk.positions], now, updated, stamp,
                                            shortfalls, evaluated_now)
                if objects:
                    # One transaction per chunk, committed by the store's writer while the next chunks
                    # are evaluated.
                    publishing.append(asyncio.create_task(self._publish(objects, now, evaluated_now)))
                    await asyncio.sleep(0)  # let it hand its transaction to the store
            written = sum(await asyncio.gather(*publishing))
        except BaseException:
            for task in publishing:
                task.cancel()
            raise
        await self._forget(services)
        if tampered:
            written += await self._restore(tampered, services)
        await self._write_statuses(self._with_unrouted(statuses, services))
        if shortfalls and self.placement is not None:
            await self._offer(fleet, shortfalls, now)
        if self.observer is not None:
            self.observer(Recomputation(now, time.perf_counter() - wall, len(chosen), written, revision))
        return written

    def _route_chunk(self, chunk: Chunk, svcs: list[_Service], now: float, updated: str,
                     stamp: Callable[[float], str | None],
                     shortfalls: list[tuple[_Service, ServiceEval, list[int]]],
                     evaluated_now: dict[str, Evaluated]) -> list[dict[str, Any]]:
        """Step one chunk's services, keep their new states, and return the ServiceRoutes worth
        publishing (with, in ``evaluated_now``, what their decision records read); client sites no
        instance serves within the SLA go to ``shortfalls`` (CCC), those no instance serves at all to
        ``unrouted`` (the registration's status says why)."""
        states: list[RouteState | None] = []
        for svc in svcs:
            sid, sig = svc.plan.service_id, svc.signature
            states.append(self.states.get(sid) if self.signatures.get(sid, sig) == sig else None)
            self.signatures[sid] = sig
        stepped = step_chunk(chunk, states, now, self.damping)
        served = _Served.of(chunk, stepped)
        routed = np.zeros(chunk.metric.shape[:2], dtype=bool)
        routed[stepped.used[0], stepped.used[1]] = True
        picks: list[int] = []
        previous: list[Rendered | None] = []
        for s, (svc, res) in enumerate(zip(svcs, stepped.results, strict=True)):
            sid = svc.plan.service_id
            self.states[sid] = res.state
            if res.recheck_at is not None:
                self.recheck[sid] = min(self.recheck.get(sid, res.recheck_at), res.recheck_at)
            nc, ni = len(svc.plan.clients), len(svc.plan.instances)
            in_use = np.flatnonzero(served.in_use[s, :ni]).tolist()
            self.uses[sid] = frozenset([svc.plan.instances[j] for j in in_use])
            pub_key = (self.signatures[sid], svc.plan.clients, svc.plan.instances, svc.key)
            metrics = served.metric[s, :nc]
            eligible = served.eligible(s, ni)
            old_eligible = self.pub_eligible.get(sid)
            moved = bool(res.changed.any()) or old_eligible is None or not np.array_equal(old_eligible, eligible)
            if self._worth_publishing(sid, pub_key, moved, metrics, now):
                picks.append(s)
                previous.append(self.rendered.get(sid) if self.pub_keys.get(sid) == pub_key else None)
                self.pub_keys[sid] = pub_key
                self.pub_metrics[sid] = metrics.copy()
                self.pub_eligible[sid] = eligible
            short = [int(r) for r in np.flatnonzero(served.short[s, :nc])] if svc.plan.instances or nc else []
            if short:
                self.short.add(sid)
            else:
                self.short.discard(sid)
            if short and svc.spec.placementFeedback and svc.binding and not self._follows_users(svc):
                shortfalls.append((svc, chunk.service(s), short))
            none = np.flatnonzero(~routed[s, :nc]) if ni else np.zeros(0, dtype=np.int64)
            if len(none):
                self.unrouted[sid] = self._why_unrouted(chunk.service(s), none.tolist())
            else:
                self.unrouted.pop(sid, None)
        rendered = render_chunk(chunk, stepped, picks, self._instants(stepped, picks, svcs, stamp), previous)
        objects: list[dict[str, Any]] = []
        for s, done in zip(picks, rendered, strict=True):
            svc = svcs[s]
            self.rendered[svc.plan.service_id] = done
            spec = {"serviceId": svc.plan.service_id,
                    "registration": {"apiVersion": SERVICE_REGISTRATION.api_version,
                                     "kind": SERVICE_REGISTRATION.kind, "name": svc.obj["metadata"]["name"],
                                     "namespace": svc.obj["metadata"].get("namespace", "default")},
                    "strategy": svc.spec.strategy, "evaluation": svc.spec.evaluation,
                    "output": svc.spec.output, "routes": done.routes, "updated": updated,
                    "changes": stepped.results[s].state.changes}
            objects.append({"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind,
                            "metadata": {"name": svc.plan.service_id}, "spec": spec})
            evaluated_now[svc.plan.service_id] = Evaluated(_PairFacts(chunk, s),
                                                           self.unrouted.get(svc.plan.service_id, {}))
        return objects

    def _why_unrouted(self, ev: ServiceEval, rows: list[int]) -> dict[str, str]:
        """Why each of these client sites has no instance at all (not even a best-effort one)."""
        out: dict[str, str] = {}
        plan = ev.plan
        for r in rows:
            site = plan.clients[r]
            unmeasured, away, saturated = [], [], []
            for j, cluster in enumerate(plan.instances):
                obj = self.inf.clusters.cache.get(CLUSTER.key(cluster))
                if isinstance(obj, dict) and (is_false(obj) or (obj.get("metadata") or {}).get("deletionTimestamp")):
                    away.append(cluster)
                elif not np.isfinite(ev.network[r, j]):
                    unmeasured.append(cluster)
                elif not np.isfinite(ev.processing[r, j]):
                    saturated.append(cluster)
            if len(unmeasured) == len(plan.instances):
                out[site] = f"no measurement from client site {site} to any instance ({', '.join(unmeasured)})"
                continue
            parts = ([f"no measurement to {', '.join(unmeasured)}"] if unmeasured else []) + \
                ([f"{', '.join(away)} NotReady or leaving"] if away else []) + \
                ([f"{', '.join(saturated)} saturated"] if saturated else [])
            out[site] = f"no instance reachable from client site {site}: {'; '.join(parts) or 'none'}"
        return out

    def _with_unrouted(self, statuses: dict[str, dict[str, Any]],
                       services: Mapping[str, _Service]) -> dict[str, dict[str, Any]]:
        """The registrations' statuses, each saying why any client site of its has no route."""
        if not self.unrouted:
            return statuses
        out = dict(statuses)
        for sid, sites in self.unrouted.items():
            svc = services.get(sid)
            status = out.get(svc.key) if svc is not None else None
            if svc is None or status is None or not sites:
                continue
            message = "; ".join(sites[site] for site in sorted(sites))
            out[svc.key] = {**status, "message": f"{status['message']}; {message}" if status.get("message")
                            else message}
        return out

    def _follows_users(self, svc: _Service) -> bool:
        """Does the service's Binding follow its learned users (then they, not offers, move it)?"""
        obj = self.inf.bindings.cache.get(BINDING.key(svc.binding)) if svc.binding else None
        return isinstance(obj, dict) and follows_learned_users(obj, svc.plan.service_id)

    @staticmethod
    def _instants(stepped: ChunkStep, picks: list[int], svcs: list[_Service],
                  stamp: Callable[[float], str | None]) -> list[list[str | None]]:
        """Each picked service's per-site change instants as text, each distinct instant formatted once."""
        if not picks:
            return []
        distinct, index = np.unique(stepped.changed_at[picks], return_inverse=True)
        texts = [stamp(t) for t in distinct.tolist()]
        return [[texts[i] for i in row[:len(svcs[s].plan.clients)]]
                for s, row in zip(picks, index.reshape(len(picks), -1).tolist(), strict=True)]

    def _worth_publishing(self, sid: str, pub_key: tuple[Any, ...], changed: bool, metrics: F, now: float) -> bool:
        """A route (or what its flows may stay on) changed, the service is new or re-registered, or —
        at most once per minimum interval — a served metric moved by more than the change threshold."""
        if changed or sid not in self.published or self.pub_keys.get(sid) != pub_key:
            return True
        if now - self.published_at.get(sid, -np.inf) < self.damping.minIntervalSeconds:
            return False
        old = self.pub_metrics.get(sid)
        if old is None or old.shape != metrics.shape:
            return True
        with np.errstate(invalid="ignore"):
            drift = np.abs(metrics - old) > self.damping.changeThreshold * np.maximum(np.abs(old), 1e-9)
        return bool(drift.any())

    async def _publish(self, objects: list[dict[str, Any]], now: float,
                       evaluated_now: Mapping[str, Evaluated] | None = None) -> int:
        """Write the ServiceRoutes, in one transaction where the store allows. The objects this
        controller wrote last are not read back (a compare-and-swap on their revision guards the
        write); after a conflict they are."""
        done = await read_modify_write(lambda attempt: self.registry.batch_upsert(
            [(SERVICE_ROUTE, o) for o in objects], trusted=True, current=self.route_objects if attempt == 0 else None))
        decisions = []
        for obj, _ in done:
            sid = obj["metadata"]["name"]
            facts = (evaluated_now or {}).get(sid)
            if (decision := route_decision(self.published.get(sid), obj["spec"], self._measured_delay,
                                           facts)) is not None:
                decisions.append((now, decision))
            self.route_objects[SERVICE_ROUTE.key(sid)] = obj
            self.published[sid] = obj["spec"]
            self.published_at[sid] = now
        if decisions:
            try:
                await record_decisions(self.decisions, decisions)
            except Exception:  # a lost explanation must not stop routing
                log.warning("route decisions not recorded", exc_info=True)
        return len(done)

    def _measured_delay(self, site: str, cluster: str) -> float | None:
        """The delay from a client site to a cluster as network status has it (X1: a route decision's input)."""
        doc = self.inf.network.cache.get(network_key(site, cluster))
        delay = doc.get("delayMs") if isinstance(doc, dict) else None
        return float(delay) if isinstance(delay, int | float) else None

    async def _forget(self, services: Mapping[str, _Service]) -> None:
        """Routes of services no longer registered are deleted."""
        for sid in [s for s in self.published if s not in services]:
            self.route_objects.pop(SERVICE_ROUTE.key(sid), None)  # first: its deletion is not someone else's
            with contextlib.suppress(ApiError):
                await self.registry.delete(SERVICE_ROUTE, sid)
            self.short.discard(sid)
            for d in (self.published, self.published_at, self.states, self.signatures, self.recheck, self.pub_keys,
                      self.pub_metrics, self.pub_eligible, self.uses, self.rendered, self.unrouted):
                d.pop(sid, None)  # type: ignore[attr-defined]

    async def _restore(self, tampered: Mapping[str, int | None], services: Mapping[str, _Service]) -> int:
        """Put back, as last published, the ServiceRoutes a watch saw someone else change or delete
        (compared with the store first: a watch event can overtake this controller's own bookkeeping
        of a write). Returns how many it wrote."""
        written = 0
        for key, seen in tampered.items():
            ours = self.route_objects.get(key)
            sid = str((ours or {}).get("metadata", {}).get("name") or "")
            spec = self.published.get(sid)
            if ours is None or spec is None or sid not in services:
                continue
            if seen is not None and seen <= _revision_of(ours):
                continue  # its own write, seen before it noted it
            try:
                current = await self.registry.try_get(SERVICE_ROUTE, sid)
                if current is not None and current.get("spec") == spec:
                    self.route_objects[key] = current
                    continue
                done = await self.registry.batch_upsert(
                    [(SERVICE_ROUTE, {"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind,
                                      "metadata": {"name": sid}, "spec": spec})], trusted=True)
            except Conflict:  # written again meanwhile: its watch event comes, and this pass's successor tries again
                self._tampered.setdefault(key, None)
                self._wake.set()
                continue
            except ApiError as e:
                log.warning("steering: ServiceRoute %s could not be put back: %s", sid, e.message)
                continue
            self.route_objects[key] = done[0][0]
            written += 1
            self.restored += 1
            what = "deleted" if current is None else f"changed (resourceVersion {_revision_of(current)})"
            message = (f"ServiceRoute {sid} was {what} by someone other than the steering controller; put back "
                       f"as the controller last published it (ServiceRoutes are written only by the controller)")
            log.warning("steering: %s", message)
            self.events.tell({"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind, "name": sid},
                             "Warning", "RouteRestored", message)
        return written

    async def _write_statuses(self, statuses: Mapping[str, dict[str, Any]]) -> None:
        for key, status in statuses.items():
            if self.reg_status.get(key) == status:
                continue
            ns, _, name = key.partition("/")
            obj = self.inf.registrations.cache.get(SERVICE_REGISTRATION.key(name, ns)) or {}
            if {k: v for k, v in (obj.get("status") or {}).items() if k in status} == status:
                self.reg_status[key] = status
                continue
            with contextlib.suppress(NotFound, Conflict, AlreadyExists):
                await self.registry.update_status(SERVICE_REGISTRATION, name, status, ns)
                self.reg_status[key] = status

    async def _offer(self, fleet: Fleet, shortfalls: list[tuple[_Service, ServiceEval, list[int]]],
                     now: float) -> None:
        """CCC: for client sites no instance serves within the SLA, offer the nearest cluster that would."""
        assert self.placement is not None
        everywhere = [dataclasses.replace(svc.plan, instances=fleet.clusters) for svc, _, _ in shortfalls]
        for (svc, _ev, rows), ev_all in zip(shortfalls, evaluate(fleet, everywhere, self.damping.hysteresis),
                                            strict=True):
            sid = svc.plan.service_id
            for r in rows:
                client = svc.plan.clients[r]
                if now - self.offered.get((sid, client), -np.inf) < self.settings.offerCooldownSeconds:
                    continue
                ok = ev_all.valid_enter[r] & ~np.isin(np.array(fleet.clusters), np.array(svc.plan.instances))
                if not ok.any():
                    continue
                j = int(np.argmin(np.where(ok, ev_all.metric[r], np.inf)))
                cluster = fleet.clusters[j]
                self.offered[(sid, client)] = now
                reason = (f"service {sid}: no instance meets the SLA for client site {client}; {cluster} would "
                          f"({ev_all.delay[r, j]:.1f} ms)")
                try:
                    result = await self.placement(RescheduleRequest("offer", cluster, reason, 0.0, 1.0,
                                                                    {"binding": svc.binding, "serviceId": sid}))
                    log.info("steering: %s", result.message)
                except Exception:  # noqa: BLE001 - placement feedback must not stop routing
                    log.exception("steering: offering %s to %s failed", cluster, svc.binding)



def _revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class _PairFacts:
    """A published service's (client site, cluster) pairs as its chunk evaluated them, read only for
    the sites whose route changed (`drods.steering.route_decisions.PairFacts`)."""

    __slots__ = ("_chunk", "_ev", "_s")

    def __init__(self, chunk: Chunk, s: int) -> None:
        self._chunk, self._s = chunk, s
        self._ev: ServiceEval | None = None

    def __call__(self, site: str, cluster: str) -> dict[str, Any] | None:
        plan = self._chunk.plans[self._s]
        if site not in plan.clients:
            return None
        if cluster not in plan.instances:
            return {"feasible": False, "metric": None,
                    "reason": f"{cluster} is no longer an instance of the workload (not placed there, or not ready)"}
        if self._ev is None:
            self._ev = self._chunk.service(self._s)
        ev, r, j = self._ev, plan.clients.index(site), plan.instances.index(cluster)

        def num(a: F) -> float | None:
            v = float(a[r, j])
            return round(v, 3) if np.isfinite(v) else None

        feasible = bool(ev.valid[r, j])
        out: dict[str, Any] = {"feasible": feasible, "metric": num(ev.metric) if feasible else "MAX",
                               "key": num(ev.key), "delayMs": num(ev.delay), "networkMs": num(ev.network),
                               "processingMs": num(ev.processing)}
        if not feasible:
            out["broken"] = broken_text(ev, r, j)
        return out
