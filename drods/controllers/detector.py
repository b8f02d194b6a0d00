"""Resource detector (S1 through policies): workload + matching policy → a Binding, kept in step.

Workloads are the templates users submit on the Kubernetes paths: any kind DRO-DS stores there
but Namespaces (Deployments, Jobs, CronJobs, Ingresses, ConfigMaps…), custom resources included
(one informer holds them all; their kinds come from the process's `KindCatalog`). A workload matched by a
PropagationPolicy (``resourceSelectors`` or the ``resourceType`` shorthand) or a
ResourcePlacementPolicy (``resourceSelector``) gets the Binding ``<kind-lowercase>-<namespace>-<name>`` with

* ``spec.resource`` — the workload reference (apiVersion, kind, namespace, name, uid);
* ``replicas`` — where the kind's interpretation (`drods.model.interpreter`, built-in or a
  ResourceInterpreterCustomization) says they are
  (``spec.replicas``; Jobs: ``spec.parallelism``), default 1. A kind without replicas (a DaemonSet,
  an Ingress, a ConfigMap…) gets ``replicaScheduling: Duplicated``: the whole object on every
  selected cluster, whatever the policy says about division;
* ``resources`` — per replica, what the pod template requests, as Kubernetes computes it: the sum
  over containers, or the largest init container when that is more; a container without a
  request but with a limit counts its limit. cpu in cores (``500m`` → 0.5), memory and
  ephemeral-storage in GiB (``256Mi`` → 0.25), ``nvidia.com/gpu`` as GPUs;
* ``priority`` and ``placement`` — the policy's; ``targetClusters`` — a PropagationPolicy's list, or a
  ResourcePlacementPolicy's ``selectorType: name`` values. Its ``selectorType: label`` values
  (``key=value``) are added to ``placement.clusterAffinity.labelSelector.matchLabels`` (to every
  ``clusterAffinities`` group when those are used): names and labels must both hold;
* ``policyRef`` — the policy that won;
* ``datasets`` and ``followUp`` — a DRO-DS policy's, as they are (F4 reads, F3 follow-up);
* a StatefulSet is kept on one cluster (``spreadConstraints: [{spreadByField: cluster, maxGroups:
  1}]``) unless its policy gives a topology itself (``statefulTopology``: a primary cluster and
  replica clusters, or Karmada's ``replicaScheduling`` / ``spreadConstraints``), because its replicas
  share ordinal identity and volumes (F3). A kind without replicas whose policy gives a
  ``statefulTopology`` (a database custom resource) is placed by the topology, not duplicated.

Which policy wins when several match is Karmada's rule: a namespaced (Karmada) PropagationPolicy
before any cluster-wide policy, then the higher ``spec.priority``, then the most specific selector
— a name match beats a label-selector match beats a kind-only match — then a
ResourcePlacementPolicy before a PropagationPolicy, then the policy name. A workload a Karmada
policy has claimed (its Binding's ``policyRef``) stays with it while it matches, unless another
policy with ``preemption: Always`` outranks it (`drods.model.detection.PolicyMatch.preempts`);
DRO-DS's own policies re-choose on every change.

Karmada's other terms: a policy with ``dependentOverrides`` takes effect only once those
OverridePolicies exist in the workload's namespace; with ``activationPreference: Lazy`` a change of
the policy reaches a workload it already placed only when the workload itself changes; with
``schedulePriority`` the Binding's ``priority`` (the scheduling queue's order) is the named
PriorityClass's ``value`` (no Binding until that PriorityClass exists); ``conflictResolution`` and
``suspension`` are copied into the Binding (`drods.model.dispatch`).

The detector is level-triggered: a workload or policy change re-derives the Binding and writes it
only when its spec differs (a scale changes only ``replicas``, which the scheduler re-divides
stably). When no policy matches any more, or the workload is deleted, its Binding is deleted; the
propagation controller's finalizers on the Binding clean the members. Bindings the detector did
not create (no ``multicluster.io/managed-by: resource-detector`` label) are never touched.

A Binding's name is not unique to its workload: Secret ``team-a/s1`` and Secret ``team/a-s1`` are both
``secret-team-a-s1``. The workload whose Binding holds the name keeps it: one whose computed name is
held by a Binding of another object (``spec.resource``: kind, namespace, name, uid) gets none — the
detector never rewrites nor deletes that Binding for it — and a Warning Event ``BindingNameTaken`` on
it names the other object and asks for one of them to be renamed. It is placed once the name is free
(the other's Binding deleted).

When a FederatedHPA or CronFederatedHPA owns the workload's replicas (`drods.model.autoscaling.owner`)
and has decided (``status.desiredReplicas``), that number is the Binding's ``replicas`` instead of the
template's, which stays the user's and is never edited.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from drods.controllers.cache_copy import MANAGED_BY_CACHE
from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.controller import Controller
from drods.machinery.event_log import EventLog
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.machinery.shared import decode_template
from drods.model.annotations import DETECTOR_NAME, MANAGED_BY
from drods.model.autoscaling import OwnerIndex
from drods.model.binding import BindingSpec
from drods.model.detection import (
    DETECTED_KINDS,
    ReplicasUnknown,
    _Policy,
    autoscaled,
    best_policy,
    binding_is_for,
    binding_name,
    decode_policy,
    desired_binding,
    karmada_policy_key,
)
from drods.model.interpreter import Interpreter
from drods.model.kinds import (
    ALL_KINDS,
    AUTOSCALER_KINDS,
    BINDING,
    CUSTOM_RESOURCE_DEFINITION,
    CUSTOM_RESOURCES_PREFIX,
    INTERPRETER_CUSTOMIZATION_KINDS,
    KARMADA_OVERRIDE_KINDS,
    PLACEMENT_POLICY_KINDS,
    PRIORITY_CLASS,
    Kind,
)
from drods.model.migration import MANAGED_BY_MIGRATION
from drods.model.timefmt import parse_rfc3339
from drods.registry.catalog import KindCatalog
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored

log = logging.getLogger(__name__)


# spec fields others write on a Binding the detector made: kept when it rewrites the spec
KEPT_SPEC_FIELDS = ("rescheduleTriggeredAt", "gracefulEvictionTasks", "preservedLabelState")


def normal_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec as the registry would store it, without the fields others set (for comparisons)."""
    out = BindingSpec.model_validate(dict(spec)).model_dump(mode="json", exclude_unset=True)
    for k in KEPT_SPEC_FIELDS:
        out.pop(k, None)
    return out


def same_spec(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether two specs store the same, the fields others set apart. Equal as they are is enough (a
    restart's pass over every workload finds most so); only specs that differ are normalised to tell
    a difference the store would not keep (a default, a number's form) from a real one."""
    if {k: v for k, v in stored.items() if k not in KEPT_SPEC_FIELDS} == \
            {k: v for k, v in wanted.items() if k not in KEPT_SPEC_FIELDS}:
        return True
    return normal_spec(stored) == normal_spec(wanted)


# ---------------------------------------------------------------------- the controller
class ResourceDetector:
    """Workload + matching policy → Binding (see the module docstring); single-active.

    Its informers are the process's shared ones (`Manager.informer`): it subscribes while it runs
    and unsubscribes when its leadership term ends. A managed Binding deleted (or marked for
    deletion) behind its back sends its workload through reconcile again."""

    def __init__(self, registry: ObjectRegistry, *, workloads: Sequence[Informer], policies: Sequence[Informer],
                 bindings: Informer, autoscalers: Sequence[Informer] = (), interpretation: Sequence[Informer] = (),
                 overrides: Sequence[Informer] = (),
                 catalog: KindCatalog | None = None, interpreter: Interpreter | None = None,
                 workers: int = 8) -> None:
        self.registry = registry
        # custom kinds (one informer holds every custom resource) and interpreter customizations; a
        # change to either sends every workload through reconcile again
        self.catalog = catalog or KindCatalog(ALL_KINDS)
        self.interpreter = interpreter or Interpreter()
        self.interpretation = list(interpretation)
        self._custom_kinds: dict[str, Kind] = {}  # custom resource key → its kind, while it has a Binding
        self.autoscalers = list(autoscalers)
        self.owners = OwnerIndex()  # workload → its autoscaler, from the autoscaler informers
        self.kinds = {k.key_prefix(): k for k in DETECTED_KINDS}
        self.workloads = list(workloads)
        self.policies = list(policies)
        self.overrides = list(overrides)  # Karmada OverridePolicies a policy's dependentOverrides name
        self._touched: set[str] = set()  # workloads changed since their last reconcile (Lazy activation)
        # binding → the revision this detector last wrote; until its informer has seen it, the cached
        # copy is older than what the store holds, and a spec equal to that older copy is no proof
        # that the Binding is as wanted (a 4 → 1 → 4 → 1 scale would leave it at 4)
        self._wrote: dict[str, int] = {}
        self.bindings = bindings
        # binding name → workloads refused it because another object's Binding holds it: sent through
        # reconcile again when that Binding goes
        self._blocked: dict[str, set[str]] = {}
        self.controller = Controller("resource-detector", self.reconcile, workers=workers)
        self.events = EventLog(registry.store, "resource-detector")

    @staticmethod
    def informers(manager: Manager) -> dict[str, Any]:
        """The shared informers a detector reads, as keyword arguments of its constructor."""
        return {"workloads": [manager.informer(k.key_prefix(), decode_template) for k in DETECTED_KINDS]
                + [manager.informer(CUSTOM_RESOURCES_PREFIX, decode_template)],
                # decoded as the assembly's (the same informers, so the catalog learns a change first)
                "interpretation": [manager.informer(k.key_prefix(), decode_stored)
                                   for k in (CUSTOM_RESOURCE_DEFINITION, *INTERPRETER_CUSTOMIZATION_KINDS)],
                "policies": [manager.informer(k.key_prefix(), decode_policy(k))
                             for k in PLACEMENT_POLICY_KINDS],
                "bindings": manager.informer(BINDING.key_prefix(), decode_binding_kept),
                "overrides": [manager.informer(k.key_prefix(), decode_stored) for k in KARMADA_OVERRIDE_KINDS],
                "autoscalers": [manager.informer(k.key_prefix(), decode_stored)
                                for k in AUTOSCALER_KINDS]}

    def _autoscaler_changed(self, key: str, old: Any, new: Any) -> None:
        self.owners.update(key, new)
        for obj in (old, new):
            ref = ((obj or {}).get("spec") or {}).get("scaleTargetRef") or {}
            kind = next((k for k in DETECTED_KINDS if isinstance(ref, dict) and k.kind == ref.get("kind")), None)
            if kind is not None and ref.get("name"):
                wkey = kind.key(str(ref["name"]), (obj["metadata"].get("namespace") or "default"))
                self._touched.add(wkey)
                self.controller.queue.add(wkey)

    def _policy_changed(self, key: str, old: Any, new: Any) -> None:
        for inf in self.workloads:
            for wkey in inf.cache:
                self.controller.queue.add(wkey)

    def _binding_changed(self, key: str, old: Any, new: Any) -> None:
        bname = key.rsplit("/", 1)[-1]
        if new is None:
            self._wrote.pop(bname, None)
            for waiting in self._blocked.pop(bname, ()):  # the name is free: one refused it may have it
                self.controller.queue.add(waiting)
        gone = new is None or bool((new.get("metadata") or {}).get("deletionTimestamp"))
        was_gone = old is not None and bool((old.get("metadata") or {}).get("deletionTimestamp"))
        # a Binding another writer made (e.g. the previous leader, just before it lost the lease) is
        # judged once it arrives: its workload may be one no policy places any more
        made_elsewhere = old is None and new is not None and bname not in self._wrote
        # its spec edited by another writer (a PATCH of the Binding): the template's is written back now; not
        # the fields others keep there (a failover's reschedule trigger and eviction tasks: a storm's worth)
        edited = old is not None and new is not None and not gone and old.get("spec") != new.get("spec") and \
            str((new.get("metadata") or {}).get("resourceVersion")) != str(self._wrote.get(bname)) and \
            not same_spec(old.get("spec") or {}, new.get("spec") or {})
        obj = new or old
        if not (made_elsewhere or edited or (gone and not was_gone)) or obj is None:
            return
        if ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) != DETECTOR_NAME:
            return
        wkey = workload_key(obj, self.catalog)
        if wkey is not None:
            self.controller.queue.add(wkey)

    def _kind_of(self, key: str) -> Kind | None:
        for prefix, k in self.kinds.items():
            if key.startswith(prefix):
                return k
        custom = self.catalog.custom_of_key(key)
        if custom is not None:
            self._custom_kinds[key] = custom
        # a custom resource whose definition is gone (and it with it) still has its Binding to delete
        return custom or self._custom_kinds.get(key)

    def _all_policies(self) -> list[_Policy]:
        return [p for inf in self.policies for p in inf.cache.values() if p is not None]

    def _workload_changed(self, key: str, old: Any, new: Any) -> None:
        if old is not None and new is not None and _apart_from_status(old) == _apart_from_status(new):
            return  # the binding controller's status aggregation: nothing a Binding is made from
        if key.startswith(PRIORITY_CLASS.key_prefix()):
            self._policy_changed(key, old, new)  # a schedulePriority may name it
        self._touched.add(key)
        self.controller.queue.add(key)

    async def run(self) -> None:
        with subscribed(*((inf, self._workload_changed) for inf in self.workloads),
                        *((inf, self._policy_changed) for inf in (*self.policies, *self.interpretation,
                                                                  *self.overrides)),
                        (self.bindings, self._binding_changed),
                        *((inf, self._autoscaler_changed) for inf in self.autoscalers)):
            await wait_synced(*self.interpretation, *self.policies, *self.workloads, self.bindings, *self.autoscalers,
                              *self.overrides)
            for inf in self.autoscalers:
                for akey, a in list(inf.cache.items()):
                    self.owners.update(akey, a)
            self.queue_everything()
            await self.controller.run()

    def queue_everything(self) -> None:
        """A new leader's first pass: every workload, and the workload of every Binding this detector made —
        one deleted while no detector led (the last leader killed before it saw the delete) is in no workload
        informer, and its Binding would stay placed for good with nothing to tell of it."""
        for inf in self.workloads:
            for key in inf.cache:
                self.controller.queue.add(key)
        for obj in list(self.bindings.cache.values()):
            if obj is not None and ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) \
                    == DETECTOR_NAME and (wkey := workload_key(obj, self.catalog)) is not None:
                self.controller.queue.add(wkey)

    async def reconcile(self, item: Hashable) -> float | None:
        key = str(item)
        kind = self._kind_of(key)
        if kind is None:
            return None
        obj = next((inf.cache.get(key) for inf in self.workloads if key in inf.cache), None)
        rest = key[len(kind.key_prefix()):]
        ns, name = rest.split("/", 1) if kind.namespaced else ("", rest)
        bname = binding_name(kind.kind, ns, name)
        # the informer's copy, only read here (a stale one costs a 409 and a retry; its arrival enqueues again)
        existing: dict[str, Any] | None = self.bindings.cache.get(BINDING.key(bname))
        # another object's Binding under the same name (names collide across namespaces): the first keeps it.
        # (Not the uid: the same kind, namespace and name is the same store key, an object deleted and made
        # again, whose Binding is rewritten for it as ever.)
        if existing is not None and not binding_is_for(existing, kind.kind, ns, name, api_version=kind.api_version):
            return self._name_taken(key, kind, obj, bname, existing)
        self._unblock(bname, key)
        manager = (existing["metadata"].get("labels") or {}).get(MANAGED_BY) if existing is not None else None
        if existing is not None and manager != DETECTOR_NAME:
            # a migration's or cache plan's copy Job has its own Binding: expected, said only when debugging
            (log.debug if manager in (MANAGED_BY_MIGRATION, MANAGED_BY_CACHE) else log.warning)(
                "binding %s exists and is not managed by the resource detector; leaving it", bname)
            return None
        if bname in self._wrote:
            seen = int((existing or {}).get("metadata", {}).get("resourceVersion") or 0)
            if seen < self._wrote[bname]:
                return 0.05  # the informer has not brought this detector's own last write yet
            del self._wrote[bname]
        touched = key in self._touched
        self._touched.discard(key)
        match = None
        if obj is not None and not (obj.get("metadata") or {}).get("deletionTimestamp") \
                and ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) != MANAGED_BY_MIGRATION:
            # (a migration hook's Job has its own Binding, pinned to one member: no policy places it)
            match = best_policy(self._all_policies(), kind, obj, (existing or {}).get("spec", {}).get("policyRef"))
        if match is None or obj is None:
            if obj is None:
                self._custom_kinds.pop(key, None)
            elif self._karmada_policy_deleted(existing):
                return None  # Karmada keeps what a deleted policy placed: the Binding stays as it is
            try:
                await self._delete_binding(bname, existing)
            except Conflict:
                return 0.05  # changed since the informer's copy: look again once it has the new one
            return None
        if match.karmada is not None:
            if match.karmada.lazy and not touched and existing is not None \
                    and (existing.get("spec") or {}).get("policyRef") == match.ref():
                return None  # Lazy: the policy's change waits for the workload's own next change
            if not self._dependents_present(match.karmada.dependent_overrides, ns):
                log.info("resource detector: %s waits for the OverridePolicies %s of %s", key,
                         ", ".join(match.karmada.dependent_overrides), match.name)
                return None  # an override policy's arrival enqueues every workload again
        try:
            want = desired_binding(kind, obj, match, self.interpreter)
        except ReplicasUnknown as e:  # no count is right: the Binding stays as it is (none is made)
            held = "no Binding made" if existing is None else "its Binding left as it is"
            self.events.tell(_involved(kind, obj), "Warning", "ApplyPolicyFailed",
                             f"replicas not interpreted, {held} until the script succeeds: {e}")
            return None  # the workload's next change, or the customization's, sends it here again
        if match.karmada is not None and match.karmada.priority_class is not None:
            value = self._priority_class_value(match.karmada.priority_class)
            if value is None:
                log.info("resource detector: %s waits for PriorityClass %s", key, match.karmada.priority_class)
                return None
            want["spec"]["priority"] = value
        workload = (kind.api_version, kind.kind, ns, name)
        autoscaled(want["spec"], self.owners.owned_replicas(workload), *self.owners.owned_weights(workload))
        if existing is None:
            try:
                made = await self.registry.create(BINDING, want)
            except (AlreadyExists, Conflict):
                return 0.05  # created meanwhile: look again
            self._wrote[bname] = int(made["metadata"]["resourceVersion"])
            return None
        if existing["metadata"].get("deletionTimestamp"):
            return 1.0  # the old binding is still being cleaned up; create the new one after
        if same_spec(existing.get("spec") or {}, want["spec"]) and \
                all((existing["metadata"].get("labels") or {}).get(k) == v
                    for k, v in want["metadata"]["labels"].items()):
            return None
        new = copy.deepcopy(existing)
        spec = dict(want["spec"])
        trigger = (existing.get("spec") or {}).get("rescheduleTriggeredAt")
        if trigger and (parse_rfc3339(trigger) or 0.0) > (parse_rfc3339(spec.get("rescheduleTriggeredAt")) or 0.0):
            spec["rescheduleTriggeredAt"] = trigger  # the later trigger wins
        for kept in ("gracefulEvictionTasks", "preservedLabelState"):  # the failover's record
            if (existing.get("spec") or {}).get(kept):
                spec[kept] = existing["spec"][kept]
        new["spec"] = spec
        new["metadata"]["labels"] = {**(existing["metadata"].get("labels") or {}), **want["metadata"]["labels"]}
        try:
            written = await self.registry.update(BINDING, new)
        except (Conflict, AlreadyExists):
            return 0.05
        self._wrote[bname] = int(written["metadata"]["resourceVersion"])
        return None

    def _unblock(self, bname: str, key: str) -> None:
        waiting = self._blocked.get(bname)
        if waiting is not None:
            waiting.discard(key)
            if not waiting:
                del self._blocked[bname]

    def _name_taken(self, key: str, kind: Kind, obj: Mapping[str, Any] | None, bname: str,
                    existing: Mapping[str, Any]) -> float | None:
        """``key``'s Binding name is held by a Binding of another object: the first keeps it. This one is
        not placed (and nothing of the other changes); if a policy would place it, a Warning Event on it
        says so. It is sent through reconcile again when that Binding goes (`_binding_changed`)."""
        meta = (obj or {}).get("metadata") or {}
        wanted = obj is not None and not meta.get("deletionTimestamp") \
            and (meta.get("labels") or {}).get(MANAGED_BY) != MANAGED_BY_MIGRATION \
            and best_policy(self._all_policies(), kind, obj) is not None
        if not wanted:
            self._unblock(bname, key)
            if obj is None:
                self._custom_kinds.pop(key, None)
            return None
        self._blocked.setdefault(bname, set()).add(key)
        assert obj is not None
        ref = (existing.get("spec") or {}).get("resource") or {}
        other = "another object"
        if isinstance(ref, Mapping) and ref.get("name"):
            where = f"{ref['namespace']}/" if ref.get("namespace") else ""
            other = f"{ref.get('kind')} {where}{ref['name']}"
        log.warning("resource detector: %s is not placed: its binding name %s is held by %s", key, bname, other)
        self.events.tell(_involved(kind, obj), "Warning", "BindingNameTaken",
                         f"not placed: its Binding would be named {bname}, which the Binding of {other} already "
                         "holds (names are <kind>-<namespace>-<name>); rename one of the two objects")
        return None

    async def _delete_binding(self, bname: str, existing: dict[str, Any] | None) -> None:
        """The Binding of a workload no policy places (or that is gone) — only one this detector made.
        The informer's copy decides, without a store read for each workload no policy places (every
        ConfigMap of a cold start): this detector's own writes are in it by now (`reconcile` waits for
        them), and one made elsewhere enqueues its workload when it arrives (`_binding_changed`). The
        delete holds only while the Binding is the copy read (the caller checked whose it is, from that
        copy): one rewritten meanwhile is looked at again."""
        if existing is None or (existing["metadata"].get("labels") or {}).get(MANAGED_BY) != DETECTOR_NAME:
            return  # e.g. a migration hook's own Binding
        if not existing["metadata"].get("deletionTimestamp"):
            try:
                await self.registry.delete(BINDING, bname,
                                           resource_version=existing["metadata"].get("resourceVersion"))
            except NotFound:
                return
            log.info("resource detector: deleted binding %s (workload or policy gone)", bname)

    def _karmada_policy_deleted(self, existing: dict[str, Any] | None) -> bool:
        """Whether ``existing`` was placed by a Karmada PropagationPolicy or ClusterPropagationPolicy
        that is gone. Karmada keeps the ResourceBinding and the copies in the members when the policy
        is deleted (karmada#601): the workload stays where it runs until another policy claims it or
        it is deleted itself. A policy that still exists but no longer selects the workload lets it go."""
        key = karmada_policy_key(existing or {})
        return key is not None and not any(key in inf.cache for inf in self.policies)

    def _dependents_present(self, names: Sequence[str], namespace: str) -> bool:
        have = {(str(o["metadata"].get("namespace") or ""), str(o["metadata"].get("name")))
                for inf in self.overrides for o in inf.cache.values()
                if o is not None and o.get("kind") == "OverridePolicy"}
        return all((namespace, n) in have for n in names)

    def _priority_class_value(self, name: str) -> int | None:
        key = PRIORITY_CLASS.key(name)
        pc = next((inf.cache.get(key) for inf in self.workloads if key in inf.cache), None)
        value = (pc or {}).get("value")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _involved(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta.get("name"),
            **({"namespace": meta.get("namespace") or "default"} if kind.namespaced else {}),
            **({"uid": meta["uid"]} if meta.get("uid") else {})}


def _apart_from_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {**{k: v for k, v in obj.items() if k != "status"},
            "metadata": {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields")}}


def workload_key(binding: Mapping[str, Any], catalog: KindCatalog | None = None) -> str | None:
    """The store key of the workload a managed binding stands for."""
    ref = (binding.get("spec") or {}).get("resource") or {}
    if not isinstance(ref, dict):
        return None
    kind = next((k for k in DETECTED_KINDS if k.kind == ref.get("kind")), None)
    if kind is None and catalog is not None:
        kind = catalog.by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
    if kind is None or not ref.get("name"):
        return None
    return kind.key(ref["name"], ref.get("namespace") or "default")
