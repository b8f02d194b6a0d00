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

Which policy wins when several match: the most specific selector first — a name match beats a
label-selector match beats a kind-only match — then the higher ``spec.priority``, then a
ResourcePlacementPolicy before a PropagationPolicy, then the policy name. (Karmada orders explicit
priority first; DRO-DS lets a policy that names the workload win over a broad one whatever their
priorities, which is what an operator naming a workload means.)

The detector is level-triggered: a workload or policy change re-derives the Binding and writes it
only when its spec differs (a scale changes only ``replicas``, which the scheduler re-divides
stably). When no policy matches any more, or the workload is deleted, its Binding is deleted; the
propagation controller's finalizers on the Binding clean the members. Bindings the detector did
not create (no ``multicluster.io/managed-by: resource-detector`` label) are never touched.

When a FederatedHPA or CronFederatedHPA owns the workload's replicas (`drods.model.autoscaling.owner`)
and has decided (``status.desiredReplicas``), that number is the Binding's ``replicas`` instead of the
template's, which stays the user's and is never edited.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from drods.autoscaling.cluster_weights import static_weight_list
from drods.errors import AlreadyExists, Conflict
from drods.machinery.controller import Controller
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.members.quantity import cores, count, gib
from drods.model.annotations import WORKLOAD_CLASS_LABEL
from drods.model.autoscaling import OwnerIndex
from drods.model.binding import BindingSpec
from drods.model.interpreter import Interpreter, interpretation
from drods.model.karmada import KarmadaPropagationSpec
from drods.model.kinds import (
    ALL_KINDS,
    BINDING,
    CRON_FEDERATED_HPA,
    CUSTOM_RESOURCE_DEFINITION,
    CUSTOM_RESOURCES_PREFIX,
    FEDERATED_HPA,
    KARMADA_PROPAGATION_KINDS,
    PROPAGATION_POLICY,
    RESOURCE_INTERPRETER_CUSTOMIZATION,
    RESOURCE_PLACEMENT_POLICY,
    TEMPLATE_KINDS,
    Kind,
)
from drods.model.migration import MANAGED_BY_MIGRATION
from drods.model.policy import PropagationPolicySpec, ResourcePlacementPolicySpec, ResourceSelector
from drods.model.timefmt import parse_rfc3339
from drods.registry.catalog import KindCatalog
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.schedulerd.records import DETECTOR_NAME, MANAGED_BY_LABEL
from drods.store import KeyValue

log = logging.getLogger(__name__)

DETECTED_KINDS: tuple[Kind, ...] = tuple(k for k in TEMPLATE_KINDS if k.kind != "Namespace")
RESOURCE_KIND_LABEL = "multicluster.io/resource-kind"


def binding_name(kind: str, namespace: str, name: str) -> str:
    """``<kind>-<namespace>-<name>``; names beyond 253 characters are shortened with a hash."""
    full = f"{kind.lower()}-{namespace}-{name}"
    if len(full) <= 253:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    return f"{full[:240].rstrip('-.')}-{digest}"


# ---------------------------------------------------------------------- per-replica requests
_RESOURCES = (("cpu", cores, "cpu"), ("memory", gib, "memory"), ("ephemeral-storage", gib, "storage"),
              ("nvidia.com/gpu", count, "gpu"))


def _container_requests(c: Mapping[str, Any]) -> dict[str, float]:
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    lim = res.get("limits") or {}
    out: dict[str, float] = {}
    for name, conv, field in _RESOURCES:
        v = req.get(name, lim.get(name))
        if v is not None:
            out[field] = conv(v)
    return out


def pod_requests(template: Mapping[str, Any] | None) -> dict[str, Any]:
    """A pod template's effective requests per replica (Kubernetes' rule; units in the module doc)."""
    pod = (template or {}).get("spec") or {}
    total: dict[str, float] = {}
    for c in pod.get("containers") or []:
        for k, v in _container_requests(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in pod.get("initContainers") or []:
        for k, v in _container_requests(c).items():
            total[k] = max(total.get(k, 0.0), v)
    out: dict[str, Any] = {}
    for k in ("cpu", "memory", "storage"):
        if total.get(k):
            out[k] = round(total[k], 6)
    if total.get("gpu"):
        out["gpu"] = int(math.ceil(total["gpu"]))
    return out


def replicas_of(kind: Kind, obj: Mapping[str, Any], interpreter: Interpreter | None = None) -> int:
    how = interpreter.of(kind.api_version, kind.kind) if interpreter else interpretation(kind.api_version, kind.kind)
    return how.replicas_of(obj)


# F3: kinds whose replicas share state (ordinal identity, volumes): one cluster holds them all unless
# the policy itself says how to spread them (a stateful topology, replica scheduling, spread constraints)
KEPT_WHOLE = frozenset({"StatefulSet"})
TOPOLOGY_FIELDS = ("statefulTopology", "replicaScheduling", "spreadConstraints")


# ---------------------------------------------------------------------- policy matching
@dataclass(frozen=True, slots=True)
class PolicyMatch:
    scope: int  # 0 a namespaced (Karmada) PropagationPolicy, 1 a cluster-wide policy: namespaced ones win
    specificity: int  # 3 name, 2 label selector, 1 kind only
    priority: int
    kind_rank: int  # 0 ResourcePlacementPolicy, 1 PropagationPolicy
    name: str
    policy_kind: Kind
    placement: dict[str, Any]
    target_names: tuple[str, ...]
    target_labels: tuple[tuple[str, str], ...]

    namespace: str | None = None  # a namespaced policy's namespace
    extra: tuple[tuple[str, Any], ...] = ()  # F4/F3: datasets, followUp copied into the Binding

    def order(self) -> tuple[int, int, int, int, str]:
        return (self.scope, -self.specificity, -self.priority, self.kind_rank, self.name)


def selector_specificity(sel: ResourceSelector, kind: Kind, obj: Mapping[str, Any]) -> int | None:
    meta = obj.get("metadata") or {}
    if sel.kind != kind.kind or (sel.apiVersion and sel.apiVersion != kind.api_version):
        return None
    if sel.namespace and sel.namespace != meta.get("namespace", "default"):
        return None
    if sel.name:
        return 3 if sel.name == meta.get("name") else None
    if sel.labelSelector is not None:
        return 2 if sel.labelSelector.matches(meta.get("labels") or {}) else None
    return 1


@dataclass(frozen=True, slots=True)
class _Policy:
    kind: Kind
    name: str
    priority: int
    selectors: tuple[ResourceSelector, ...]
    placement: dict[str, Any]
    target_names: tuple[str, ...]
    target_labels: tuple[tuple[str, str], ...]
    namespace: str | None = None  # a namespaced policy selects only this namespace's resources
    extra: tuple[tuple[str, Any], ...] = ()


def decode_policy(kind: Kind) -> Callable[[KeyValue], _Policy | None]:
    def decode(kv: KeyValue) -> _Policy | None:
        try:
            obj = json.loads(kv.value)
            name = obj["metadata"]["name"]
            if obj["metadata"].get("deletionTimestamp"):
                return None
            spec = obj.get("spec") or {}
            placement = spec.get("placement") or {}
            if kind is PROPAGATION_POLICY:
                pp = PropagationPolicySpec.model_validate(spec)
                return _Policy(kind, name, pp.priority, tuple(pp.selectors()), placement, tuple(pp.targetClusters), (),
                               extra=_extra(spec))
            if kind in KARMADA_PROPAGATION_KINDS:
                kp = KarmadaPropagationSpec.model_validate(spec)
                ns = str(obj["metadata"].get("namespace") or "default") if kind.namespaced else None
                return _Policy(kind, name, kp.priority, tuple(kp.resourceSelectors), placement, (), (), ns)
            rpp = ResourcePlacementPolicySpec.model_validate(spec)
        except (ValueError, KeyError, TypeError, ValidationError):
            log.warning("resource detector: cannot read policy %s", kv.key)
            return None
        names: list[str] = []
        labels: list[tuple[str, str]] = []
        for t in rpp.targetClusters:
            if t.selectorType == "name":
                names.extend(t.values)
            else:
                labels.extend(tuple(v.split("=", 1)) for v in t.values)  # type: ignore[misc]
        return _Policy(kind, name, rpp.priority, (rpp.resourceSelector,), placement, tuple(dict.fromkeys(names)),
                       tuple(labels), extra=_extra(spec))

    return decode


def _extra(spec: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The policy fields a Binding takes as they are (F4 ``datasets``, F3 ``followUp``)."""
    return tuple((k, spec[k]) for k in ("datasets", "followUp") if spec.get(k))


def best_policy(policies: list[_Policy], kind: Kind, obj: Mapping[str, Any]) -> PolicyMatch | None:
    best: PolicyMatch | None = None
    for p in policies:
        spec = max((s for s in (selector_specificity(sel, kind, obj) for sel in p.selectors) if s is not None),
                   default=None)
        if spec is None:
            continue
        if p.namespace is not None and p.namespace != ((obj.get("metadata") or {}).get("namespace") or "default"):
            continue
        m = PolicyMatch(0 if p.namespace is not None else 1, spec, p.priority,
                        0 if p.kind is RESOURCE_PLACEMENT_POLICY else 1, p.name, p.kind,
                        p.placement, p.target_names, p.target_labels, p.namespace, p.extra)
        if best is None or m.order() < best.order():
            best = m
    return best


def _with_labels(placement: dict[str, Any], labels: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    if not labels:
        return placement
    out = copy.deepcopy(placement)
    terms = out.get("clusterAffinities") or []
    if not terms:
        out["clusterAffinity"] = out.get("clusterAffinity") or {}
        terms = [out["clusterAffinity"]]
    for term in terms:
        ls = term.setdefault("labelSelector", {})
        ml = ls.setdefault("matchLabels", {})
        ml.update(dict(labels))
    return out


def desired_binding(kind: Kind, obj: Mapping[str, Any], match: PolicyMatch,
                    interpreter: Interpreter | None = None) -> dict[str, Any]:
    """The Binding object the detector wants for ``obj`` under ``match`` (replicas and requests read
    through ``interpreter``, else the built-in interpretation)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    ref = {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"], "namespace": ns}
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    how = interpreter.of(kind.api_version, kind.kind) if interpreter else interpretation(kind.api_version, kind.kind)
    spec: dict[str, Any] = {
        "resource": ref,
        "replicas": how.replicas_of(obj),
        "priority": match.priority,
        "resources": pod_requests(how.pod_template_of(obj)),
        "policyRef": {"apiVersion": match.policy_kind.api_version, "kind": match.policy_kind.kind, "name": match.name,
                      **({"namespace": match.namespace} if match.namespace else {})},
    }
    placement = _with_labels(match.placement, match.target_labels)
    if placement.get("statefulTopology"):
        pass  # F3: the topology places it (a primary cluster and replica clusters), whatever the kind
    elif not how.divisible:  # nothing to divide: the whole object goes to every selected cluster
        placement = {**placement, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    elif kind.kind in KEPT_WHOLE and not any(placement.get(k) for k in TOPOLOGY_FIELDS):
        # F3: a stateful set is not split across clusters unless its policy gives a topology
        placement = {**placement, "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}]}
    spec.update(copy.deepcopy(dict(match.extra)))
    if placement:
        spec["placement"] = placement
    if match.target_names:
        spec["targetClusters"] = list(match.target_names)
    labels = {MANAGED_BY_LABEL: DETECTOR_NAME, RESOURCE_KIND_LABEL: kind.singular}
    wclass = (meta.get("labels") or {}).get(WORKLOAD_CLASS_LABEL)
    if wclass:
        labels[WORKLOAD_CLASS_LABEL] = wclass  # H2: the scheduler's Dissonance score reads it here
    return {
        "apiVersion": BINDING.api_version, "kind": BINDING.kind,
        "metadata": {"name": binding_name(kind.kind, ns, meta["name"]), "labels": labels},
        "spec": spec,
    }


def normal_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec as the registry would store it, without the fields others set (for comparisons)."""
    out = BindingSpec.model_validate(dict(spec)).model_dump(mode="json", exclude_unset=True)
    out.pop("rescheduleTriggeredAt", None)
    return out


# ---------------------------------------------------------------------- the controller
class ResourceDetector:
    """Workload + matching policy → Binding (see the module docstring); single-active.

    Its informers are the process's shared ones (`Manager.informer`): it subscribes while it runs
    and unsubscribes when its leadership term ends. A managed Binding deleted (or marked for
    deletion) behind its back sends its workload through reconcile again."""

    def __init__(self, registry: ObjectRegistry, *, workloads: Sequence[Informer], policies: Sequence[Informer],
                 bindings: Informer, autoscalers: Sequence[Informer] = (), interpretation: Sequence[Informer] = (),
                 catalog: KindCatalog | None = None, interpreter: Interpreter | None = None,
                 workers: int = 2) -> None:
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
        self.bindings = bindings
        self.controller = Controller("resource-detector", self.reconcile, workers=workers)

    @staticmethod
    def informers(manager: Manager) -> dict[str, Any]:
        """The shared informers a detector reads, as keyword arguments of its constructor."""
        return {"workloads": [manager.informer(k.key_prefix(), decode_stored) for k in DETECTED_KINDS]
                + [manager.informer(CUSTOM_RESOURCES_PREFIX, decode_stored)],
                # decoded as the assembly's (the same informers, so the catalog learns a change first)
                "interpretation": [manager.informer(k.key_prefix(), decode_stored)
                                   for k in (CUSTOM_RESOURCE_DEFINITION, RESOURCE_INTERPRETER_CUSTOMIZATION)],
                "policies": [manager.informer(k.key_prefix(), decode_policy(k))
                             for k in (PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY, *KARMADA_PROPAGATION_KINDS)],
                "bindings": manager.informer(BINDING.key_prefix(), decode_binding_kept),
                "autoscalers": [manager.informer(k.key_prefix(), decode_stored)
                                for k in (FEDERATED_HPA, CRON_FEDERATED_HPA)]}

    def _autoscaler_changed(self, key: str, old: Any, new: Any) -> None:
        self.owners.update(key, new)
        for obj in (old, new):
            ref = ((obj or {}).get("spec") or {}).get("scaleTargetRef") or {}
            kind = next((k for k in DETECTED_KINDS if isinstance(ref, dict) and k.kind == ref.get("kind")), None)
            if kind is not None and ref.get("name"):
                self.controller.queue.add(kind.key(str(ref["name"]), (obj["metadata"].get("namespace") or "default")))

    def _policy_changed(self, key: str, old: Any, new: Any) -> None:
        for inf in self.workloads:
            for wkey in inf.cache:
                self.controller.queue.add(wkey)

    def _binding_changed(self, key: str, old: Any, new: Any) -> None:
        gone = new is None or bool((new.get("metadata") or {}).get("deletionTimestamp"))
        was_gone = old is not None and bool((old.get("metadata") or {}).get("deletionTimestamp"))
        obj = new or old
        if not gone or was_gone or obj is None:
            return
        if ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) != DETECTOR_NAME:
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
        self.controller.queue.add(key)

    async def run(self) -> None:
        with subscribed(*((inf, self._workload_changed) for inf in self.workloads),
                        *((inf, self._policy_changed) for inf in (*self.policies, *self.interpretation)),
                        (self.bindings, self._binding_changed),
                        *((inf, self._autoscaler_changed) for inf in self.autoscalers)):
            await wait_synced(*self.interpretation, *self.policies, *self.workloads, self.bindings, *self.autoscalers)
            for inf in self.autoscalers:
                for akey, a in list(inf.cache.items()):
                    self.owners.update(akey, a)
            for inf in self.workloads:
                for key in inf.cache:
                    self.controller.queue.add(key)
            await self.controller.run()

    async def reconcile(self, item: Hashable) -> float | None:
        key = str(item)
        kind = self._kind_of(key)
        if kind is None:
            return None
        obj = next((inf.cache.get(key) for inf in self.workloads if key in inf.cache), None)
        ns, _, name = key[len(kind.key_prefix()):].partition("/")
        bname = binding_name(kind.kind, ns, name)
        # the informer's copy, only read here (a stale one costs a 409 and a retry; its arrival enqueues again)
        existing: dict[str, Any] | None = self.bindings.cache.get(BINDING.key(bname))
        if existing is not None and (existing["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) != DETECTOR_NAME:
            log.warning("binding %s exists and is not managed by the resource detector; leaving it", bname)
            return None
        match = None
        if obj is not None and not (obj.get("metadata") or {}).get("deletionTimestamp") \
                and ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY_MIGRATION:
            # (a migration hook's Job has its own Binding, pinned to one member: no policy places it)
            match = best_policy(self._all_policies(), kind, obj)
        if match is None or obj is None:
            if obj is None:
                self._custom_kinds.pop(key, None)
            if existing is None:  # one just created may not have reached the informer yet
                existing = await self.registry.try_get(BINDING, bname)
            if existing is not None and not existing["metadata"].get("deletionTimestamp"):
                await self.registry.delete(BINDING, bname)
                log.info("resource detector: deleted binding %s (workload or policy gone)", bname)
            return None
        want = desired_binding(kind, obj, match, self.interpreter)
        scaled = self.owners.owned_replicas((kind.api_version, kind.kind, ns, name))
        if scaled is not None:
            want["spec"]["replicas"] = scaled
        weights, moved_at = self.owners.owned_weights((kind.api_version, kind.kind, ns, name))
        placement = want["spec"].get("placement") or {}
        if weights and (placement.get("replicaScheduling") or {}).get("replicaSchedulingType") != "Duplicated":
            # the autoscaler's per-cluster weights from feedback (H3) divide the whole total again
            want["spec"]["placement"] = {**placement, "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": static_weight_list(weights)}}}
            if moved_at:
                want["spec"]["rescheduleTriggeredAt"] = moved_at
        if existing is None:
            try:
                await self.registry.create(BINDING, want)
            except (AlreadyExists, Conflict):
                return 0.05  # created meanwhile: look again
            return None
        if existing["metadata"].get("deletionTimestamp"):
            return 1.0  # the old binding is still being cleaned up; create the new one after
        if normal_spec(existing.get("spec") or {}) == normal_spec(want["spec"]) and \
                all((existing["metadata"].get("labels") or {}).get(k) == v
                    for k, v in want["metadata"]["labels"].items()):
            return None
        new = copy.deepcopy(existing)
        spec = dict(want["spec"])
        trigger = (existing.get("spec") or {}).get("rescheduleTriggeredAt")
        if trigger and (parse_rfc3339(trigger) or 0.0) > (parse_rfc3339(spec.get("rescheduleTriggeredAt")) or 0.0):
            spec["rescheduleTriggeredAt"] = trigger  # the later trigger wins
        new["spec"] = spec
        new["metadata"]["labels"] = {**(existing["metadata"].get("labels") or {}), **want["metadata"]["labels"]}
        try:
            await self.registry.update(BINDING, new)
        except (Conflict, AlreadyExists):
            return 0.05
        return None


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
