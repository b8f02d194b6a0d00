"""The binding controller (Karmada's): a scheduled Binding → one stored ``Work`` per target cluster.

Level-triggered over the store. A pass reads the Binding, its workload template, the template's
dependents and the ClusterOverridePolicies, plans each target cluster's manifests (that cluster's
share of the replicas, its overrides, ownership metadata), and then:

1. writes the Binding's status — the clusters' entries, phase and conditions aggregated from the
   Works (`drods.controllers.aggregate`) — and its finalizer, in one compare-and-swap write, *before*
   any Work exists that the finalizer must cover;
2. upserts the Work of every target cluster, push and pull alike, stamped with this term's
   leadership generation (`LEADER_GENERATION`; every write is fenced on it);
3. moves gracefully (S11): a cluster that left the placement keeps its Work, untouched and marked
   `REMOVING_SINCE`, until the new placement's ready replicas cover the desired count (the
   workload's, not a partial placement's), or the cluster is unreachable, or
   ``gracefulTimeoutSeconds`` passed; then its Work is deleted (the
   execution controller empties a push member first; a pull member's agent prunes by itself);
4. rolls the entries up into the workload template's status (what ``kubectl get deploy`` shows):
   by the kind's interpreter customization when it declares a status rule, else the built-in
   aggregation of the workload kinds.

Works whose Binding is gone are deleted, so a crash between steps leaves nothing orphaned. Status
ownership of the Binding is in `drods.model.binding`: the scheduler writes the placement, this
controller ``clusters[]`` and the propagation phases.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from drods.controllers import aggregate
from drods.controllers import manifests as M
from drods.controllers.fleet import MemberFleet, ready_condition
from drods.controllers.manifests import ManifestSet, Target
from drods.controllers.overrides import OverrideError
from drods.controllers.pod_status import pod_status
from drods.controllers.quota_assignments import is_quota_owner
from drods.controllers.settings import MemberSettings
from drods.controllers.status import declared_status, template_status
from drods.controllers.work_record import WorkRecord
from drods.errors import AlreadyExists, ApiError, Conflict, NotFound
from drods.machinery.controller import Controller
from drods.machinery.event_log import EventLog
from drods.machinery.informer import subscribed
from drods.machinery.own_writes import OwnWrites
from drods.machinery.tasks import yielding
from drods.members.clients import is_pull
from drods.model import jsondoc
from drods.model.annotations import LEADER_GENERATION, MANAGED_BY, REMOVING_SINCE
from drods.model.app_failover import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    GracefulEvictionTask,
    eviction_tasks,
    label_state,
    purge_due,
)
from drods.model.binding import PROPAGATION_FINALIZER
from drods.model.builtin_fields import model_name, schema_status
from drods.model.detection import karmada_policy_key
from drods.model.dispatch import suspended
from drods.model.events import involved_of
from drods.model.interpreter import DependencyRef, Interpretation, StatusRule
from drods.model.karmada import KarmadaOverrideSpec
from drods.model.kinds import BINDING, CLUSTER_OVERRIDE_POLICY, CUSTOM_RESOURCES_PREFIX, WORK, Kind, by_kind
from drods.model.policy import ClusterOverridePolicySpec
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.model.work import EXECUTION_FINALIZER, work_labels, work_name
from drods.store import CasFailed, Compare, Put
from drods.store.cas import read_modify_write

log = logging.getLogger(__name__)
Obj = dict[str, Any]
EMPTY_STATUS = jsondoc.dumps({})


def encode(obj: Obj) -> bytes:
    body = dict(obj)
    body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return jsondoc.dumps(body)


def rev(obj: Obj | None) -> int:
    return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)


# A pass that wrote Works rolls the template's status up at the latest this many status windows
# (`statusCoalesceSeconds`) later, should no member report bring it back sooner.
STATUS_FALLBACK_WINDOWS = 4


@dataclass(slots=True)
class _Retiring:
    """The Works of clusters no longer wanted, as one pass sorts them."""

    to_delete: dict[str, WorkRecord] = field(default_factory=dict)
    to_mark: dict[str, WorkRecord] = field(default_factory=dict)  # still draining: marked as removing
    removing: list[Obj] = field(default_factory=list)  # their entries on the Binding's status
    requeue: float | None = None  # when the first graceful timeout runs out


class BindingController:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, *, generation: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.store = fleet.store
        self.registry = fleet.registry
        self.settings = settings
        self.generation = generation
        self.clock = clock
        self.templates = fleet.informers.templates
        self.catalog = fleet.informers.catalog
        self.interpreter = fleet.informers.interpreter
        self.controller = Controller("binding", self.reconcile, workers=settings.bindingWorkers)
        self.by_template: dict[str, set[str]] = {}
        self.by_dep: dict[tuple[str, str, str], set[str]] = {}
        self._deps_of: dict[str, set[tuple[str, str, str]]] = {}
        self.by_ns: dict[str, set[str]] = {}
        self._indexed: dict[str, tuple[str | None, str | None]] = {}
        # our own writes of Bindings (by name) and templates' status (by key): their watch events are echoes
        self._own_bindings = OwnWrites()
        self._own_templates = OwnWrites()
        self._own_work_hash: dict[str, str] = {}  # Work key -> the spec hash this controller last wrote
        self._plans: dict[str, tuple[int, dict[str, ManifestSet | OverrideError]]] = {}
        self._policies: list[tuple[str, ClusterOverridePolicySpec]] = []
        self._made_again: set[str] = set()  # Karmada policies (re)made since the last pass over the Bindings
        self._policy_epoch = 0
        self.events = EventLog(self.store, "drods-controllers")

    def _tell(self, b: Obj, old: Obj, new: Obj) -> None:
        """An Event on the workload when its copies turn failed (or fail anew) or all run: what
        ``kubectl describe`` shows beside its scheduling (Karmada's SyncFailed / SyncSucceed)."""
        phase, before = new.get("phase"), old.get("phase")
        script = _script_failure(new)
        if script is not None and script != _script_failure(old):  # an interpreter script fails (anew)
            self.events.tell(involved_of(b), "Warning", "InterpreterScriptFailed", script)
        if phase == "Failed":
            message = _apply_failure(new)
            if message is not None and (before != "Failed" or _apply_failure(old) != message):
                self.events.tell(involved_of(b), "Warning", "SyncFailed", message)
        elif phase == "Running" and before != "Running":
            clusters = sorted(str(e.get("cluster")) for e in new.get("clusters") or []
                              if isinstance(e, dict) and e.get("applied") and not e.get("removing"))
            self.events.tell(involved_of(b), "Normal", "SyncSucceed",
                             f"applied and ready in {len(clusters)} cluster(s): {', '.join(clusters)}")

    async def run(self) -> None:
        f = self.fleet
        with subscribed((f.bindings, self._on_binding), (f.works, self._on_work), (f.clusters, self._on_cluster),
                        (f.informers.policies, self._on_policy),
                        *((inf, self._on_policy) for inf in f.informers.karmada_overrides),
                        *((inf, self._on_policy) for inf in f.informers.interpretation),
                        *((inf, self._on_propagation_policy) for inf in f.informers.karmada_propagation),
                        *((inf, self._on_template) for inf in self.templates.values())):
            self._on_policy("", None, None)
            async for key, obj in yielding(list(f.bindings.cache.items())):
                self._on_binding(key, None, obj)
            for binding in list(f.works_by_binding):  # Works of bindings that are gone
                self.controller.queue.add(binding)
            await self.controller.run()

    # ------------------------------------------------------------------ what to reconcile
    def _enqueue(self, names: set[str] | None) -> None:
        for n in names or ():
            self.controller.queue.add(n)

    def _on_policy(self, key: str, old: Any, new: Any) -> None:
        self._policy_epoch += 1
        informers = self.fleet.informers
        self._policies = [p for p in (_policy(o) for o in informers.policies.cache.values()) if p]
        self._policies += [p for inf in informers.karmada_overrides for p in map(_karmada_policy, inf.cache.values())
                           if p]
        self._enqueue({k[len(BINDING.key_prefix()):] for k in self.fleet.bindings.cache})

    def _on_binding(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key[len(BINDING.key_prefix()):]
        echo = new is not None and self._own_bindings.is_echo(name, rev(old) if old is not None else None, rev(new))
        prev = self._indexed.pop(name, None)
        if prev is not None:
            tkey, ns = prev
            if tkey:
                self.by_template.get(tkey, set()).discard(name)
            if ns:
                self.by_ns.get(ns, set()).discard(name)
        if new is not None:
            res = (new.get("spec") or {}).get("resource") or {}
            kind = self.catalog.by_kind(str(res.get("apiVersion")), str(res.get("kind"))) if res else None
            tkey = ns = None
            if kind is not None and res.get("name"):
                ns = (res.get("namespace") or "default") if kind.namespaced else None
                tkey = kind.key(str(res["name"]), ns)
                self.by_template.setdefault(tkey, set()).add(name)
                if ns:
                    self.by_ns.setdefault(ns, set()).add(name)
            self._indexed[name] = (tkey, ns)
        if not echo:
            self.controller.queue.add(name)

    def _on_work(self, key: str, old: WorkRecord | None, new: WorkRecord | None) -> None:
        work = new or old
        binding = work.binding if work is not None else ""
        ours = new is not None and self._own_work_hash.get(key) == new.hash
        if new is None or ours:
            self._own_work_hash.pop(key, None)  # only the first event carrying our write is its echo
        echo = ours and new is not None and self._own_spec_write(old, new)
        if not binding or is_quota_owner(binding) or echo:
            return  # a quota's Works are its own (quota_assignments)
        if old is not None and new is not None and _status_alone(old, new):
            self.controller.queue.add_after(binding, self.settings.statusCoalesceSeconds)
        else:
            self.controller.queue.add(binding)

    def _own_spec_write(self, old: WorkRecord | None, new: WorkRecord) -> bool:
        """``new`` carries this controller's own write of a push member's Work spec and nothing else
        moved: the pass that wrote it already rolled the status up as it stands (the Work waits to be
        applied either way). A pull member's rolls up to "waiting for the agent", so it is news."""
        if self.fleet.pull(new.cluster):
            return False
        if old is None:
            return new.encoded_status == EMPTY_STATUS and not new.deleting
        return (old.hash != new.hash and old.packed_status == new.packed_status and old.deleting == new.deleting
                and old.removing_since == new.removing_since)

    def _on_cluster(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and _read_of_cluster(old) == _read_of_cluster(new):
            return  # a heartbeat or a resource summary: nothing a Binding's pass reads of a cluster
        self._enqueue(self.fleet.by_cluster.get(key.rsplit("/", 1)[-1]))

    def _on_template(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            self._own_templates.forget(key)
        elif self._own_templates.is_echo(key, rev(old) if old is not None else None, rev(new)):
            return  # our own status write
        self._enqueue(self._held(self.by_template.get(key)) if new is not None else self.by_template.get(key))
        obj = new or old
        if obj is None:
            return
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        self._enqueue(self.by_dep.get((str(kind), ns, name)))  # pod-template and named dependents
        self._enqueue(self.by_dep.get((str(kind), ns, "*")))  # dependents by label selector
        if kind in ("Service", "Ingress"):
            self._enqueue(self.by_ns.get(ns))

    def _on_propagation_policy(self, key: str, old: Any, new: Any) -> None:
        """A Karmada policy made again under the name of one that was deleted: the Bindings it placed
        take the workload as it is now (what changed while no policy held it), though their spec, which
        names the same policy, does not change."""
        if old is not None or new is None:
            return
        if not self._made_again:  # one pass over the Bindings for a burst of them (a relist: every policy)
            asyncio.get_running_loop().call_soon(self._wake_made_again)
        self._made_again.add(key)

    def _wake_made_again(self) -> None:
        keys, self._made_again = self._made_again, set()
        self._enqueue({k[len(BINDING.key_prefix()):] for k, b in list(self.fleet.bindings.cache.items())
                       if b is not None and karmada_policy_key(b) in keys})

    def _held(self, names: set[str] | None) -> set[str]:
        """Of ``names``, the Bindings a policy still holds: while none does (a Karmada policy deleted), a
        change to the workload is not propagated, as in Karmada, where only the policy's detector would
        carry it to the Binding; the next pass the Binding itself asks for renders it."""
        informers = self.fleet.informers
        if not names or not informers.karmada_propagation:
            return names or set()
        cache = self.fleet.bindings.cache
        return {n for n in names if not informers.karmada_policy_gone(cache.get(BINDING.key(n)) or {})}

    # ------------------------------------------------------------------ lookups
    def _templates_of(self, kind: Kind) -> Mapping[str, Obj] | None:
        """The informer cache holding ``kind``'s templates (custom resources share one)."""
        inf = self.templates.get(CUSTOM_RESOURCES_PREFIX if kind.custom is not None else kind.key_prefix())
        return inf.cache if inf is not None else None

    def template_of(self, ref: Obj | None) -> tuple[Kind | None, Obj | None]:
        if not ref:
            return None, None
        kind = self.catalog.by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        cache = self._templates_of(kind) if kind is not None else None
        if kind is None or cache is None or not ref.get("name"):
            return kind, None
        ns = (ref.get("namespace") or "default") if kind.namespaced else None
        return kind, cache.get(kind.key(str(ref["name"]), ns))

    def _named(self, api_version: str, kind_name: str, ns: str, name: str) -> Obj | None:
        """An object a workload names (an interpreter dependency rule), from the templates."""
        kind = self.catalog.by_kind(api_version, kind_name)
        cache = self._templates_of(kind) if kind is not None else None
        if kind is None or cache is None:
            return None
        return cache.get(kind.key(name, ns if kind.namespaced else None))

    def _selected(self, ref: DependencyRef) -> list[Obj]:
        """The objects of ``ref``'s kind in its namespace its label selector matches."""
        kind = self.catalog.by_kind(ref.api_version, ref.kind)
        cache = self._templates_of(kind) if kind is not None else None
        if kind is None or cache is None or ref.selector is None:
            return []
        prefix = kind.key_prefix(ref.namespace if kind.namespaced else None)
        found = {key: o for key, o in _under(cache, prefix) if o.get("kind") == ref.kind
                 and ref.selector.matches((o.get("metadata") or {}).get("labels") or {})}
        return [found[key] for key in sorted(found)]

    def _lookup(self, kind: str, ns: str, name: str) -> Obj | None:
        k = by_kind("v1", kind)
        if k is None:
            return None
        obj: Obj | None = self.templates[k.key_prefix()].cache.get(k.key(name, ns))
        return obj

    def _services(self, ns: str) -> list[Obj]:
        return self._in_namespace("v1", "Service", ns)

    def _ingresses(self, ns: str) -> list[Obj]:
        """The namespace's Ingresses a workload's Services may carry along — not those a component
        delivers by a Binding of its own (a MultiClusterIngress's: it goes only where its backends are
        healthy, which following the workload everywhere would undo)."""
        return [o for o in self._in_namespace("networking.k8s.io/v1", "Ingress", ns)
                if not ((o.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY)]

    def _in_namespace(self, api_version: str, kind_name: str, ns: str) -> list[Obj]:
        k = by_kind(api_version, kind_name)
        if k is None or k.key_prefix() not in self.templates:
            return []
        prefix = k.key_prefix(ns)
        return [o for _, o in _under(self.templates[k.key_prefix()].cache, prefix)]

    def _index_deps(self, name: str, looked: set[tuple[str, str, str]]) -> None:
        old = self._deps_of.get(name, set())
        if old == looked:
            return
        for d in old - looked:
            self.by_dep.get(d, set()).discard(name)
        for d in looked - old:
            self.by_dep.setdefault(d, set()).add(name)
        self._deps_of[name] = looked

    # ------------------------------------------------------------------ the pass
    async def reconcile(self, key: Any) -> float | None:
        """One pass over the Binding named ``key``: first over the informer's copy (its writes are
        compare-and-swaps on that copy's revision), after a conflict over what the store holds."""
        name, store_key = str(key), BINDING.key(str(key))
        if is_quota_owner(name):
            return None  # a FederatedResourceQuota's Works (on a cluster's change): not a Binding's
        cached = self.fleet.bindings.cache.get(store_key)

        async def attempt(n: int) -> float | None:
            if n == 0 and cached is not None:
                b: Obj | None = {**cached, "metadata": dict(cached["metadata"])}
                revision = rev(cached)
            else:
                kv = await self.store.get(store_key)
                b, revision = (jsondoc.loads(kv.value), kv.mod_revision) if kv is not None else (None, 0)
            if b is None:
                await self._delete_works(name, self.fleet.works_of(name))
                self._forget(name)
                return None
            outcome = await self._reconcile_once(name, b, revision, first=n == 0)
            if outcome == "conflict":
                raise CasFailed(store_key, None)
            return outcome if isinstance(outcome, float) else None

        try:
            return await read_modify_write(attempt)
        except Conflict:
            return 0.2  # still contended: the queue brings it back

    def _plan(self, name: str, uid: str, kind: Kind | None, template: Obj, wanted: dict[str, int],
              roles: dict[str, str] | None = None, conflict: str = "Abort",
              labels: dict[str, str] | None = None, *, preserve: bool = False,
              complete: bool = False) -> dict[str, ManifestSet | OverrideError]:
        """The binding's plan per wanted cluster: with its manifests when planned now (or ``complete``
        is asked for), else the kept summary of an earlier pass with the same inputs. ``labels`` (the
        state an application failover preserved) are added to the workload's own labels."""
        if labels:
            meta = template.get("metadata") or {}
            template = {**template, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), **labels}}}
        how = self.interpreter.of(str(template.get("apiVersion")), str(template.get("kind")))
        deps, looked = M.dependents(template, self._lookup, self._services, self._ingresses, how=how,
                                    named=self._named, matching=self._selected)
        self._index_deps(name, looked)
        definition = self.catalog.definition(kind) if kind is not None else None
        if definition is not None:  # the custom kind's definition goes first, so the member serves the kind
            deps = [definition, *deps]
        targets = [Target(c, s, dict(((self.fleet.cluster(c) or {}).get("metadata") or {}).get("labels") or {}),
                          (roles or {}).get(c), _topology(self.fleet.cluster(c)), conflict, preserve)
                   for c, s in sorted(wanted.items())]
        # kept as a hash: the inputs themselves were ~1 KB a Binding, 100 MB at 100,000
        inputs = hash((uid, rev(template), conflict, preserve, tuple(sorted((labels or {}).items())),
                       tuple((t.cluster, t.share, tuple(sorted(t.labels.items())), t.role,
                              tuple(sorted(t.fields.items()))) for t in targets),
                       tuple(rev(d) for d in deps), self._policy_epoch, self.interpreter.epoch))
        cached = self._plans.get(name)
        if cached is not None and cached[0] == inputs and not complete:
            return cached[1]
        plans = M.plan(name, uid, template, targets, deps, self._policies, how)
        self._plans[name] = (inputs, {c: p.summary() if isinstance(p, ManifestSet) else p for c, p in plans.items()})
        return plans

    async def _reconcile_once(self, name: str, b: Obj, revision: int, *, first: bool = True) -> float | str | None:
        """``b`` is this pass's own copy (its top level and metadata may be changed); ``first``: no
        attempt of this pass met a conflict yet (the informer's Works are trusted). The pass's steps:
        the wanted clusters, their plans, the status roll-up, the Works to retire, the Binding's own
        status and finalizer, then the Works and the template's status."""
        meta, spec, status = b["metadata"], b.get("spec") or {}, dict(b.get("status") or {})
        deleting = bool(meta.get("deletionTimestamp"))
        kind, template = self.template_of(spec.get("resource"))
        if template is not None and (template.get("metadata") or {}).get("deletionTimestamp"):
            template = None
        active = not deleting and template is not None
        tkind = str(template.get("kind")) if template else str((spec.get("resource") or {}).get("kind") or "")
        how = self.interpreter.of(kind.api_version, kind.kind) if kind is not None else None
        divisible = how.divisible if how is not None else tkind in M.REPLICA_KINDS
        wanted, roles = self._wanted(status, divisible) if active else ({}, {})
        plans = self._plan(name, str(meta.get("uid") or ""), kind, template, wanted, roles,
                           str(spec.get("conflictResolution") or "Abort"), label_state(spec),
                           preserve=bool(spec.get("preserveResourcesOnDeletion"))) \
            if wanted and template is not None else {}
        works = self.fleet.works_of(name)
        previous = {str(e["cluster"]): e for e in status.get("clusters") or []
                    if isinstance(e, dict) and e.get("cluster")}
        pull = {c: self.fleet.pull(c) for c in set(wanted) | set(works)}
        rule = how.status if how is not None and not how.built_in else None
        rollup = aggregate.current_entries(tkind, wanted, plans, works, previous, pull,
                                           self.settings.applyFailureThreshold, rule)
        now = self.clock()
        counts_ready = tkind in M.REPLICA_KINDS or (rule is not None and rule.ready is not None)
        # scaled to zero: no copy is wanted anywhere, so none waits for another to be ready first
        zero = active and divisible and not wanted and status.get("phase") not in (None, "", "Pending") and \
            int(spec.get("replicas", 1) or 0) == 0
        # a divided binding's placement may be partial (the rest pending): an old copy waits for the
        # replicas the workload asks for, not only the ones placed so far (Karmada's graceful eviction)
        topology = ((spec.get("placement") or {}).get("statefulTopology")) is not None  # its own counts
        pending = max(0, int(spec.get("replicas", 0) or 0) - rollup.placed) if divisible and not topology else 0
        # the copies' own counts (overrides applied) and the replicas not placed yet
        covered = zero or rollup.all_applied and (not counts_ready or
                                                  rollup.ready_applied >= rollup.desired + pending)
        retiring = self._retiring(works, wanted, previous, tkind, now, active=active, covered=covered,
                                  evictions={t.fromCluster: t for t in eviction_tasks(spec)})
        failing = _script_failures(how, template) if active and template is not None else []
        located = rollup.entries + retiring.removing
        aggregate.fill_location(located, {str(e["cluster"]): (self.fleet.cluster(str(e["cluster"])) or {}).get("spec")
                                          or {} for e in located})
        new_status = aggregate.binding_status(status, tkind, rollup, retiring.removing, active=active,
                                              now=rfc3339(now), script_failures=failing,
                                              suspended=frozenset(c for c in wanted if suspended(spec, c)),
                                              pending=pending)
        gone = deleting and not works
        # the Works only with (or after) the finalizer that covers them: in one transaction with the
        # Binding's own write when it has one, so a new Binding's Works reach the members a store
        # round trip sooner
        change = _binding_change(b, status, new_status, deleting=deleting, gone=gone, holds=bool(wanted or works))
        if change == "delete":
            try:
                await self.store.delete(BINDING.key(name), expect_revision=revision)
            except CasFailed:
                return "conflict"
            if template is not None and kind is not None and rule is None and not (how and how.scripts_status):
                # no longer placed (its policy went): the template must not go on showing the copies
                await self._write_template_status(kind, template, tkind, [], False)
        suspend = frozenset(c for c in plans if suspended(spec, c))
        if any(isinstance(p, ManifestSet) and not p.complete and not _same(name, c, p, works.get(c), c in suspend)
               for c, p in plans.items()) and template is not None:
            plans = self._plan(name, str(meta.get("uid") or ""), kind, template, wanted, roles,
                               str(spec.get("conflictResolution") or "Abort"), label_state(spec),
                               preserve=bool(spec.get("preserveResourcesOnDeletion")),
                               complete=True)  # to write them
        batch = await self._work_batch(name, [(c, p, works.get(c)) for c, p in sorted(plans.items())
                                              if isinstance(p, ManifestSet)], suspend, absent_known=first)
        again = batch.again
        if change == "put":
            written = await self._store_binding(name, b, revision, batch)
            if written is None:
                return "conflict"
            self._tell(b, status, new_status)
            if not written:
                again = await self._write_works(name, batch) or again
        elif batch.items:
            again = await self._write_works(name, batch) or again
        for work in retiring.to_mark.values():
            again = await self._mark_removing(work, rfc3339(now)) or again
        await self._delete_works(name, retiring.to_delete)
        # The template's status waits while nothing is decided yet (the decision brings the pass
        # back) and on a pass that writes Works (their members' reports bring it back, or the
        # window does): what it would say then is superseded a moment later, one write more each.
        undecided = not (status.get("scheduledTime") or status.get("placement")
                         or status.get("phase") not in (None, "", "Pending"))
        if template is not None and not deleting and kind is not None and not undecided and not batch.items:
            if how is not None and how.scripts_status:
                again = await self._write_scripted_status(kind, template, how, works, plans) or again
            elif rule is not None:
                again = await self._write_declared_status(kind, template, rule, works, plans) or again
            elif tkind == "Pod":
                again = await self._write_pod_status(kind, template, works, plans) or again
            else:
                again = await self._write_template_status(kind, template, tkind,
                                                          rollup.entries + retiring.removing,
                                                          rollup.all_applied, pending) or again
        if gone:
            self._forget(name)
        requeue = 0.2 if again else retiring.requeue
        if batch.items and template is not None and not deleting:
            # the Works' first reports bring the pass back within the window; this, should none come
            fallback = STATUS_FALLBACK_WINDOWS * self.settings.statusCoalesceSeconds
            requeue = fallback if requeue is None else min(requeue, fallback)
        return requeue

    def _wanted(self, status: Obj, divisible: bool) -> tuple[dict[str, int], dict[str, str]]:
        """The placement's registered clusters with their shares (a divisible kind's empty shares
        dropped), and a stateful topology's Primary / Replica role per cluster (F3)."""
        wanted: dict[str, int] = {}
        roles: dict[str, str] = {}
        for t in status.get("placement") or []:
            if not isinstance(t, dict) or not t.get("cluster"):
                continue
            c, share = str(t["cluster"]), int(t.get("replicas") or 0)
            if self.fleet.cluster(c) is None or (divisible and share <= 0):
                continue
            wanted[c] = share
            if isinstance(t.get("role"), str):
                roles[c] = str(t["role"])
        return wanted, roles

    def _retiring(self, works: dict[str, WorkRecord], wanted: dict[str, int], previous: dict[str, Any], tkind: str,
                  now: float, *, active: bool, covered: bool,
                  evictions: dict[str, GracefulEvictionTask] | None = None) -> _Retiring:
        """The Works of clusters no longer wanted: delete now (unregistered, unreachable, inactive,
        covered elsewhere or past the graceful timeout) or mark as removing and look again later. A
        cluster an application failover moved the binding off goes as its task's ``purgeMode`` says."""
        out = _Retiring()
        for c, work in sorted(works.items()):
            if c in wanted:
                continue
            if self.fleet.cluster(c) is None or work.deleting:
                out.to_delete[c] = work  # unregistered, or already being emptied
                continue
            since = parse_rfc3339(work.removing_since) or now
            task = (evictions or {}).get(c)
            if task is not None and active:
                self._retire_evicted(out, c, work, task, now, covered)
                out.removing.append(aggregate.removing_entry(c, tkind, work, previous.get(c), rfc3339(since)))
                continue
            timed_out = now - since >= self.settings.gracefulTimeoutSeconds
            if not active or self.fleet.unreachable(c) or covered or timed_out:
                out.to_delete[c] = work
            else:
                out.to_mark[c] = work
                left = self.settings.gracefulTimeoutSeconds - (now - since)
                out.requeue = min(30.0 if out.requeue is None else out.requeue, max(left, 0.5))
            out.removing.append(aggregate.removing_entry(c, tkind, work, previous.get(c), rfc3339(since)))
        return out

    @staticmethod
    def _retire_evicted(out: _Retiring, cluster: str, work: WorkRecord, task: GracefulEvictionTask, now: float,
                        covered: bool) -> None:
        """The old copy of an application failover: deleted when its purge is due, else kept (marked
        as removing) and looked at again when its grace period ends (never, for ``Never``)."""
        created = parse_rfc3339(task.creationTimestamp)
        if purge_due(task, now, created, covered):
            out.to_delete[cluster] = work
            return
        out.to_mark[cluster] = work
        if task.purgeMode != "Never":
            grace = task.gracePeriodSeconds or DEFAULT_GRACE_PERIOD_SECONDS
            left = grace - (now - (created if created is not None else now))
            out.requeue = min(30.0 if out.requeue is None else out.requeue, max(left, 0.5))

    async def _store_binding(self, name: str, b: Obj, revision: int, batch: _WorkBatch) -> bool | None:
        """Store the Binding ``b`` over ``revision``, with ``batch``'s Works in the same transaction
        when they fit in one: True when the Works went with it, False when they are still to write,
        None on a conflict (nothing written)."""
        key = BINDING.key(name)
        made: int | None = None
        self._own_bindings.writing(name, revision)
        try:
            if batch.items:
                try:
                    made = await self.registry.upsert_with(
                        batch.items, [(Compare(key, "mod", "=", revision), Put(key, encode(b)))],
                        trusted=True, current=batch.held, absent=batch.absent)
                except Conflict:
                    return None  # the Binding or a Work moved: the pass starts again from the store
                except ApiError:
                    made = None  # a Work the registry refuses: the Binding goes alone, its Works fail apart
                if made is not None:
                    return True
            try:
                made = await self.store.put(key, encode(b), expect_revision=revision)
            except CasFailed:
                return None
            return False
        finally:
            self._own_bindings.wrote(name, made)

    # ------------------------------------------------------------------ Works
    def _work_body(self, binding: str, cluster: str, p: ManifestSet, current: WorkRecord | None,
                   suspend: bool = False) -> Obj:
        meta: Obj = {"name": work_name(binding, cluster), "labels": work_labels(binding, cluster),
                     "annotations": {LEADER_GENERATION: str(self.generation)}}
        if not self.fleet.pull(cluster):
            meta["finalizers"] = [EXECUTION_FINALIZER]
        if current is not None:
            meta["resourceVersion"] = str(current.revision)
        return {"apiVersion": WORK.api_version, "kind": WORK.kind, "metadata": meta,
                "spec": {"cluster": cluster, "binding": binding, "manifests": p.manifests, "hash": p.hash,
                         **({"suspendDispatching": True} if suspend else {})}}

    async def _work_batch(self, binding: str, wanted: list[tuple[str, ManifestSet, WorkRecord | None]],
                          suspend: frozenset[str] = frozenset(), *, absent_known: bool = True) -> _WorkBatch:
        """The binding's Works that differ from what the informer holds, to create or update together
        (each guarded by the revision its informer copy has; one it holds nothing of, by its absence —
        unless not ``absent_known``: after a conflict the informer may trail, and the store is read).
        The Works of the ``suspend`` clusters are written marked ``suspendDispatching`` (kept, not applied)."""
        out = _WorkBatch()
        for cluster, p, current in wanted:
            if current is not None:
                if current.deleting:
                    out.again = True
                    continue  # a deleted Work is recreated once it is gone
                if _same(binding, cluster, p, current, cluster in suspend):
                    continue
            if not p.complete:  # a kept summary has no manifests to write: the pass plans again
                out.again = True
                continue
            key = WORK.key(work_name(binding, cluster))
            if current is not None:
                whole = await self.fleet.work_object(current)  # the update's base, at the cached revision
                if whole is None:
                    out.again = True  # changed meanwhile: the watch brings it back
                    continue
                out.held[current.key] = whole
            elif absent_known:
                out.absent.add(key)
            out.items.append((WORK, self._work_body(binding, cluster, p, current, cluster in suspend)))
            self._own_work_hash[key] = p.hash  # before: its echo may come first
        return out

    async def _write_works(self, binding: str, batch: _WorkBatch) -> bool:
        """Write ``batch``'s Works in one transaction; True when they must be tried again."""
        if not batch.items:
            return False
        try:
            await self.registry.batch_upsert(batch.items, results=False, trusted=True, current=batch.held,
                                             absent=batch.absent)
        except (NotFound, Conflict, AlreadyExists):
            return True
        except ApiError as e:
            log.warning("writing the Works of %s: %s", binding, e.message)
            return True
        return False

    async def _mark_removing(self, work: WorkRecord, since: str) -> bool:
        if work.removing_since:
            return False
        body = await self.fleet.work_object(work)
        if body is None:
            return True  # changed meanwhile: look again
        body["metadata"].setdefault("annotations", {})[REMOVING_SINCE] = since
        body["metadata"]["annotations"][LEADER_GENERATION] = str(self.generation)
        try:
            await self.registry.update(WORK, body)
        except (Conflict, AlreadyExists):
            return True
        except ApiError:
            return False
        return False

    async def _delete_works(self, binding: str, works: dict[str, WorkRecord]) -> None:
        for work in works.values():
            if work.deleting:
                continue
            try:
                await self.registry.delete(WORK, work.name)
            except NotFound:
                pass
            except ApiError as e:
                log.warning("deleting the Work %s of %s: %s", work.name, binding, e.message)

    # ------------------------------------------------------------------ the template's status
    async def _write_template_status(self, kind: Kind, template: Obj, tkind: str, entries: list[Obj],
                                     all_applied: bool, pending: int = 0) -> bool:
        """Aggregate into the template's status (``pending``: replicas not placed); True when it must be
        tried again (conflict)."""
        if tkind not in M.WORKLOAD_KINDS:
            return False
        meta = template["metadata"]
        previous = dict(template.get("status") or {})
        new = template_status(tkind, template.get("spec") or {}, int(meta.get("generation") or 1), entries,
                              all_applied, previous, rfc3339(self.clock()), pending)
        return await self._put_template_status(kind, template, previous, new)

    async def _write_declared_status(self, kind: Kind, template: Obj, rule: StatusRule,
                                     works: dict[str, WorkRecord],
                                     plans: dict[str, ManifestSet | OverrideError]) -> bool:
        """The members' statuses added up as the kind's interpreter customization says; True when it must
        be tried again (conflict)."""
        members = {c: st for c, p in plans.items() if isinstance(p, ManifestSet)
                   and (st := aggregate.member_status(works.get(c), p.main)) is not None}
        previous = dict(template.get("status") or {})
        new = declared_status(rule, previous, members)
        return await self._put_template_status(kind, template, previous, new)

    async def _write_scripted_status(self, kind: Kind, template: Obj, how: Interpretation,
                                     works: dict[str, WorkRecord],
                                     plans: dict[str, ManifestSet | OverrideError]) -> bool:
        """The template's status by the kind's AggregateStatus script (Karmada's statusItems); left
        as it is when the script fails. True when it must be tried again (conflict)."""
        previous = dict(template.get("status") or {})
        new = how.aggregated_status(template, aggregate.status_items(works, plans))
        if new is None:
            return False
        return await self._put_template_status(kind, template, previous, new)

    async def _write_pod_status(self, kind: Kind, template: Obj, works: dict[str, WorkRecord],
                                plans: dict[str, ManifestSet | OverrideError]) -> bool:
        """A propagated Pod's status from its copies (`drods.controllers.pod_status`); True when it must
        be tried again (conflict)."""
        members = {c: st for c, p in plans.items() if isinstance(p, ManifestSet)
                   and (st := aggregate.member_status(works.get(c), p.main)) is not None}
        previous = dict(template.get("status") or {})
        return await self._put_template_status(kind, template, previous, pod_status(members))

    async def _put_template_status(self, kind: Kind, template: Obj, previous: Obj, new: Obj) -> bool:
        """Write the template's aggregated status; a built-in kind's is kept to its schema (`schema_status`:
        kubectl's apply of a saved template refuses a field the typed struct lacks)."""
        model = model_name(kind.group, kind.version, kind.kind) if kind.custom is None else None
        if model is not None:
            new = schema_status(new, model)
        if new == previous:
            return False
        meta = template["metadata"]
        key, made = kind.key(meta["name"], meta.get("namespace")), None
        self._own_templates.writing(key, int(meta["resourceVersion"]))
        try:
            out = await self.registry.update_status(kind, meta["name"], new, meta.get("namespace"),
                                                    resource_version=int(meta["resourceVersion"]), current=template)
            made = rev(out)
        except (Conflict, AlreadyExists):
            return True  # the pass is tried again: an event the write in flight hid is not lost
        except NotFound:
            return False
        finally:
            self._own_templates.wrote(key, made)
        return False

    def _forget(self, name: str) -> None:
        self._index_deps(name, set())
        self._deps_of.pop(name, None)
        self._plans.pop(name, None)
        self._own_bindings.forget(name)


@dataclass(slots=True)
class _WorkBatch:
    """A pass's Works to write: the bodies, the informer's copies of those it updates, the store keys
    of those it creates, and whether the pass must come again for Works it could not write yet."""

    items: list[tuple[Kind, Obj]] = field(default_factory=list)
    held: dict[str, Obj] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    again: bool = False


def _apply_failure(status: Obj) -> str | None:
    """What the copies' failure said (the Propagated condition's ApplyFailed message), if they failed."""
    return next((str(c.get("message")) for c in status.get("conditions") or []
                 if c.get("type") == "Propagated" and c.get("reason") == "ApplyFailed"), None)


def _script_failure(status: Obj) -> str | None:
    """What the InterpreterScriptFailed condition says, while the kind's scripts fail on the workload."""
    return next((str(c.get("message")) for c in status.get("conditions") or []
                 if c.get("type") == "InterpreterScriptFailed" and c.get("status") == "True"), None)


def _binding_change(b: Obj, status: Obj, new_status: Obj, *, deleting: bool, gone: bool,
                    holds: bool) -> Literal["same", "put", "delete"]:
    """Put the Binding's new status and propagation finalizer (kept while it ``holds`` Works, dropped
    once they are ``gone``) into ``b``: "same" (nothing to write), "put", or "delete" (its last
    finalizer went while it is being deleted)."""
    meta = b["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if gone and PROPAGATION_FINALIZER in finalizers:
        finalizers.remove(PROPAGATION_FINALIZER)
    elif not deleting and holds and PROPAGATION_FINALIZER not in finalizers:
        finalizers.append(PROPAGATION_FINALIZER)
    if new_status == status and finalizers == list(meta.get("finalizers") or []):
        return "same"
    b["status"] = new_status
    meta["finalizers"] = finalizers
    if not finalizers:
        meta.pop("finalizers", None)
    return "delete" if deleting and not finalizers else "put"


def _under(cache: Mapping[str, Obj], prefix: str) -> Iterator[tuple[str, Obj]]:
    """The cached templates whose keys start with ``prefix``, in the cache's order; only those are
    decoded (the template caches keep the rest as stored)."""
    return ((key, cache[key]) for key in list(cache) if key.startswith(prefix))


def _script_failures(how: Interpretation | None, template: Obj) -> list[str]:
    """The kind's Lua scripts failing on ``template`` (GetReplicas is run again here: the detector
    that ran it may be another process)."""
    if how is None or how.lua is None:
        return []
    how.scripted_needs(template)
    return how.script_failures(template)


def _same(binding: str, cluster: str, p: ManifestSet, work: WorkRecord | None, suspend: bool) -> bool:
    """Does the stored ``work`` hold what ``p`` would write (a deleted one is recreated once gone)?"""
    if work is None:
        return False
    if work.deleting:
        return True
    return work.hash == p.hash and work.digest == p.digest and work.labeled and work.suspended == suspend \
        and work.removing_since is None


def _status_alone(old: WorkRecord, new: WorkRecord) -> bool:
    """Did only the Work's status change (what its member reports), not what it carries or its lifecycle?"""
    return (old.hash, old.digest, old.suspended, old.deleting, old.finalizers, old.labeled, old.removing_since,
            old.generation) == (new.hash, new.digest, new.suspended, new.deleting, new.finalizers, new.labeled,
                                new.removing_since, new.generation)


def _read_of_cluster(cluster: Obj) -> tuple[Any, ...]:
    """What a Binding's pass reads of a cluster: its labels and topology (the manifests' overrides),
    push or pull, whether it is Ready (graceful moves), whether it is going."""
    meta = cluster.get("metadata") or {}
    return (meta.get("labels"), bool(meta.get("deletionTimestamp")), is_pull(cluster), _topology(cluster),
            ready_condition(cluster))


def _topology(cluster: Obj | None) -> dict[str, str]:
    """A cluster's provider / region / zone / city (what an override's ``fieldSelector`` reads)."""
    spec = (cluster or {}).get("spec") or {}
    return {k: str(spec[k]) for k in ("provider", "region", "zone", "city") if spec.get(k)}


def _karmada_policy(obj: Obj | None) -> tuple[str, ClusterOverridePolicySpec] | None:
    """A Karmada override policy in DRO-DS's form, named ``namespace/name`` when namespaced (so it is
    applied after the cluster-wide ones, `drods.controllers.overrides.apply_overrides`)."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    try:
        spec = KarmadaOverrideSpec.model_validate(obj.get("spec") or {})
    except (TypeError, ValidationError):
        log.warning("ignoring unreadable Karmada %s %s", obj.get("kind"), meta.get("name"))
        return None
    ns = meta.get("namespace") if obj.get("kind") == "OverridePolicy" else None
    name = f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
    return name, spec.as_override_policy(str(ns) if ns else None)


def _policy(obj: Obj | None) -> tuple[str, ClusterOverridePolicySpec] | None:
    if obj is None:
        return None
    try:
        return obj["metadata"]["name"], ClusterOverridePolicySpec.model_validate(obj.get("spec") or {})
    except (KeyError, TypeError, ValidationError):
        log.warning("ignoring unreadable %s %s", CLUSTER_OVERRIDE_POLICY.kind, (obj.get("metadata") or {}).get("name"))
        return None
