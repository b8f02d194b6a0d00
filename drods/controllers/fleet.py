"""What every member-cluster controller reads: the member fleet as the store holds it.

The clusters, Bindings, Works, ClusterOverridePolicies, pending cleanups and workload templates come
from the manager's shared informers (one watch per prefix however many controllers read it); the
member clients are built from the clusters' specs. On top of them: the indexes the controllers
look things up by (a binding's Works, a cluster's Works, the bindings placed on a cluster) and the
objects each member is known to hold with DRO-DS's label. Works are cached as records without their
manifests (`drods.controllers.work_record`); what needs a Work whole reads it from the store
(``work_object``). Everything here can be rebuilt from the store, which is how a new leader resumes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drods.controllers.apply_records import ApplyRecords
from drods.controllers.copy_versions import CopyVersions
from drods.controllers.work_record import RecentWorks, WorkRecord, decode_work, with_status
from drods.machinery.informer import Informer
from drods.machinery.shared import decode_template
from drods.machinery.tasks import yielding
from drods.members.clients import MemberClients, is_pull
from drods.model import member_status as ms
from drods.model import reachability
from drods.model.conditions import condition
from drods.model.detection import karmada_policy_key
from drods.model.interpreter import Interpreter
from drods.model.keys import CLEANUP_PREFIX, CLUSTER_EVENTS_PREFIX, STATUS_PREFIX
from drods.model.kinds import (
    ALL_KINDS,
    BINDING,
    CLUSTER,
    CLUSTER_OVERRIDE_POLICY,
    CLUSTER_TAINT_POLICY,
    CUSTOM_RESOURCE_DEFINITION,
    CUSTOM_RESOURCES_PREFIX,
    FEDERATED_RESOURCE_QUOTA,
    INTERPRETER_CUSTOMIZATION_KINDS,
    KARMADA_OVERRIDE_KINDS,
    KARMADA_PROPAGATION_KINDS,
    REMEDY,
    TEMPLATE_KINDS,
    WORK,
    WORKLOAD_REBALANCER,
)
from drods.model.namespaces import NAMESPACE
from drods.model.reachability import Reachability
from drods.model.timefmt import parse_rfc3339
from drods.model.work import Ref
from drods.registry.catalog import KindCatalog
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.store import CasFailed, KeyValue, Store

if TYPE_CHECKING:
    from drods.machinery.manager import Manager

Obj = dict[str, Any]


@dataclass(frozen=True)
class MemberInformers:
    """The shared informers the member controllers read."""

    clusters: Informer
    bindings: Informer
    works: Informer
    cleanups: Informer
    policies: Informer  # ClusterOverridePolicies
    # by key prefix: the workload kinds and their dependents, and every custom resource (one prefix)
    templates: dict[str, Informer]
    karmada_overrides: tuple[Informer, ...] = ()  # Karmada's OverridePolicies and ClusterOverridePolicies
    # Custom kinds and interpreter customizations, kept current by the process's informers
    # (`drods.assembly`); their informers wake the binding controller when either changes.
    catalog: KindCatalog = field(default_factory=lambda: KindCatalog(ALL_KINDS))
    interpreter: Interpreter = field(default_factory=Interpreter)
    interpretation: tuple[Informer, ...] = ()  # definitions and customizations
    taint_policies: Informer | None = None  # Karmada's ClusterTaintPolicies
    quotas: Informer | None = None  # Karmada's FederatedResourceQuotas
    rebalancers: Informer | None = None  # Karmada's WorkloadRebalancers (drods.controllers.rebalancer)
    remedies: Informer | None = None  # Karmada's Remedies (drods.controllers.remedy)
    # each cluster's newest report time (`decode_report_time`): what a pull member's health is judged by
    reports: Informer | None = None
    # pull agents' ClusterNotReachable / ClusterReachable events (`decode_reachability`)
    reachability: Informer | None = None
    recent_works: RecentWorks | None = None  # the last Works the informer decoded, whole
    # which Karmada PropagationPolicies and ClusterPropagationPolicies exist (`decode_present`): a
    # workload whose policy is gone is not propagated on its own changes (`BindingController`)
    karmada_propagation: tuple[Informer, ...] = ()
    namespaces: Informer | None = None  # which Namespaces the control plane holds (`decode_present`)

    @classmethod
    def of(cls, manager: Manager, catalog: KindCatalog | None = None,
           interpreter: Interpreter | None = None) -> MemberInformers:
        templates = {k.key_prefix(): manager.informer(k.key_prefix(), decode_template) for k in TEMPLATE_KINDS}
        templates[CUSTOM_RESOURCES_PREFIX] = manager.informer(CUSTOM_RESOURCES_PREFIX, decode_template)
        recent_works = RecentWorks()
        return cls(manager.informer(CLUSTER.key_prefix(), decode_stored),
                   manager.informer(BINDING.key_prefix(), decode_binding_kept),
                   manager.informer(WORK.key_prefix(), recent_works),
                   manager.informer(CLEANUP_PREFIX, decode_stored),
                   manager.informer(CLUSTER_OVERRIDE_POLICY.key_prefix(), decode_stored),
                   templates,
                   tuple(manager.informer(k.key_prefix(), decode_stored) for k in KARMADA_OVERRIDE_KINDS),
                   catalog or KindCatalog(ALL_KINDS), interpreter or Interpreter(),
                   tuple(manager.informer(k.key_prefix(), decode_stored)
                         for k in (CUSTOM_RESOURCE_DEFINITION, *INTERPRETER_CUSTOMIZATION_KINDS)),
                   manager.informer(CLUSTER_TAINT_POLICY.key_prefix(), decode_stored),
                   manager.informer(FEDERATED_RESOURCE_QUOTA.key_prefix(), decode_stored),
                   manager.informer(WORKLOAD_REBALANCER.key_prefix(), decode_stored),
                   manager.informer(REMEDY.key_prefix(), decode_stored),
                   manager.informer(STATUS_PREFIX, decode_report_time),
                   manager.informer(CLUSTER_EVENTS_PREFIX, decode_reachability), recent_works,
                   tuple(manager.informer(k.key_prefix(), decode_present) for k in KARMADA_PROPAGATION_KINDS),
                   manager.informer(NAMESPACE.key_prefix(), decode_present))

    def karmada_policy_gone(self, binding: Mapping[str, Any]) -> bool:
        """``binding`` was placed by a Karmada PropagationPolicy or ClusterPropagationPolicy that is gone
        (the detector keeps such a Binding as it was, karmada#601)."""
        key = karmada_policy_key(binding)
        return key is not None and bool(self.karmada_propagation) and \
            not any(key in inf.cache for inf in self.karmada_propagation)

    def all(self) -> list[Informer]:
        return [self.clusters, self.policies, *self.karmada_overrides, *self.karmada_propagation,
                *self.interpretation, self.cleanups,
                self.works, *self.templates.values(), self.bindings,
                *(i for i in (self.taint_policies, self.quotas, self.reports, self.reachability, self.namespaces)
                   if i is not None)]


def decode_present(kv: KeyValue) -> bool:
    """That an object is there, and nothing of it."""
    return True


def decode_report_time(kv: KeyValue) -> float | None:
    """The newest time a cluster's status document says the cluster reported (``status.receivedAt``
    or the document's ``publishedAt``): one number per cluster, not the document."""
    doc = ms.stored_document(kv.value)
    if doc is None:
        return None
    st = doc.get("status")
    received = st.get(ms.RECEIVED_AT) if isinstance(st, dict) else None
    times = [t for t in (parse_rfc3339(received), parse_rfc3339(doc.get("publishedAt")))
             if t is not None]
    return max(times) if times else None


def decode_reachability(kv: KeyValue) -> Reachability | None:
    """A pull agent's word on whether it reaches its member (`drods.model.reachability`); None for
    every other domain event."""
    return reachability.read(kv.key, kv.value)


class MemberFleet:
    def __init__(self, store: Store, registry: ObjectRegistry, informers: MemberInformers,
                 clients: MemberClients) -> None:
        self.store = store
        self.registry = registry
        self.informers = informers
        self.clients = clients
        self.clusters = informers.clusters
        self.bindings = informers.bindings
        self.works = informers.works
        self.cleanups = informers.cleanups
        self.synced = asyncio.Event()
        self.cluster_changed = asyncio.Event()  # wakes the cleanup loop
        # bumped when a cluster joins or leaves, changes its sync mode, or gets its first or loses its
        # last Work: what the per-cluster loops (health probes, work-status pollers) are started from,
        # so their owners look again at 10,000 clusters only when it moved
        self.membership = 0
        self.works_by_binding: dict[str, dict[str, str]] = {}  # binding → cluster → Work key
        self.works_by_cluster: dict[str, set[str]] = {}  # cluster → Work keys
        self.by_cluster: dict[str, set[str]] = {}  # cluster → bindings placed on it or with a copy there
        # binding → its clusters; a tuple (~70 bytes for three) rather than a set (~220) per binding
        self._binding_clusters: dict[str, tuple[str, ...]] = {}
        self._work_index: dict[str, tuple[str, str]] = {}  # Work key → (binding, cluster)
        # what live (not deleted) Works want on each cluster, counted: a deletion asks it per object
        self._wanted: dict[str, Counter[Ref]] = {}
        # Work key → (cluster, its objects, its main object): the record's own tuple, not a set of them
        # (~220 bytes a Work)
        self._live_refs: dict[str, tuple[str, tuple[Ref, ...], Ref | None]] = {}
        # cluster → a live Work's main object (its last manifest) → the Work keys delivering it: a member
        # copy's event finds its Works without going over the cluster's every Work
        # (a tuple: nearly always one key, ~60 bytes where a set takes ~220)
        self._by_main: dict[str, dict[Ref, tuple[str, ...]]] = {}
        self.owned: dict[str, set[Ref]] = {}  # cluster → objects known to carry our label
        self.ns_ok: dict[str, set[str]] = {}  # cluster → namespaces known to exist
        self.applies = ApplyRecords()  # push applies whose record on the Work is still coming
        self.copy_versions = CopyVersions()  # the members' copies of the Works' dependents, followed
        self._unsubscribe: list[Callable[[], None]] = []

    async def start(self) -> None:
        """Index what the informers hold and follow their changes; returns once they are synced."""
        for inf in self.informers.all():
            await inf.wait_synced()
        self._unsubscribe = [self.works.on_change(self._on_work), self.bindings.on_change(self._on_binding),
                             self.clusters.on_change(self._on_cluster)]
        async for key, obj in yielding(list(self.works.cache.items())):
            self._on_work(key, None, obj)
        async for key, obj in yielding(list(self.bindings.cache.items())):
            self._on_binding(key, None, obj)
        self.synced.set()

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    # ------------------------------------------------------------------ indexes
    def _on_work(self, key: str, old: WorkRecord | None, new: WorkRecord | None) -> None:
        self.applies.seen(key, new)
        prev = self._work_index.pop(key, None)
        if prev is not None:
            binding, cluster = prev
            self.works_by_binding.get(binding, {}).pop(cluster, None)
            if not self.works_by_binding.get(binding, True):
                self.works_by_binding.pop(binding, None)
            held = self.works_by_cluster.get(cluster)
            if held is not None and key in held:
                held.discard(key)
                self.membership += not held
        live = self._live_refs.pop(key, None)
        if live is not None:
            self._wanted[live[0]].subtract(live[1])
            if live[2] is not None:
                self._unindex_main(live[0], live[2], key)
        if new is not None:
            binding, cluster = new.binding, new.cluster
            if binding and cluster:
                self._work_index[key] = (binding, cluster)
                self.works_by_binding.setdefault(binding, {})[cluster] = key
                held = self.works_by_cluster.setdefault(cluster, set())
                self.membership += not held
                held.add(key)
                if not new.deleting:
                    refs = new.refs if len(set(new.refs)) == len(new.refs) else tuple(dict.fromkeys(new.refs))
                    self._live_refs[key] = (cluster, refs, new.main)
                    self._wanted.setdefault(cluster, Counter()).update(refs)
                    if new.main is not None:
                        mains = self._by_main.setdefault(cluster, {})
                        mains[new.main] = (*mains.get(new.main, ()), key)

    def _unindex_main(self, cluster: str, main: Ref, key: str) -> None:
        mains = self._by_main.get(cluster, {})
        keys = tuple(k for k in mains.get(main, ()) if k != key)
        if keys:
            mains[main] = keys
        else:
            mains.pop(main, None)
            if not mains:
                self._by_main.pop(cluster, None)

    def _on_binding(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key[len(BINDING.key_prefix()):]
        for c in self._binding_clusters.pop(name, ()):
            self.by_cluster.get(c, set()).discard(name)
        if new is None:
            return
        status = new.get("status") or {}
        clusters = {str(t.get("cluster")) for t in (status.get("placement") or []) + (status.get("clusters") or [])
                    if isinstance(t, dict) and t.get("cluster")}
        for c in clusters:
            self.by_cluster.setdefault(c, set()).add(name)
        self._binding_clusters[name] = tuple(clusters)

    def _on_cluster(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key[len(CLUSTER.key_prefix()):]
        self.clients.invalidate(name, new)
        if old is None or new is None or is_pull(old) != is_pull(new):
            self.membership += 1
        if new is None or (old is not None and ready_condition(old) != ready_condition(new)):
            self.ns_ok.pop(name, None)
            self.owned.pop(name, None)
        self.cluster_changed.set()

    # ------------------------------------------------------------------ lookups
    def cluster(self, name: str) -> Obj | None:
        obj: Obj | None = self.clusters.cache.get(CLUSTER.key(name))
        return obj

    def pull(self, name: str) -> bool:
        obj = self.cluster(name)
        return obj is not None and is_pull(obj)

    def unreachable(self, name: str) -> bool:
        return ready_condition(self.cluster(name)) == "False" or self.clients.ready(name) is False

    def work(self, key: str) -> WorkRecord | None:
        rec: WorkRecord | None = self.works.cache.get(key)
        return rec

    def live_works_delivering(self, cluster: str, main: Ref) -> list[WorkRecord]:
        """The cluster's Works not being deleted whose main object (last manifest) is ``main``."""
        out: list[WorkRecord] = []
        for key in self._by_main.get(cluster, {}).get(main, ()):
            rec = self.work(key)
            if rec is not None and not rec.deleting:
                out.append(rec)
        return out

    def live_works_by_main(self, cluster: str) -> dict[Ref, list[WorkRecord]]:
        """The cluster's Works not being deleted, by their main object."""
        out: dict[Ref, list[WorkRecord]] = {}
        for main in self._by_main.get(cluster, {}):
            works = self.live_works_delivering(cluster, main)
            if works:
                out[main] = works
        return out

    def dependent_kinds(self, cluster: str) -> Counter[tuple[str, str]]:
        """(apiVersion, kind) of the objects live Works want on ``cluster`` other than their main ones, counted."""
        mains = self._by_main.get(cluster, {})
        return Counter((r.api_version, r.kind) for r, n in self._wanted.get(cluster, Counter()).items()
                       if n > 0 and r not in mains)

    def live_dependents(self, cluster: str) -> list[tuple[WorkRecord, tuple[Ref, ...]]]:
        """The cluster's Works not being deleted, each with its objects other than its main one."""
        out: list[tuple[WorkRecord, tuple[Ref, ...]]] = []
        for key in self.works_by_cluster.get(cluster, ()):
            live = self._live_refs.get(key)
            rec = self.work(key) if live is not None and len(live[1]) > 1 else None
            if rec is not None and live is not None:
                out.append((rec, tuple(r for r in live[1] if r != live[2])))
        return out

    def works_of(self, binding: str) -> dict[str, WorkRecord]:
        """The binding's Works by cluster."""
        out: dict[str, WorkRecord] = {}
        for cluster, key in (self.works_by_binding.get(binding) or {}).items():
            rec = self.work(key)
            if rec is not None:
                out[cluster] = rec
        return out

    async def work_object(self, work: WorkRecord) -> Obj | None:
        """The whole Work (manifests and all) at the revision ``work`` was cached at: as the informer
        last decoded it when that is this revision, else read from the store; None when it has
        changed or gone since (the watch brings the new version)."""
        recent = self.informers.recent_works
        kv = recent.at(work.key, work.revision) if recent is not None else None
        if kv is None:
            kv = await self.store.get(work.key)
        if kv is None or kv.mod_revision != work.revision:
            return None
        return decode_stored(kv)

    async def stored_work(self, key: str) -> tuple[WorkRecord, Obj] | None:
        """The Work under ``key`` as the store holds it now (the informer may not have it yet): its
        record and the whole object; None when it is gone."""
        kv = await self.store.get(key)
        record = decode_work(kv) if kv is not None else None
        whole = decode_stored(kv) if kv is not None else None
        return (record, whole) if record is not None and whole is not None else None

    async def write_work_status(self, work: WorkRecord, status: Obj, *, body: Obj | None = None) -> int:
        """``work``'s status replaced, with a compare-and-swap on the revision it was cached at — the
        execution and work-status controllers' one write per change. ``body``: the whole Work at that
        revision when the caller read it already (else it is read here). The revision written, 0 when
        it changed meanwhile (the watch brings the new version back)."""
        whole = body if body is not None else await self.work_object(work)
        if whole is None:
            return 0
        try:
            return await self.store.put(work.key, with_status(whole, status), expect_revision=work.revision)
        except CasFailed:
            return 0

    def wants_namespace(self, cluster: str, namespace: str) -> bool:
        """Does some live Work want the Namespace, or anything in it, on ``cluster``?"""
        return any(n > 0 and (r.namespace == namespace or (r.kind == "Namespace" and r.name == namespace))
                   for r, n in self._wanted.get(cluster, Counter()).items())

    def namespace_stored(self, namespace: str) -> bool:
        """Is the Namespace on the control plane (True when this process does not follow them)?"""
        inf = self.informers.namespaces
        return inf is None or NAMESPACE.key(namespace) in inf.cache

    def wants(self, cluster: str, ref: Ref, *, exclude: str | None = None) -> bool:
        """Does some live Work (other than the one keyed ``exclude``) want ``ref`` on ``cluster``?"""
        n = self._wanted.get(cluster, Counter())[ref]
        mine = self._live_refs.get(exclude) if exclude is not None else None
        if mine is not None and ref in mine[1]:
            n -= 1
        return n > 0


def ready_condition(cluster: Obj | None) -> str | None:
    """The cluster's Ready status ("True", "False", "Unknown"), None when it has none."""
    c = condition(cluster)
    return None if c is None else str(c.get("status"))
