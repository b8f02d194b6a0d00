"""Propagation (A3, M3, S11): a scheduled Binding → a copy of its workload in every selected member.

Two kinds of queue, so that no member can hold up another (SEC4):

* the **binding queue** (a few workers, no member I/O): reads the Binding, its template, the
  dependents and the ClusterOverridePolicies, builds the per-cluster `Work` (manifests with that
  cluster's share and overrides), decides which old clusters may be emptied, writes
  ``status.clusters[]`` / phase / conditions (and the finalizer) with one CAS write, *then* hands
  the work to the clusters;
* one **cluster syncer** per member (its own queue and workers, as many as the member client's
  connections): applies (server-side apply) or deletes one binding's objects in that member and
  reports back to the binding queue. A slow or dead member only fills its own queue.

Level-triggered and idempotent: the plan is recomputed from the store on every pass, a manifest is
applied only when its hash differs from what was last applied, and status is written only when it
changes. Graceful moves (S11): a cluster that left the placement keeps its copy (untouched) until the
new placement's ready replicas cover the desired count, or it is unreachable, or
``gracefulTimeoutSeconds`` passed; then it is emptied. Deletions that can't reach a member are kept
in the store under ``/cleanup/<cluster>/<kind>/<namespace>/<name>`` (`drods.controllers.cleanup`)
and done when the member is back. Each member's managed workloads are listed every
``statusPollSeconds`` for their status (`drods.controllers.status`); a copy deleted behind
DRO-DS's back is applied again.

Pull-mode clusters (M2) are not reached at all: the syncer upserts the cluster's ``Work`` (the same
manifests) or deletes it, and the Work's status, written by the member's agent, stands in for the
apply result and the status poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from drods.controllers import manifests as M
from drods.controllers.clients import MemberClients, is_pull
from drods.controllers.manifests import Ref, Target, Work
from drods.controllers.overrides import OverrideError
from drods.controllers.settings import MemberSettings
from drods.controllers.status import (
    PROPAGATING_PHASES,
    Observation,
    condition,
    copy_ready,
    observe,
    template_status,
)
from drods.errors import ApiError
from drods.machinery.controller import Controller
from drods.machinery.informer import Informer
from drods.machinery.tasks import stop_tasks
from drods.members.client import MemberClient, MemberError, MemberUnavailable
from drods.model.keys import CLEANUP_PREFIX
from drods.model.kinds import BINDING, CLUSTER, CLUSTER_OVERRIDE_POLICY, WORK, WORKLOAD_KINDS, Kind, by_kind
from drods.model.policy import ClusterOverridePolicySpec
from drods.model.work import work_labels, work_name
from drods.registry.objects import ObjectRegistry
from drods.store import CasFailed, KeyValue, Store

log = logging.getLogger(__name__)
Obj = dict[str, Any]

FINALIZER = "multicluster.io/propagation"
PERMANENT_STATUS = frozenset({400, 401, 403, 404, 405, 409, 413, 415, 422})


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cleanup_key(cluster: str, ref: Ref) -> str:
    return f"{CLEANUP_PREFIX}{cluster}/{ref.kind}/{ref.namespace or '_'}/{ref.name}"


def decode_obj(kv: KeyValue) -> Obj | None:
    try:
        obj: Obj = json.loads(kv.value)
    except ValueError:
        return None
    if isinstance(obj.get("metadata"), dict):
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
    return obj


def decode_policy(kv: KeyValue) -> tuple[str, ClusterOverridePolicySpec] | None:
    try:
        obj = json.loads(kv.value)
        return obj["metadata"]["name"], ClusterOverridePolicySpec.model_validate(obj.get("spec") or {})
    except (ValueError, KeyError, TypeError, ValidationError):
        log.warning("ignoring unreadable ClusterOverridePolicy %s", kv.key)
        return None


def encode(obj: Obj) -> bytes:
    body = dict(obj)
    body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return json.dumps(body, separators=(",", ":")).encode()


def ready_condition(cluster: Obj | None) -> str | None:
    for c in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return str(c.get("status"))
    return None


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of a cluster syncer's last pass for one binding."""

    hash: str  # of the Work applied ("" for removals)
    ok: bool
    removed: bool = False
    deferred: bool = False
    error: str | None = None
    permanent: bool = False
    failures: int = 0
    at: float = 0.0
    waiting: bool = False  # nothing to do from here (a pull-mode member's agent takes its work)


class _Conflict(Exception):
    """The object exists in the member and DRO-DS did not create it."""


class Propagation:
    def __init__(self, store: Store, registry: ObjectRegistry, settings: MemberSettings, clients: MemberClients,
                 *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.clients = clients
        self.clock = clock
        self.bindings = Informer(store, BINDING.key_prefix(), decode_obj)
        self.clusters = Informer(store, CLUSTER.key_prefix(), decode_obj)
        self.policies = Informer(store, CLUSTER_OVERRIDE_POLICY.key_prefix(), decode_policy)
        self.cleanups = Informer(store, CLEANUP_PREFIX, lambda kv: json.loads(kv.value))
        self.works = Informer(store, WORK.key_prefix(), decode_obj)  # pull-mode clusters' Works (M2)
        self.templates: dict[str, Informer] = {k.key_prefix(): Informer(store, k.key_prefix(), decode_obj)
                                               for k in WORKLOAD_KINDS}
        self._kind_of_prefix = {k.key_prefix(): k for k in WORKLOAD_KINDS}
        self.controller = Controller("propagation", self.reconcile, workers=settings.bindingWorkers)
        self.syncers: dict[str, Controller] = {}
        self._syncer_tasks: dict[str, list[asyncio.Task[None]]] = {}
        # desired[cluster][binding]: the current Work; results/observed by (cluster, binding)
        self.desired: dict[str, dict[str, Work]] = {}
        self.results: dict[tuple[str, str], Result] = {}
        self.observed: dict[tuple[str, str], tuple[Observation, float]] = {}
        self.tracked: dict[str, dict[str, Ref]] = {}  # cluster → binding → main object (status polling)
        self.owned: dict[str, set[Ref]] = {}  # cluster → objects known to carry our label
        self.ns_ok: dict[str, set[str]] = {}  # cluster → namespaces known to exist
        self.by_template: dict[str, set[str]] = {}
        self.by_dep: dict[tuple[str, str, str], set[str]] = {}
        self._deps_of: dict[str, set[tuple[str, str, str]]] = {}
        self.by_ns: dict[str, set[str]] = {}
        self.by_cluster: dict[str, set[str]] = {}
        self._indexed: dict[str, tuple[str | None, str | None, set[str]]] = {}
        self.cluster_changed = asyncio.Event()  # wakes the cleanup loop
        # the revisions our own writes produced: their watch events are echoes, not news
        self._own_binding_rev: dict[str, int] = {}
        self._own_template_rev: dict[str, int] = {}
        self._plans: dict[str, tuple[Any, dict[str, Work | OverrideError]]] = {}  # binding → (inputs, plan)
        self._policy_epoch = 0
        self.synced = asyncio.Event()
        self.bindings.on_change(self._on_binding)
        self.clusters.on_change(self._on_cluster)
        self.policies.on_change(self._on_policy)
        self.works.on_change(self._on_work)
        for inf in self.templates.values():
            inf.on_change(self._on_template)

    # ------------------------------------------------------------------ running
    async def run(self) -> None:
        informers = [self.clusters, self.policies, self.cleanups, self.works, *self.templates.values(),
                     self.bindings]
        tasks = [asyncio.create_task(i.run(), name=f"propagation-informer-{i.prefix}") for i in informers]
        try:
            for i in informers:
                await i.wait_synced()
            self.synced.set()
            await self.controller.run()
        finally:
            await stop_tasks([*tasks, *(t for ts in self._syncer_tasks.values() for t in ts)])

    def syncer(self, cluster: str) -> Controller:
        """The cluster's own queue and workers (started on first use)."""
        ctl = self.syncers.get(cluster)
        if ctl is None:
            async def sync(key: Any) -> float | None:
                return await self._sync(cluster, str(key))

            ctl = Controller(f"sync-{cluster}", sync, workers=self.settings.concurrency)
            self.syncers[cluster] = ctl
            self._syncer_tasks[cluster] = [
                asyncio.create_task(ctl.run(), name=f"sync-{cluster}"),
                asyncio.create_task(self._poll_status(cluster), name=f"status-{cluster}"),
            ]
        return ctl

    def _stop_syncer(self, cluster: str) -> None:
        self.syncers.pop(cluster, None)
        for t in self._syncer_tasks.pop(cluster, []):
            t.cancel()

    # ------------------------------------------------------------------ informer handlers
    def _enqueue(self, names: set[str] | list[str] | None) -> None:
        for n in names or ():
            self.controller.queue.add(n)

    def _enqueue_all(self) -> None:
        self._enqueue([k[len(BINDING.key_prefix()):] for k in self.bindings.cache])

    def _on_policy(self, key: str, old: Any, new: Any) -> None:
        self._policy_epoch += 1
        self._enqueue_all()

    @staticmethod
    def _rev(obj: Obj | None) -> int:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)

    def _on_binding(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key[len(BINDING.key_prefix()):]
        echo = new is not None and self._own_binding_rev.get(name) == self._rev(new)
        prev = self._indexed.pop(name, None)
        if prev is not None:
            tkey, ns, clusters = prev
            if tkey:
                self.by_template.get(tkey, set()).discard(name)
            if ns:
                self.by_ns.get(ns, set()).discard(name)
            for c in clusters:
                self.by_cluster.get(c, set()).discard(name)
        if new is not None:
            res = (new.get("spec") or {}).get("resource") or {}
            kind = by_kind(str(res.get("apiVersion")), str(res.get("kind"))) if res else None
            tkey = ns = None
            if kind is not None and res.get("name"):
                ns = (res.get("namespace") or "default") if kind.namespaced else None
                tkey = kind.key(str(res["name"]), ns)
                self.by_template.setdefault(tkey, set()).add(name)
                if ns:
                    self.by_ns.setdefault(ns, set()).add(name)
            status = new.get("status") or {}
            clusters = {str(t.get("cluster")) for t in (status.get("placement") or []) + (status.get("clusters") or [])
                        if isinstance(t, dict) and t.get("cluster")}
            for c in clusters:
                self.by_cluster.setdefault(c, set()).add(name)
            self._indexed[name] = (tkey, ns, clusters)
        if not echo:
            self.controller.queue.add(name)

    def _on_template(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None and self._own_template_rev.get(key) == self._rev(new):
            return  # our own status write
        self._enqueue(self.by_template.get(key))
        obj = new or old
        if obj is None:
            return
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        if kind in ("ConfigMap", "Secret"):
            self._enqueue(self.by_dep.get((str(kind), ns, name)))
        elif kind == "Service":
            self._enqueue(self.by_ns.get(ns))

    def _on_cluster(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key[len(CLUSTER.key_prefix()):]
        self.clients.invalidate(name, new)
        if new is None or (old is not None and ready_condition(old) != ready_condition(new)):
            self.ns_ok.pop(name, None)
            self.owned.pop(name, None)
        self._enqueue(self.by_cluster.get(name))
        if new is None:
            self._stop_syncer(name)
        self.cluster_changed.set()

    # ------------------------------------------------------------------ lookups
    def cluster(self, name: str) -> Obj | None:
        obj: Obj | None = self.clusters.cache.get(CLUSTER.key(name))
        return obj

    def unreachable(self, name: str) -> bool:
        return ready_condition(self.cluster(name)) == "False" or self.clients.ready(name) is False

    def template_of(self, ref: Obj | None) -> tuple[Kind | None, Obj | None]:
        if not ref:
            return None, None
        kind = by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if kind is None or kind.key_prefix() not in self.templates or not ref.get("name"):
            return kind, None
        ns = (ref.get("namespace") or "default") if kind.namespaced else None
        obj: Obj | None = self.templates[kind.key_prefix()].cache.get(kind.key(str(ref["name"]), ns))
        return kind, obj

    def _lookup(self, kind: str, ns: str, name: str) -> Obj | None:
        k = by_kind("v1", kind)
        if k is None:
            return None
        obj: Obj | None = self.templates[k.key_prefix()].cache.get(k.key(name, ns))
        return obj

    def _services(self, ns: str) -> list[Obj]:
        k = by_kind("v1", "Service")
        assert k is not None
        prefix = k.key_prefix(ns)
        return [o for key, o in self.templates[k.key_prefix()].cache.items() if key.startswith(prefix)]

    def desired_refs(self, cluster: str, *, exclude: str | None = None) -> set[Ref]:
        """Objects some binding currently wants applied on ``cluster``."""
        out: set[Ref] = set()
        for b, w in self.desired.get(cluster, {}).items():
            if b != exclude and not w.remove:
                out.update(w.refs)
        return out

    # ------------------------------------------------------------------ the binding pass
    async def reconcile(self, key: Any) -> float | None:
        name = str(key)
        for _ in range(8):
            kv = await self.store.get(BINDING.key(name))
            if kv is None:
                self._forget(name)
                return None
            outcome = await self._reconcile_once(name, kv)
            if outcome != "conflict":
                return outcome if isinstance(outcome, float) else None
        return 0.2

    async def _reconcile_once(self, name: str, kv: KeyValue) -> float | str | None:
        b: Obj = json.loads(kv.value)
        meta, spec, status = b["metadata"], b.get("spec") or {}, dict(b.get("status") or {})
        deleting = bool(meta.get("deletionTimestamp"))
        uid = str(meta.get("uid") or "")
        kind, template = self.template_of(spec.get("resource"))
        if template is not None and (template.get("metadata") or {}).get("deletionTimestamp"):
            template = None
        active = not deleting and template is not None
        tkind = str(template.get("kind")) if template else (str((spec.get("resource") or {}).get("kind") or ""))
        replica_kind = tkind in M.REPLICA_KINDS
        entries = {str(e["cluster"]): dict(e) for e in status.get("clusters") or []
                   if isinstance(e, dict) and e.get("cluster")}
        wanted: dict[str, int] = {}
        if active:
            for t in status.get("placement") or []:
                if not isinstance(t, dict) or not t.get("cluster"):
                    continue
                c, share = str(t["cluster"]), int(t.get("replicas") or 0)
                if self.cluster(c) is None or (replica_kind and share <= 0):
                    continue
                wanted[c] = share
        plans: dict[str, Work | OverrideError] = {}
        if wanted and template is not None:
            deps, looked = M.dependents(template, self._lookup, self._services)
            self._index_deps(name, looked)
            targets = [Target(c, s, dict(((self.cluster(c) or {}).get("metadata") or {}).get("labels") or {}))
                       for c, s in sorted(wanted.items())]
            inputs = (uid, self._rev(template), tuple((t.cluster, t.share, tuple(sorted(t.labels.items())))
                                                      for t in targets),
                      tuple(self._rev(d) for d in deps), self._policy_epoch)
            cached = self._plans.get(name)
            if cached is not None and cached[0] == inputs:
                plans = cached[1]
            else:
                plans = M.plan(name, uid, template, targets, deps, [p for p in self.policies.cache.values() if p])
                self._plans[name] = (inputs, plans)
        now = self.clock()
        works: dict[str, Work | None] = {}
        new_entries: list[Obj] = []
        errors: list[str] = []
        all_applied = all_ready = bool(wanted)
        for c, share in sorted(wanted.items()):
            e = entries.get(c) or {"cluster": c}
            e["replicas"] = share
            e.pop("removing", None)
            e.pop("removingSince", None)
            p = plans[c]
            res = self.results.get((c, name))
            if isinstance(p, OverrideError):
                e["applied"] = False
                e["lastError"] = str(p)
                errors.append(f"{c}: {p}")
                works[c] = None
                all_applied = all_ready = False
                new_entries.append(e)
                continue
            works[c] = p
            e["resources"] = [str(r) for r in p.refs]
            applied = res is not None and res.ok and not res.removed and res.hash == p.hash
            e["applied"] = applied
            if applied:
                e.pop("lastError", None)
            elif res is not None and res.error and not res.removed:
                e["lastError"] = res.error
                if res.permanent or res.failures >= self.settings.applyFailureThreshold:
                    errors.append(f"{c}: {res.error}")
            main_hash = M.manifest_hash(p.manifests[-1])
            obs = self._fill_observation(e, c, name, tkind)
            current = obs if obs is not None and obs.hash == main_hash else None
            ready = applied and copy_ready(tkind, share, current)
            all_applied = all_applied and applied
            all_ready = all_ready and ready
            new_entries.append(e)
        desired_total = sum(wanted.values())
        ready_new = sum(int(e.get("readyReplicas") or 0) for e in new_entries if e.get("applied"))
        requeue: float | None = None
        for c, e in sorted(entries.items()):
            if c in wanted:
                continue
            res = self.results.get((c, name))
            if res is not None and res.removed and res.ok:
                continue  # emptied (or handed to the cleanup records): the entry goes
            if self.cluster(c) is None:
                continue  # the cluster was unregistered: nothing left to reach
            since = _parse(e.get("removingSince")) or now
            timed_out = now - since >= self.settings.gracefulTimeoutSeconds
            covered = all_applied and (not replica_kind or ready_new >= desired_total)
            remove_now = not active or self.unreachable(c) or covered or timed_out
            e["removing"] = True
            e["removingSince"] = rfc3339(since)
            self._fill_observation(e, c, name, tkind)
            if remove_now:
                refs = [Ref.parse(r) for r in e.get("resources") or []] or self._main_refs(spec)
                works[c] = Work(name, True, refs=refs)
                if res is not None and res.error and res.removed:
                    e["lastError"] = res.error
            else:
                works[c] = None
                left = self.settings.gracefulTimeoutSeconds - (now - since)
                requeue = min(30.0 if requeue is None else requeue, max(left, 0.5))
            new_entries.append(e)
        # status
        new_status = dict(status)
        if new_entries or "clusters" in status:
            new_status["clusters"] = new_entries
        phase = status.get("phase")
        stamp = rfc3339(now)
        prev_conds = status.get("conditions") if isinstance(status.get("conditions"), list) else None
        if active and wanted and phase in PROPAGATING_PHASES:
            if errors:
                new_phase = "Failed"
                msg = "; ".join(errors)[:1000]
                conds = [condition("Propagated", False, "ApplyFailed", msg, prev_conds, stamp),
                         condition("Ready", False, "ApplyFailed", msg, prev_conds, stamp)]
            else:
                new_phase = "Running" if all_applied and all_ready else "Propagated" if all_applied else "Scheduled"
                n_applied = sum(1 for e in new_entries if e.get("applied") and not e.get("removing"))
                ready_total = sum(int(e.get("readyReplicas") or 0) for e in new_entries if not e.get("removing"))
                conds = [condition("Propagated", all_applied, "Applied" if all_applied else "Applying",
                                   f"applied in {n_applied}/{len(wanted)} cluster(s)", prev_conds, stamp),
                         condition("Ready", all_ready, "Ready" if all_ready else "NotReady",
                                   f"{ready_total}/{desired_total} replicas ready" if replica_kind else
                                   ("ready" if all_ready else "waiting for the member copies"), prev_conds, stamp)]
            new_status["phase"] = new_phase
            new_status["conditions"] = conds
        finalizers = list(meta.get("finalizers") or [])
        gone = deleting and not new_entries
        if gone and FINALIZER in finalizers:
            finalizers.remove(FINALIZER)
        elif not deleting and (wanted or new_entries) and FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        if new_status != status or finalizers != list(meta.get("finalizers") or []):
            b["status"] = new_status
            meta["finalizers"] = finalizers
            if not finalizers:
                meta.pop("finalizers", None)
            try:
                if deleting and not finalizers:
                    await self.store.delete(kv.key, expect_revision=kv.mod_revision)
                else:
                    self._own_binding_rev[name] = await self.store.put(kv.key, encode(b),
                                                                       expect_revision=kv.mod_revision)
            except CasFailed:
                return "conflict"
        # publish the work only once the status (and finalizer) that covers it is stored
        self._publish(name, works, new_entries, spec)
        if template is not None and not deleting and kind is not None:
            again = await self._write_template_status(kind, template, tkind, new_entries, all_applied)
            if again:
                requeue = 0.2
        if gone:
            self._forget(name)
        return requeue

    def _main_refs(self, spec: Obj) -> list[Ref]:
        r = spec.get("resource") or {}
        kind = by_kind(str(r.get("apiVersion")), str(r.get("kind")))
        if kind is None or not r.get("name"):
            return []
        ns = (r.get("namespace") or "default") if kind.namespaced else ""
        return [Ref(kind.api_version, kind.kind, ns, str(r["name"]))]

    def _fill_observation(self, e: Obj, cluster: str, name: str, kind: str) -> Observation | None:
        got = self.observed.get((cluster, name))
        if got is None:
            return None
        obs, at = got
        if kind in M.WORKLOAD_KINDS:
            e.update(observedReplicas=obs.replicas, readyReplicas=obs.ready, availableReplicas=obs.available,
                     updatedReplicas=obs.updated)
            if kind == "Job":
                e["complete"] = obs.complete
            e["conditions"] = obs.conditions_json()
        e["observedTime"] = rfc3339(at)
        return obs

    def _index_deps(self, name: str, looked: set[tuple[str, str, str]]) -> None:
        old = self._deps_of.get(name, set())
        if old == looked:
            return
        for d in old - looked:
            self.by_dep.get(d, set()).discard(name)
        for d in looked - old:
            self.by_dep.setdefault(d, set()).add(name)
        self._deps_of[name] = looked

    def _publish(self, name: str, works: dict[str, Work | None], entries: list[Obj], spec: Obj) -> None:
        for c in list(self.desired):
            if c not in works:
                self.desired[c].pop(name, None)
        main = self._main_refs(spec)
        for c, w in works.items():
            tracked = self.tracked.setdefault(c, {})
            if main:
                tracked[name] = main[0]
            self.syncer(c)  # its status poller follows every cluster the binding has an entry on
            if w is None:
                self.desired.get(c, {}).pop(name, None)
                continue
            cur = self.desired.setdefault(c, {}).get(name)
            if cur is None or cur.remove != w.remove or cur.hash != w.hash or cur.refs != w.refs:
                self.desired[c][name] = w
            res = self.results.get((c, name))
            if w.remove:
                done = res is not None and res.removed and res.ok
            else:
                done = res is not None and res.ok and not res.removed and res.hash == w.hash
            if not done:
                self.syncer(c).queue.add(name)
        present = {str(e["cluster"]) for e in entries}
        for c in list(self.tracked):
            if c not in present:
                self.tracked[c].pop(name, None)
        for c in self._clusters_known():
            if c not in present:
                self.results.pop((c, name), None)
                self.observed.pop((c, name), None)

    def _clusters_known(self) -> set[str]:
        return set(self.desired) | set(self.tracked) | set(self.syncers)

    def _forget(self, name: str) -> None:
        for d in self.desired.values():
            d.pop(name, None)
        for t in self.tracked.values():
            t.pop(name, None)
        for c in self._clusters_known():
            self.results.pop((c, name), None)
            self.observed.pop((c, name), None)
        self._index_deps(name, set())
        self._deps_of.pop(name, None)
        self._plans.pop(name, None)
        self._own_binding_rev.pop(name, None)

    async def _write_template_status(self, kind: Kind, template: Obj, tkind: str, entries: list[Obj],
                                     all_applied: bool) -> bool:
        """Aggregate into the template's status; True when it must be tried again (conflict)."""
        if tkind not in M.WORKLOAD_KINDS:
            return False
        meta = template["metadata"]
        previous = dict(template.get("status") or {})
        info = {c: (self.cluster(c) or {}).get("spec") or {} for c in (str(e["cluster"]) for e in entries)}
        new = template_status(tkind, int(meta.get("generation") or 1), entries, info, all_applied, previous,
                              rfc3339(self.clock()))
        if new == previous:
            return False
        try:
            out = await self.registry.update_status(kind, meta["name"], new, meta.get("namespace"),
                                                    resource_version=int(meta["resourceVersion"]))
            self._own_template_rev[kind.key(meta["name"], meta.get("namespace"))] = self._rev(out)
        except ApiError as e:
            if e.status in (404, 409):
                return e.status == 409
            raise
        return False

    # ------------------------------------------------------------------ the cluster syncer
    async def _sync(self, cluster: str, name: str) -> float | None:
        w = self.desired.get(cluster, {}).get(name)
        if w is None:
            return None
        prev = self.results.get((cluster, name))
        client, why = await self.clients.get(cluster)
        if w.remove:
            res = await self._remove(cluster, client, why, w, prev)
        else:
            res = await self._apply(cluster, client, why, w, prev)
        cur = self.desired.get(cluster, {}).get(name)
        if cur is not None and cur.remove == w.remove and cur.hash == w.hash:
            self.results[(cluster, name)] = res
        self.controller.queue.add(name)
        if res.ok or res.waiting:
            return None
        return min(0.5 * 2 ** min(res.failures - 1, 6), 30.0) if not res.permanent else 30.0

    def _failed(self, w: Work, prev: Result | None, error: str, permanent: bool, removed: bool = False) -> Result:
        failures = (prev.failures if prev is not None and prev.hash == w.hash and prev.removed == removed else 0) + 1
        return Result(w.hash, False, removed=removed, error=error[:500], permanent=permanent, failures=failures,
                      at=self.clock())

    async def _apply(self, cluster: str, client: MemberClient | None, why: str | None, w: Work,
                     prev: Result | None) -> Result:
        if client is None:
            if is_pull(self.cluster(cluster) or {}):
                return await self._publish_work(cluster, w, prev)
            return self._failed(w, prev, why or "no client", True)
        owned = self.owned.setdefault(cluster, set())
        try:
            if w.namespace and w.namespace not in self.ns_ok.setdefault(cluster, set()):
                if await client.get("v1", "Namespace", w.namespace) is None:
                    await client.apply({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": w.namespace, "labels": {M.MANAGED_BY: M.MANAGER}}})
                self.ns_ok[cluster].add(w.namespace)
            out: Obj | None = None
            for m in w.manifests:
                ref = Ref.of(m)
                if ref not in owned:  # first contact: is it there, and did someone else create it?
                    cur = await client.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                    if cur is not None and not M.is_managed(cur):
                        raise _Conflict(f"{ref.kind} {ref.namespace}/{ref.name} already exists in {cluster} "
                                        "and is not managed by DRO-DS")
                    owned.add(ref)
                await self._cancel_cleanup(cluster, ref)
                out = await client.apply(m)
        except _Conflict as e:
            return self._failed(w, prev, str(e), True)
        except MemberUnavailable as e:
            return self._failed(w, prev, f"unreachable: {e}", False)
        except MemberError as e:
            return self._failed(w, prev, str(e), e.status in PERMANENT_STATUS)
        except Exception as e:  # noqa: BLE001 - a client bug for one cluster must not stop the others
            log.exception("applying %s to %s failed", w.binding, cluster)
            return self._failed(w, prev, f"{type(e).__name__}: {e}", False)
        if out is not None and out.get("kind") in M.WORKLOAD_KINDS:
            self._observe(cluster, w.binding, out)
        return Result(w.hash, True, at=self.clock())

    async def _remove(self, cluster: str, client: MemberClient | None, why: str | None, w: Work,
                      prev: Result | None) -> Result:
        still = self.desired_refs(cluster, exclude=w.binding)
        pending = [r for r in reversed(w.refs) if r not in still]  # the workload first, then its dependents
        pull = client is None and is_pull(self.cluster(cluster) or {})
        if (pull or (client is None and self._work_of(cluster, w.binding) is not None)) \
                and not await self._delete_work(cluster, w.binding):
            return self._failed(w, prev, "could not delete the Work", False, removed=True)
        if pull:
            self.observed.pop((cluster, w.binding), None)
            return Result("", True, removed=True, at=self.clock())  # the agent prunes what no Work wants
        if client is None:
            if self.cluster(cluster) is None:
                return Result("", True, removed=True, at=self.clock())
            await self._defer(cluster, w.binding, pending, why or "no client")
            return Result("", True, removed=True, deferred=True, error=why, at=self.clock())
        done: list[Ref] = []
        try:
            for ref in pending:
                cur = await client.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                if cur is not None and M.is_managed(cur):
                    await client.delete(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                self.owned.get(cluster, set()).discard(ref)
                done.append(ref)
        except (MemberUnavailable, MemberError) as e:
            rest = [r for r in pending if r not in done]
            permanent = isinstance(e, MemberError)
            if permanent and (prev is None or prev.failures + 1 < self.settings.applyFailureThreshold):
                return self._failed(w, prev, str(e), False, removed=True)
            await self._defer(cluster, w.binding, rest, str(e))
            return Result("", True, removed=True, deferred=True, error=str(e)[:500], at=self.clock())
        self.observed.pop((cluster, w.binding), None)
        return Result("", True, removed=True, at=self.clock())

    async def _defer(self, cluster: str, binding: str, refs: list[Ref], reason: str) -> None:
        """Record deletions a member could not take now; `drods.controllers.cleanup` does them later."""
        since = rfc3339(self.clock())
        for ref in refs:
            body = {"cluster": cluster, "apiVersion": ref.api_version, "kind": ref.kind,
                    "namespace": ref.namespace, "name": ref.name, "binding": binding, "since": since,
                    "reason": reason[:300]}
            await self.store.put(cleanup_key(cluster, ref), json.dumps(body).encode())

    async def _cancel_cleanup(self, cluster: str, ref: Ref) -> None:
        key = cleanup_key(cluster, ref)
        if key in self.cleanups.cache:
            with contextlib.suppress(CasFailed):
                await self.store.delete(key)
            self.cleanups.cache.pop(key, None)

    # ------------------------------------------------------------------ pull mode: Works (M2)
    def _work_of(self, cluster: str, binding: str) -> Obj | None:
        obj: Obj | None = self.works.cache.get(WORK.key(work_name(binding, cluster)))
        return obj

    async def _publish_work(self, cluster: str, w: Work, prev: Result | None) -> Result:
        """Upsert the Work a pull-mode cluster's agent applies; applied once the agent reports its hash."""
        name = work_name(w.binding, cluster)
        spec = {"cluster": cluster, "binding": w.binding, "manifests": w.manifests, "hash": w.hash}
        body: Obj = {"apiVersion": WORK.api_version, "kind": WORK.kind,
                     "metadata": {"name": name, "labels": work_labels(w.binding, cluster)}, "spec": spec}
        cur = self._work_of(cluster, w.binding)
        try:
            if cur is None or cur.get("spec") != spec or (cur.get("metadata") or {}).get("labels") != \
                    body["metadata"]["labels"]:
                try:
                    cur = await self.registry.create(WORK, body) if cur is None else \
                        await self.registry.update(WORK, body)
                except ApiError as e:
                    if e.status != 409:
                        raise
                    cur = await self.registry.update(WORK, body)  # created meanwhile (an older cache)
        except ApiError as e:
            return self._failed(w, prev, f"writing the Work: {e.message}", e.status in (400, 422))
        return self._work_result(w, cur)

    def _work_result(self, w: Work, work: Obj | None) -> Result:
        st = (work or {}).get("status") or {}
        if st.get("observedHash") == w.hash and w.hash:
            if st.get("applied"):
                return Result(w.hash, True, at=self.clock())
            return Result(w.hash, False, error=f"agent: {st.get('message') or 'not applied'}"[:500], failures=1,
                          waiting=True, at=self.clock())
        return Result(w.hash, False, error="waiting for the cluster's agent", waiting=True, at=self.clock())

    async def _delete_work(self, cluster: str, binding: str) -> bool:
        try:
            await self.store.delete(WORK.key(work_name(binding, cluster)))
        except CasFailed:
            pass
        except Exception:  # noqa: BLE001 - the store is down: the syncer retries
            log.exception("deleting the Work of %s on %s failed", binding, cluster)
            return False
        return True

    def _on_work(self, key: str, old: Obj | None, new: Obj | None) -> None:
        """The agent reported: the entry's applied flag and the copy's status come from the Work."""
        if new is None:
            return
        spec = new.get("spec") or {}
        cluster, binding = str(spec.get("cluster") or ""), str(spec.get("binding") or "")
        w = self.desired.get(cluster, {}).get(binding)
        if w is None or w.remove or w.hash != spec.get("hash"):
            return
        res = self._work_result(w, new)
        if res.ok != (self.results.get((cluster, binding)) or Result("", False)).ok or not res.ok:
            self.results[(cluster, binding)] = res
            self.controller.queue.add(binding)
        main = w.manifests[-1] if w.manifests else None
        if main is None or main.get("kind") not in M.WORKLOAD_KINDS:
            return
        ref = Ref.of(main)
        for m in (new.get("status") or {}).get("manifests") or []:
            if not isinstance(m, dict) or m.get("status") is None:
                continue
            if (m.get("apiVersion"), m.get("kind"), m.get("namespace") or "", m.get("name")) == \
                    (ref.api_version, ref.kind, ref.namespace, ref.name):
                seen = {"kind": ref.kind, "status": m["status"],
                        "metadata": {"generation": m.get("generation") or 1,
                                     "annotations": {M.ANN_HASH: m.get("manifestHash") or ""}}}
                self._observe(cluster, binding, seen)

    # ------------------------------------------------------------------ member status
    def _observe(self, cluster: str, binding: str, obj: Obj) -> None:
        obs = observe(obj)
        prev = self.observed.get((cluster, binding))
        if prev is None or prev[0] != obs:
            self.observed[(cluster, binding)] = (obs, self.clock())
            self.controller.queue.add(binding)

    async def _poll_status(self, cluster: str) -> None:
        """List the member's managed workloads now and then: status, and copies that went missing."""
        cost = 0.0
        while True:
            # never more than ~10 % of the time listing: a big member is polled less often
            await asyncio.sleep(max(self.settings.statusPollSeconds, cost * 10))
            started = time.monotonic()
            try:
                await self.poll_once(cluster)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status poll of %s failed", cluster)
            cost = time.monotonic() - started

    async def poll_once(self, cluster: str) -> None:
        tracked = dict(self.tracked.get(cluster) or {})
        kinds = sorted({(r.api_version, r.kind) for r in tracked.values() if r.kind in M.WORKLOAD_KINDS})
        client = self.clients.cached(cluster)
        if not kinds or client is None or client.state.condition == "NotReady":
            return
        for api_version, kind in kinds:
            started = self.clock()
            try:
                items = await client.list_objects(api_version, kind, label_selector=M.MANAGED_SELECTOR)
            except (MemberUnavailable, MemberError):
                return
            seen: set[str] = set()
            for it in items:
                b = ((it.get("metadata") or {}).get("annotations") or {}).get(M.ANN_BINDING)
                if not b or tracked.get(b) != Ref.of(it):
                    continue
                seen.add(b)
                self.owned.setdefault(cluster, set()).add(Ref.of(it))
                self._observe(cluster, b, it)
            for b, ref in tracked.items():
                if ref.kind != kind or b in seen:
                    continue
                w = self.desired.get(cluster, {}).get(b)
                res = self.results.get((cluster, b))
                if w is not None and not w.remove and res is not None and res.ok and res.hash == w.hash \
                        and res.at < started:
                    log.info("%s: %s is missing in the member; applying it again", cluster, ref)
                    self.results[(cluster, b)] = replace(res, ok=False, hash="")
                    self.owned.get(cluster, set()).discard(ref)
                    self.syncer(cluster).queue.add(b)


def _parse(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
