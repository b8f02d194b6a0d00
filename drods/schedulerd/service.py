"""The running scheduler (A2, S1–S11): store watches → snapshot + queue → decisions → Binding status.

One `SchedulerService` per process. Its informers run always, so a standby's snapshot and queue are warm; the
decision loop and the resource detector run only while this process holds the ``/leases/scheduler`` lease (A6), and
every status write is fenced on that lease: the write is a store transaction that also compares the lease key's
revision with the one this process won it at (`drods.machinery.fence`), so two schedulers never both bind, even for
the instant after a lease is lost or when a restarted replica reuses this one's identity. The resource detector is a
controller of its own (`drods.controllers.detector`).

A cycle: pop the highest-priority binding (FIFO among equals), schedule it against the snapshot, assume the replicas
it added (S7), and write Binding.status with one CAS write. Decisions are made in bursts of up to ``batch_seconds``
and group-committed (`drods.schedulerd.commits`): what is decided while a write is in flight goes in the next one,
up to ``batch_size`` bindings, in store transactions of up to ``max_txn_ops`` operations, falling back to one CAS
per binding when a transaction's guard fails; deciding goes on while decisions are written. Every decision is
explained in ``/history/schedules/`` (`drods.schedulerd.history`); unschedulable and partial ones are also appended
to the shared failure log ``/history/failures/``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from drods.machinery.event_log import EventLog
from drods.machinery.fence import Fence
from drods.machinery.leader import LeaderElector
from drods.machinery.manager import Manager, default_identity
from drods.machinery.periodic import Periodic
from drods.machinery.shared import SharedInformers
from drods.machinery.tasks import stop_tasks
from drods.model.annotations import RESCHEDULE_REASON
from drods.model.binding import BindingSpec, TargetCluster
from drods.model.events import involved_of
from drods.model.keys import FAILURES_PREFIX, NETWORK_PREFIX, STATUS_PREFIX, SURGE_KEY, TRAFFIC_KEY, lease_key
from drods.model.kinds import BINDING, CLUSTER, DATASET, FEDERATED_RESOURCE_QUOTA
from drods.model.migration import pinned_by
from drods.model.timefmt import whole_ms
from drods.monitor.history import append as append_failure
from drods.scheduler.framework import Scheduler, ScheduleResult
from drods.scheduler.plugins.readiness import not_ready_tainted
from drods.scheduler.profile import Profile
from drods.scheduler.task import Task, users_of
from drods.schedulerd.cache import CacheEvents, SchedulerCache, decode_cluster, measured_use, status_decoder
from drods.schedulerd.commits import GroupCommit
from drods.schedulerd.decision_task import decision_task
from drods.schedulerd.failback import fails_back, within_budget
from drods.schedulerd.fleet import FleetChange
from drods.schedulerd.history import decision_record, measured_usage, schedule_history
from drods.schedulerd.metrics import SchedulerMetrics
from drods.schedulerd.queue import QueueEntry, SchedulingQueue
from drods.schedulerd.quota import NamespaceQuotas, decode_quota, held, within_quota
from drods.schedulerd.readers import DatasetReaders
from drods.schedulerd.records import (
    DATA_MOVED,
    FIRST,
    FLEET,
    FOLLOW,
    MAX_STATUS_REASONS,
    RECONCILE,
    RESCHEDULE,
    SCALE,
    STATUS_REASONS_PER_VERDICT,
    BindingRecord,
    Decision,
    decode_binding,
    encode_object,
    kept_copies,
    merge_status,
    schedule_type,
    shown_of,
    with_status,
)
from drods.schedulerd.refit import FleetFollower
from drods.schedulerd.shaving import shaved, shaving
from drods.schedulerd.spec_cache import SpecCache
from drods.schedulerd.users import decision_users, judge_move, learned, users_moved
from drods.schedulerd.view import decode_json
from drods.schedulerd.writer import DecisionWriter, Plan
from drods.store import KeyValue, Store

log = logging.getLogger(__name__)

LEASE_NAME = "scheduler"
CACHE_RUNNABLE = "scheduler-cache"  # the every-replica part: informers, queue, sweeps
FLEET_SWEEP_RATE = 20_000.0  # bindings a second: after a fleet-change pass that queued N, the next waits N / this
RETRY = "Retry"


@dataclass
class SchedulerSettings:
    """Tunables: the ``scheduler`` section of the configuration file (`drods.config.SchedulerConfig`,
    whose defaults are these), plus the process's identity and lease TTL (command-line flags)."""

    identity: str = field(default_factory=default_identity)
    lease_ttl: int = 10
    batch_size: int = 256
    batch_seconds: float = 0.02
    max_inflight: int = 4
    assume_ttl: float = 60.0
    status_max_age: float = 180.0
    sweep_seconds: float = 1.0
    history_retention_s: float = 3600.0
    initial_backoff: float = 1.0
    max_backoff: float = 10.0  # kube-scheduler's podMaxBackoffSeconds
    max_unschedulable: float = 300.0
    rng_seed: int | None = None
    # S11: placements follow the fleet (``drods.schedulerd.fleet``)
    fleet_rebalance: bool = True  # divided bindings move replicas to clusters that join or become Ready
    fleet_min_move_fraction: float = 0.1  # ... when at least this share of their replicas would move
    fleet_max_moves_per_minute: int = 600  # replicas such moves may shift per minute, fleet-wide
    first_status_grace: float = 10.0  # a new leader waits this long at most for every cluster's first status
    users_min_gain_ms: float = 5.0  # replicas follow learned users only when their latency drops this much


class SchedulerService:
    def __init__(self, store: Store, *, profile: Profile | None = None, settings: SchedulerSettings | None = None,
                 clock: Callable[[], float] = time.time, informers: SharedInformers | None = None) -> None:
        self.store = store
        # the process's shared informers; without them (tools, the bench) the service watches for itself
        shared = informers if informers is not None else SharedInformers(store)
        self._own_informers = None if informers is not None else shared
        self.settings = s = settings or SchedulerSettings()
        self.profile = profile or Profile.default()
        self.clock = clock
        self.scheduler = Scheduler(self.profile, rng_seed=s.rng_seed)
        self.cache = SchedulerCache(clock=clock, status_max_age=s.status_max_age, assume_ttl=s.assume_ttl)
        self.queue = SchedulingQueue(initial_backoff=s.initial_backoff, max_backoff=s.max_backoff,
                                     max_unschedulable=s.max_unschedulable)
        self.metrics = SchedulerMetrics(self.queue.counts)
        self.history = schedule_history(store, s.history_retention_s, clock)
        # the fence of the term this process leads the scheduler in (None: not leading)
        self._term: Fence | None = None
        self.writer = DecisionWriter(store, self.history, self.metrics, lambda: self._term, lease_key(LEASE_NAME),
                                     EventLog(store, "drods-scheduler", s.identity))
        self._elects_itself = True  # until `register` hands the election to a manager
        self.clusters = shared.informer(CLUSTER.key_prefix(), decode_cluster)
        self.statuses = shared.informer(STATUS_PREFIX, status_decoder(clock))
        self.surge = shared.informer(SURGE_KEY, decode_json)
        self.traffic = shared.informer(TRAFFIC_KEY, decode_json)
        self.datasets = shared.informer(DATASET.key_prefix(), decode_json)
        self.network = shared.informer(NETWORK_PREFIX, decode_json)
        self.bindings = shared.informer(BINDING.key_prefix(), self._decode_binding)
        self._binding_handler = False  # `_on_binding` subscribed (once clusters and statuses are listed)
        self.clusters.on_change(self._on_cluster)
        self.statuses.on_change(self._on_status)
        self.surge.on_change(lambda _k, _o, new: self.cache.on_surge(new))
        self.traffic.on_change(lambda _k, _o, new: self.cache.on_traffic(new))
        self.datasets.on_change(self._on_dataset)
        self.network.on_change(self._on_network)
        # FederatedResourceQuota: a decision that would take a namespace above its overall is refused
        self.quotas = NamespaceQuotas(lambda ns: ((r.name, held(r.placement, r.requirements))
                                                  for r in self.bindings.cache.values() if r.namespace == ns))
        self.quota_objects = shared.informer(FEDERATED_RESOURCE_QUOTA.key_prefix(), decode_quota)
        self.quota_objects.on_change(self._on_quota)
        self._filters = [p.name for p in self.profile.filters]
        self._scores = [p.name for p, _ in self.profile.scores]
        self._base_weights = {p.name: w for p, w in self.profile.scores}
        self._specs = SpecCache()  # validated specs of bindings awaiting a retry
        # status writes in flight: key → (bytes written, the record they decode to but its revision),
        # so the watch echo of this process's own write is recognised without parsing it again
        self._written: dict[str, tuple[bytes, BindingRecord]] = {}
        # binding → hash of the verdict last logged (a storm parks every binding: not its message)
        self._logged_failure: dict[str, int] = {}
        # Duplicated bindings whose last decision left a cluster out for room alone: parked as partial ones
        # are, so room freed there (a cluster event) retries them (this process's decisions only)
        self._held_back: set[str] = set()
        self._kick: asyncio.TimerHandle | None = None
        self._kick_reasons: set[str] = set()
        self._fleet_batch: list[FleetChange] = []
        self._fleet_flush: asyncio.TimerHandle | None = None
        self._fleet_swept = 0  # bindings the last fleet-change pass queued
        self._fleet_seen: dict[str, int] = {}  # bindings decided while a batch waits: how many changes they saw
        # F3: followed workload → its followers' binding names; followers to re-place from scratch
        self._followers: dict[str, set[str]] = {}
        self._moved_followers: set[str] = set()
        self.readers = DatasetReaders()  # F4: a Dataset's readers, decided again when its copies move
        self.fleet = FleetFollower(rebalance=s.fleet_rebalance, min_move_fraction=s.fleet_min_move_fraction,
                                   max_moves_per_minute=s.fleet_max_moves_per_minute, clock=clock)
        self._known: asyncio.Event | None = None  # set once no registered cluster is unknown
        self.ready = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle
    @property
    def is_leader(self) -> bool:
        return self._term is not None

    @property
    def lease_key(self) -> str:
        return lease_key(LEASE_NAME)

    def register(self, manager: Manager) -> None:
        """Run under ``manager``: the informers and the sweeper on every replica (a standby stays
        warm), the decision loop as its leader runnable on ``/leases/scheduler``."""
        self._elects_itself = False
        manager.add(CACHE_RUNNABLE, self)
        manager.add_leader(LEASE_NAME, lambda lead: _Leading(self, lead.fence))

    async def run(self) -> None:
        """Watch, and decide while leader (electing itself only when no manager does); runs until
        cancelled."""
        tasks = [] if self._own_informers is None else [
            asyncio.create_task(self._own_informers.run(), name="scheduler-informers")]
        try:
            # Clusters first: assumptions adopted from existing bindings need their rows.
            await asyncio.gather(self.clusters.wait_synced(), self.statuses.wait_synced())
            if not self._binding_handler:
                self._binding_handler = True
                self.bindings.on_change(self._on_binding)
                await self.bindings.replay(self._on_binding)  # listed already when the informer is shared
            await self.bindings.wait_synced()
            sweeper = Periodic("scheduler-sweep", self._sweep, self.settings.sweep_seconds)
            tasks.append(asyncio.create_task(sweeper.run(), name="scheduler-sweeper"))
            self.ready.set()
            if self._elects_itself:  # a tool or the bench, without a manager
                s = self.settings
                await LeaderElector(self.store, LEASE_NAME, s.identity, ttl=s.lease_ttl).run(self._lead)
            else:
                await asyncio.Event().wait()
        finally:
            await stop_tasks(tasks)

    async def _lead(self, fence: Fence) -> None:
        await self.ready.wait()  # a standby is warm already; a process just started warms up first
        log.info("scheduler %s is leading (generation %d)", self.settings.identity, fence.generation)
        self._term = fence
        self.metrics.leader.set(1)
        try:
            await self._await_known_fleet()
            self.metrics.incoming_event("LeaderElected", self.queue.on_cluster_event())
            await self._loop()
        finally:
            self._term = None
            self.metrics.leader.set(0)

    async def _await_known_fleet(self) -> None:
        """No decisions on a half-known fleet: after start or a leadership change, wait (at most
        ``first_status_grace``) until every registered cluster published a status or was judged."""
        grace = self.settings.first_status_grace
        if not self.cache.unknown or grace <= 0:
            return
        self._known = asyncio.Event()
        try:
            await asyncio.wait_for(self._known.wait(), grace)
        except TimeoutError:
            log.info("scheduler: deciding with %d clusters still unknown after %gs: %s", len(self.cache.unknown),
                     grace, ", ".join(sorted(self.cache.unknown)[:10]))
        finally:
            self._known = None

    async def _sweep(self) -> None:
        self._cache_events(self.cache.sweep())

    # ------------------------------------------------------------------ informer handlers
    def _on_cluster(self, key: str, old: Any, new: Any) -> None:
        name = key[len(CLUSTER.key_prefix()):]
        self._cache_events(self.cache.on_cluster(name, new))

    def _on_status(self, key: str, old: Any, new: Any) -> None:
        name = key[len(STATUS_PREFIX):]
        if "/" in name:
            return
        self._cache_events(self.cache.on_status(name, new))

    def _cache_events(self, ev: CacheEvents) -> None:
        if ev.retry:
            self._cluster_event(*ev.reasons)
        for change in ev.fleet:
            self._fleet_changed(change if self.ready.is_set() else self._as_listed(change))
        if self._known is not None and not self.cache.unknown:
            self._known.set()

    def _as_listed(self, change: FleetChange) -> FleetChange:
        """A change seen in the start-up listing happened when the cluster's object says it joined or
        became Ready (if it says nothing: long ago), not now — a restarted scheduler moves no binding
        decided since (S11)."""
        rec = self.cache.clusters.get(change.cluster)
        since = rec.candidate_since if rec is not None else None
        return replace(change, since=since if since is not None else 0.0)

    def _fleet_changed(self, change: FleetChange) -> None:
        """S11: queue the decided bindings whose placement the change can alter (``fleet``), for a batch of
        changes at a time: when 10,000 clusters come back, each made a pass over every binding (quadratic;
        the scheduler held the clusters' watch for minutes). After a pass that queued many bindings the
        next waits longer (``FLEET_SWEEP_RATE``), so passes stay a bounded share of the loop."""
        self._fleet_batch.append(change)
        if self._fleet_flush is None:
            delay = max(0.05, self._fleet_swept / FLEET_SWEEP_RATE)
            self._fleet_flush = asyncio.get_running_loop().call_later(delay, self._flush_fleet)

    def _flush_fleet(self) -> None:
        self._fleet_flush = None
        changes, self._fleet_batch = self._fleet_batch, []
        seen, self._fleet_seen = self._fleet_seen, {}
        cache = self.bindings.cache

        def decided(name: str) -> BindingRecord | None:
            if seen.get(name) == len(changes):
                return None  # decided (or being decided) after the last of them: it saw them all
            rec = cache.get(BINDING.key(name))
            if rec is not None and rec.scheduled_generation is None and rec.key not in self._written \
                    and self.queue.where(name) in ("active", "backoff"):
                return None  # its first decision, still to come, will see the cluster as it is
            return rec

        affected = self.fleet.affected(changes, decided)
        self._fleet_swept = len(affected)
        for rec in affected:
            self.queue.add(rec.name, FLEET, rec.priority)
        if affected:
            self.metrics.incoming_event(changes[0].kinds[0], len(affected))

    def _cluster_event(self, *reasons: str) -> None:
        """Retry parked bindings soon; a burst of cluster events costs one queue sweep."""
        self._kick_reasons.update(reasons)
        if self._kick is None:
            self._kick = asyncio.get_running_loop().call_later(0.05, self._kick_now)

    def _kick_now(self) -> None:
        self._kick = None
        moved = self.queue.on_cluster_event()
        for r in self._kick_reasons:
            self.metrics.incoming_event(r, moved)
        self._kick_reasons.clear()

    def _on_quota(self, key: str, old: Any, new: Any) -> None:
        if self.quotas.on_quota(key, old, new):
            self._cluster_event("FederatedResourceQuota")

    def _on_dataset(self, key: str, old: Any, new: Any) -> None:
        """F4: DataLocality reads the copies from the snapshot; placed readers of a Dataset whose copies
        moved are decided again (within the move budget)."""
        self.cache.on_dataset(old, new)
        for r in self.readers.changed(old, new):
            rec = self.bindings.cache.get(BINDING.key(r))
            if rec is not None and rec.placement and not rec.keeps_data:
                self.queue.add(r, DATA_MOVED, rec.priority)

    def _on_network(self, key: str, old: Any, new: Any) -> None:
        if self.cache.on_network(key, old, new):
            self._cluster_event("NetworkStatus")

    def _shown(self, rec: BindingRecord) -> tuple[tuple[str, int, float], ...]:
        """What the members showed of ``rec``'s copies, read only while its placement is assumed."""
        return shown_of(rec) if self.cache.assuming(rec.name) else ()

    def _primary(self, workload: str, cluster: str | None) -> None:
        """F3: where a stateful topology's primary runs; its followers go there (FollowUp)."""
        if cluster is None:
            self.cache.snap.workload_primaries.pop(workload, None)
        else:
            self.cache.snap.workload_primaries[workload] = cluster

    def _index_follower(self, name: str, old: str | None, new: str | None) -> None:
        if old == new:
            return
        if old is not None:
            s = self._followers.get(old)
            if s is not None:
                s.discard(name)
                if not s:
                    del self._followers[old]
        if new is not None:
            self._followers.setdefault(new, set()).add(name)

    def _decode_binding(self, kv: KeyValue) -> BindingRecord | None:
        mine = self._written.pop(kv.key, None)
        if mine is not None and mine[0] == kv.value:
            return replace(mine[1], mod_revision=kv.mod_revision)
        return decode_binding(kv.key, kv.value, kv.mod_revision)

    def _on_binding(self, key: str, old: BindingRecord | None, new: BindingRecord | None) -> None:
        if new is None or new.deleting:
            gone = new or old
            if gone is None:
                return
            self.cache.snap.drop_class_placement(gone.name)
            self._index_follower(gone.name, gone.follow, None)
            self.readers.index(gone.name, gone.reads, ())
            self.cache.snap.workload_placements.pop(gone.workload, None)
            self.cache.snap.workload_primaries.pop(gone.workload, None)
            self.cache.snap.workload_groups.set(gone.workload, ())
            if self.quotas.hold(gone.namespace, gone.name, held((), gone.requirements)):
                self._cluster_event("QuotaFreed")
            self.queue.delete(gone.name)
            self.fleet.forget(gone.name)
            self._specs.forget(gone.name)
            self._logged_failure.pop(gone.name, None)
            self._held_back.discard(gone.name)
            if self.cache.release(gone.name):
                self._cluster_event("BindingDeleted")
            return
        self.cache.snap.workload_placements[new.workload] = new.placement
        self.cache.snap.workload_groups.set(new.workload, new.groups)
        if self.quotas.hold(new.namespace, new.name, held(new.placement, new.requirements)):
            self._cluster_event("QuotaFreed")
        self.fleet.index(new)
        self._primary(new.workload, new.primary)
        self._index_follower(new.name, old.follow if old is not None else None, new.follow)
        self.readers.index(new.name, old.reads if old is not None else (), new.reads)
        if old is not None and old.placement != new.placement:
            for f in self._followers.get(new.workload, ()):
                frec = self.bindings.cache.get(BINDING.key(f))
                if frec is not None and frec.placement:  # placed followers move with it
                    self._moved_followers.add(f)
                    self.queue.add(f, FOLLOW, frec.priority)
        if new.workload_class or (old is not None and old.workload_class):
            self.cache.snap.set_class_placement(new.name, new.workload_class, new.placement, new.requirements[0])
        stype = schedule_type(new, old)
        if stype is not None:
            if self.cache.snap.place_offers(new.name, new.placement, new.demand):  # held until decided anew
                self._cluster_event("GpuStorageFreed")
            self.queue.add(new.name, stype, new.priority)
            self.metrics.incoming_event("BindingAdd" if old is None else "BindingUpdate")
            return
        if self.cache.observe(new.name, new.placement, new.scheduled_time, new.requirements, new.demand,
                              unschedulable=new.phase == "Unschedulable", shown=self._shown(new)):
            self._cluster_event("GpuStorageFreed")
        where = self.queue.where(new.name)
        if new.phase == "Unschedulable" or new.partial or new.name in self._held_back:
            if where is None:  # parked until a cluster event (or until this process leads)
                self.queue.add(new.name, RETRY, new.priority)
                self.queue.unschedulable(new.name)
        elif where in ("active", "backoff", "unschedulable"):
            self.queue.delete(new.name)  # another scheduler decided it
        if self.fleet.waiting(new.name) and self.queue.where(new.name) is None:  # was waiting for this echo
            self.queue.add(new.name, FLEET, new.priority)

    # ------------------------------------------------------------------ the decision loop
    async def _loop(self) -> None:
        s = self.settings
        commits = GroupCommit(self._commit, batch_size=s.batch_size, max_inflight=s.max_inflight)
        perf = time.perf_counter
        try:
            while True:
                entry: QueueEntry | None = await self.queue.get()
                until = perf() + s.batch_seconds
                while entry is not None:
                    plan = self._attempt_safely(entry)
                    if plan is not None:
                        await commits.put(plan)
                    if perf() >= until:
                        break
                    entry = self.queue.pop_nowait()
                commits.flush()
                await asyncio.sleep(0)  # let watches and API requests run between bursts
        finally:
            # Leadership lost (or shutting down): unwritten decisions are abandoned, their bindings
            # go back to the queue for whoever decides next, and their assumptions are undone.
            for p in await commits.abandon():
                self._undo(p)
                self.queue.retry(p.entry.key)

    def _attempt_safely(self, entry: QueueEntry) -> Plan | None:
        try:
            return self._attempt(entry)
        except Exception:
            log.exception("scheduling %s failed", entry.key)
            self.metrics.attempt("error", str(entry.item or RETRY), None)
            self.queue.retry(entry.key)
            return None

    def _decision_type(self, entry: QueueEntry, rec: BindingRecord) -> str | None:
        """Why ``rec`` is decided now (its ``scheduleType``), or None: nothing to decide."""
        name = rec.name
        stype = schedule_type(rec)
        if stype is None and name in self._moved_followers:
            stype = FOLLOW
        self._moved_followers.discard(name)
        if stype is None and self.readers.due(name) and not rec.keeps_data and rec.placement:
            stype = DATA_MOVED
        if stype is None:
            if rec.phase == "Unschedulable" or rec.partial or name in self._held_back:
                self.fleet.drop(name)  # a retry places what is missing wherever it fits now
                return RETRY
            if not self.fleet.waiting(name) or rec.key in self._written:
                return None  # a fleet change waits for the echo of this process's last write (its placement)
            return FLEET
        if stype == RECONCILE and entry.item == SCALE:
            return SCALE
        return stype

    def _attempt(self, entry: QueueEntry) -> Plan | None:
        name = entry.key
        rec: BindingRecord | None = self.bindings.cache.get(BINDING.key(name))
        if rec is None or rec.deleting:
            self.queue.delete(name)
            return None
        stype = self._decision_type(entry, rec)
        if stype is None:
            self.queue.done(name)
            return None
        if self._fleet_batch and stype in (FIRST, RETRY):
            # places from scratch over the fleet as it is: sees the batched changes so far (`_flush_fleet`);
            # a refit follows only the changes it was queued for, and other types keep what runs
            self._fleet_seen[name] = len(self._fleet_batch)
        obj = rec.object()
        if rec.pin is not None:
            if stype == FLEET:  # a MigrationPlan holds the placement
                self.fleet.drop(name)
                self.queue.done(name)
                return None
            return self._pinned(entry, rec, obj, stype)
        try:
            spec = self._specs.spec(rec.name, rec.generation, obj)
        except ValidationError as e:
            return self._invalid(entry, rec, obj, stype, e)
        trigger = None
        if stype == FLEET:
            refit = self._refit(rec, spec)
            if refit is None:
                return None
            result, trigger = refit
        else:
            task, restated = decision_task(spec, rec, obj, stype)
            slo_ms = spec.placement.latencySLOMs if spec.placement.latencySLOMs is not None else task.latency_slo_ms
            with self.cache.lifted(kept_copies(obj, rec.placement), rec.requirements):
                decided: ScheduleResult | None = shaved(
                    obj, rec, self.cache.snap, self.fleet.moves, self.queue, users_of(spec.placement, task.users),
                    slo_ms) if stype == RESCHEDULE and shaving(obj) else self._schedule(task)
                if stype == RESCHEDULE and decided is not None and (users_moved(obj) or fails_back(obj)):
                    decided = self._follow_users(task, rec, decided) if users_moved(obj) else \
                        within_budget(self.fleet.moves, self.queue, name, rec.placement, decided)
                elif (restated or stype == DATA_MOVED) and decided is not None:
                    decided = within_budget(self.fleet.moves, self.queue, name, rec.placement, decided)
            if decided is None:
                return None  # out of move budget: queued again
            result = decided
        # a refit that placed nothing took a removed cluster's part off (`FleetFollower.refit`): that is written
        taken_off = stype == FLEET and result.phase != "Scheduled"
        result = within_quota(self.quotas, rec.namespace, name, rec.requirements, result)
        ts = whole_ms(self.clock())
        ok = result.phase == "Scheduled"
        (self._held_back.add if result.held_back else self._held_back.discard)(name)
        if ok:
            self.quotas.hold(rec.namespace, name, held(result.pairs, rec.requirements))
            if self.cache.assume_decision(name, rec.placement, result.pairs, rec.requirements, ts, rec.demand):
                self._cluster_event("GpuStorageFreed")  # a scale-down or move gave GPUs / tier storage back
            self.cache.snap.workload_placements[rec.workload] = result.pairs
            self._primary(rec.workload, next((c for c, r in result.roles.items() if r == "Primary"), None))
            if rec.workload_class:  # the next decision sees this class here before the watch says so
                self.cache.snap.set_class_placement(name, rec.workload_class, list(result.pairs),
                                                    rec.requirements[0])
        placement = result.pairs if ok or taken_off else rec.placement  # else an unplaced decision keeps what runs
        status = obj.get("status") or {}
        if stype == RETRY and (rec.phase == "Unschedulable") == (not ok) and placement == rec.placement and \
                result.message == status.get("message"):
            # A parked binding retried to the same verdict: no write, no new history entry; stay parked.
            self.metrics.attempt("success" if ok else "unschedulable", stype, None)
            self.queue.unschedulable(name)
            return None
        # a placed Binding's status keeps no per-cluster reasons (bounded status in a storm), but for
        # its own named targets that are not registered: few, and what the user asked for
        reasons, dropped = result.reasons_sample(MAX_STATUS_REASONS, STATUS_REASONS_PER_VERDICT) \
            if not ok or result.partial or result.held_back or result.extra_reasons else ({}, 0)
        d = Decision(ok, placement, result.message, reasons, rec.generation, ts,
                     result.estimated_hourly_cost if ok else None,
                     result.roles if ok else None, users=decision_users(result.analysis),
                     reason_counts=result.reason_counts() if reasons else None, dropped=dropped,
                     affinity_name=result.affinity_term if ok else None)
        obj["status"] = merge_status(status, d)
        if stype == RESCHEDULE:
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            trigger = {"kind": "Reschedule", "at": spec.rescheduleTriggeredAt, "reason": ann.get(RESCHEDULE_REASON)}
        elif stype == FOLLOW:
            trigger = {"kind": "FollowUp", "reason": f"{spec.followUp.name if spec.followUp else ''} moved"}
        data_moved = self.readers.take(name)  # any decision now sees where its data is
        if stype == DATA_MOVED:
            trigger = {"kind": DATA_MOVED, "reason": data_moved or ""}
        self.metrics.observe_cycle("success" if ok else "unschedulable", result.timings_ms, self._filters,
                                   self._scores)
        value = encode_object(obj)
        result.compact()  # it waits for its write holding only what its record explains
        return Plan(entry, rec, result, d, value, stype, trigger, with_status(rec, obj, value),
                     len(self.cache.unknown), involved_of(obj))

    def _schedule(self, task: Task) -> ScheduleResult:
        """F6: a pre-allocation hold raises a cluster's level to its forecast peak, so new replicas go
        elsewhere first; replicas nowhere else has room for go to the held clusters' room as it is now (else
        they wait out the hold's horizon, 30 minutes by default, beside that room)."""
        result = self.scheduler.schedule(task, self.cache.snap)
        if result.placed >= result.requested:
            return result
        with self.cache.holds_set_aside() as held:
            if not held:
                return result
            again = self.scheduler.schedule(task, self.cache.snap)
        if again.placed <= result.placed:
            return result
        on = sorted(set(held) & {c for c, n in again.pairs if n > 0})
        if on:
            again.analysis["preallocationHoldsSetAside"] = on
            again.message += f" (pre-allocation hold set aside on {', '.join(on)}: no other cluster had room)"
        return again

    def _invalid(self, entry: QueueEntry, rec: BindingRecord, obj: dict[str, Any], stype: str,
                 e: ValidationError) -> Plan:
        """The registry validated the spec on the way in; one stored by another version may not be."""
        msg = f"invalid binding spec: {e.errors()[0].get('msg', e)}"
        bad = ScheduleResult(name=rec.name, phase="Unschedulable", requested=rec.replicas, placed=0,
                             message=msg, clusters=self.cache.snap.n, feasible=0, division="")
        d = Decision(False, rec.placement, msg, {}, rec.generation, whole_ms(self.clock()))
        obj["status"] = merge_status(obj.get("status"), d)
        return Plan(entry, rec, bad, d, encode_object(obj), stype, None, involved=involved_of(obj))

    def _follow_users(self, task: Task, rec: BindingRecord, result: ScheduleResult) -> ScheduleResult | None:
        """Issue 34: keep the placement unless the move towards the users pays (``users.judge_move``)
        and the move budget grants it; None: the budget is spent (queued again after a backoff)."""
        users = users_of(task.spec.placement, task.users)
        if users is None or result.phase != "Scheduled":
            return result
        verdict = judge_move(self.cache.snap, users, rec.placement, result.pairs, self.settings.users_min_gain_ms)
        if verdict.pays and not rec.keeps_data:  # F3: data moves only with a plan
            if self.fleet.moves.take_whole(verdict.moved):
                result.message = f"{result.message}; {verdict.message}"
                result.analysis["usersMove"] = verdict.as_json()
                return result
            log.info("%s: %s; waiting for the move budget (%d replicas a minute)", task.name, verdict.message,
                     self.fleet.moves.per_minute)
            self.queue.retry(task.name)
            return None
        task.rebalance = False  # where it is, scaled as asked
        kept = self.scheduler.schedule(task, self.cache.snap)
        kept.message = f"{kept.message}; {verdict.message}" + (
            " — not moved: it keeps its data in PersistentVolumeClaims, which move only with a plan"
            if verdict.pays else "")
        kept.analysis["usersMove"] = verdict.as_json()
        return kept

    def _refit(self, rec: BindingRecord, spec: BindingSpec) -> tuple[ScheduleResult, dict[str, Any]] | None:
        """S11: a decision from scratch, without the binding's own assumed replicas, of which the
        fleet changes it waits for take their part (``refit``). None: nothing to write (the queue
        entry is settled here)."""
        snap = self.cache.snap
        # a cordon keeps what a cluster runs, and so does a NotReady one with the not-ready taint until
        # failover moves its replicas (as a decision not from scratch holds them, `Readiness`): the
        # fresh division is of the rest, beside them
        tainted = not_ready_tainted(snap)
        holding = frozenset(c for c, _ in rec.placement if (row := snap.index.get(c)) is not None and (
            snap.unschedulable[row] or (tainted is not None and tainted[row] and not snap.ready[row]
                                        and snap.has_status[row])))
        kept = {} if rec.duplicated or spec.placement.statefulTopology is not None else \
            {c: n for c, n in rec.placement if c in holding}  # (a Duplicated copy is held anyway)
        kept_replicas = sum(kept.values())
        divided = spec.model_copy(update={"replicas": spec.replicas - kept_replicas}) if kept else spec
        current = [] if self.fleet.by_parts(rec, spec.placement) else \
            [TargetCluster.model_construct(cluster=c, replicas=n) for c, n in sorted(rec.placement) if c not in kept]
        obj = rec.object()  # decoded once: a fleet change redivides every binding on the cluster
        users, slo = learned(obj)
        task = Task(divided, name=rec.name, current=current, rebalance=not rec.duplicated,
                    workload_class=rec.workload_class, workload=rec.workload, primary=rec.primary,
                    users=users, latency_slo_ms=slo)
        own = rec.placement + kept_copies(obj, rec.placement)  # a drained cluster's kept copy is its own load too
        with self.cache.excluding(rec.name, own, rec.requirements, measured_use(obj)):
            fresh = self.scheduler.schedule(task, snap)
        if kept:
            fresh = replace(fresh, pairs=tuple(sorted({**dict(fresh.pairs), **kept}.items())),
                            requested=fresh.requested + kept_replicas, placed=fresh.placed + kept_replicas,
                            _placement=None)
        facts = self.cache.clusters
        out = self.fleet.refit(rec, spec, fresh, self.fleet.stale(
            rec, lambda c: r.facts if (r := facts.get(c)) is not None else None, holding))
        if out.result is None or out.trigger is None:
            # deferred: out of move budget, again after a backoff
            (self.queue.retry if out.deferred else self.queue.done)(rec.name)
            return None
        self.metrics.fleet_moved.inc(out.moved)
        return out.result, out.trigger

    def _pinned(self, entry: QueueEntry, rec: BindingRecord, obj: dict[str, Any], stype: str) -> Plan | None:
        """F3: a MigrationPlan pinned the placement: it is written as pinned, whatever triggered the
        decision (a scale, a reschedule, a failover), so nothing moves the workload under the plan."""
        assert rec.pin is not None
        name = entry.key
        status = obj.get("status") or {}
        message = f"placement pinned by {pinned_by(obj) or 'a MigrationPlan'}"
        if stype == RETRY and tuple(sorted(rec.placement)) == rec.pin and status.get("message") == message:
            self.queue.unschedulable(name)
            return None
        pairs = rec.pin
        ts = whole_ms(self.clock())
        result = ScheduleResult(name=name, phase="Scheduled", requested=rec.replicas,
                                placed=sum(n for _, n in pairs), message=message, clusters=self.cache.snap.n,
                                feasible=len(pairs), division="Pinned", pairs=pairs)
        if self.cache.assume_decision(name, rec.placement, pairs, rec.requirements, ts, rec.demand):
            self._cluster_event("GpuStorageFreed")
        self.cache.snap.workload_placements[rec.workload] = pairs
        # the users the last decision weighed stay said while the plan holds the placement (it weighs none)
        users = status.get("users") if isinstance(status.get("users"), dict) else None
        d = Decision(True, pairs, message, {}, rec.generation, ts, roles=_roles(status) or None, users=users,
                     affinity_name=status.get("schedulerObservingAffinityName"))
        obj["status"] = merge_status(status, d)
        value = encode_object(obj)
        return Plan(entry, rec, result, d, value, stype, {"kind": "Pinned", "reason": message},
                     with_status(rec, obj, value), involved=involved_of(obj))

    # ------------------------------------------------------------------ writing decisions
    async def _commit(self, plans: list[Plan]) -> None:
        self.metrics.write_batch.observe(len(plans))
        try:
            for p in plans:
                if p.written is not None:
                    self._written[p.rec.key] = (p.value, p.written)
            outcomes = await self.writer.write(plans, [self._history_record(p) for p in plans])
        except Exception:
            log.exception("writing %d scheduling decisions failed", len(plans))
            outcomes = ["error"] * len(plans)
        now = time.monotonic()
        for p, out in zip(plans, outcomes, strict=True):
            name = p.entry.key
            if out == "ok":
                res = "success" if p.decision.scheduled else "unschedulable"
                self.metrics.attempt(res, p.schedule_type, now - p.entry.added_at)
                if p.decision.scheduled and not p.result.partial and not p.result.held_back:
                    self.queue.done(name)
                    self._specs.forget(name)  # kept only for retries: 100,000 specs would weigh
                    if self.fleet.waiting(name):  # a fleet change arrived while deciding for another reason
                        self.queue.add(name, FLEET, p.rec.priority)
                else:
                    self.queue.unschedulable(name)
                continue
            self.metrics.attempt("error", p.schedule_type, None)
            self._undo(p)
            if out == "gone":
                self.queue.delete(name)
            elif out == "stale":
                self.queue.done(name)  # the newer generation is (or will be) queued by its watch event
            else:
                self.queue.retry(name)
        try:
            await self._record(plans, outcomes)
        except Exception:
            log.exception("appending to the failure log failed")

    def _undo(self, p: Plan) -> None:
        """The decision was not written: the assumed load goes back to what the store says."""
        self._written.pop(p.rec.key, None)
        self.cache.release(p.rec.name)
        self.cache.unrelease(p.rec.name)
        cur = self.bindings.cache.get(p.rec.key)
        if cur is not None and not cur.deleting:
            self.cache.observe(p.rec.name, cur.placement, cur.scheduled_time, cur.requirements, cur.demand,
                               unschedulable=cur.phase == "Unschedulable", shown=self._shown(cur))

    def _history_record(self, p: Plan) -> dict[str, Any]:
        ns, _, nm = p.rec.workload.partition("/")
        return decision_record(p.result, binding=p.rec.name, generation=p.rec.generation,
                               schedule_type=p.schedule_type, ts=p.decision.time, scheduler=self.settings.identity,
                               profile=self.profile.name, base_weights=self._base_weights, trigger=p.trigger,
                               unknown_clusters=p.unknown,
                               workload={"kind": p.rec.workload_kind, "namespace": ns, "name": nm}
                               if p.rec.workload_kind else None, usage=measured_usage(p.rec.raw))

    async def _record(self, plans: list[Plan], outcomes: list[str]) -> None:
        """Unschedulable and partial decisions also go to the shared failure log (once per verdict)."""
        failures: list[Awaitable[bool]] = []
        for p, out in zip(plans, outcomes, strict=True):
            if out != "ok":
                continue
            r = p.result
            name = p.rec.name
            if r.phase == "Scheduled" and not r.partial:
                self._logged_failure.pop(name, None)
                continue
            verdict = hash(r.message)
            if self._logged_failure.get(name) == verdict:
                continue  # the same verdict again: logged once
            self._logged_failure[name] = verdict
            kind = "Unschedulable" if r.phase == "Unschedulable" else "PartiallyScheduled"
            failures.append(append_failure(
                self.store, FAILURES_PREFIX, kind, r.message, ts=p.decision.time, binding=name,
                details={"scheduleType": p.schedule_type, "requested": r.requested, "placed": r.placed,
                         "reasonCounts": r.reason_counts(), "generation": p.rec.generation}))
        if failures:
            await asyncio.gather(*failures)


def _roles(status: dict[str, Any]) -> dict[str, str]:
    """F3: the roles the status gives its clusters now (kept when a decision does not choose them)."""
    return {str(t["cluster"]): str(t["role"]) for t in status.get("placement") or []
            if isinstance(t, dict) and t.get("role") and t.get("cluster")}


@dataclass
class _Leading:
    """The scheduler's decision loop as the manager's leader runnable for one term."""

    service: SchedulerService
    fence: Fence

    async def run(self) -> None:
        await self.service._lead(self.fence)
