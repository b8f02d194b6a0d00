"""What the resource detector derives from a workload and the policies, as pure functions: the
Binding's name, the per-replica requests, the policy that wins and the Binding it wants (the rules
are in `drods.controllers.detector`'s docstring).

They live below the components because several derive the same things: the autoscalers and migration
name a workload's Binding, the steering directory walks the detected kinds and the what-if dry run
derives the Binding a workload would get.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from drods.model.annotations import (
    DETECTOR_NAME,
    KEEPS_DATA_LABEL,
    MANAGED_BY,
    RESOURCE_KIND_LABEL,
    WORKLOAD_CLASS_LABEL,
)
from drods.model.interpreter import Interpreter, interpretation
from drods.model.karmada import KarmadaPropagationSpec
from drods.model.kinds import (
    BINDING,
    KARMADA_PROPAGATION_KINDS,
    PROPAGATION_POLICY,
    RESOURCE_PLACEMENT_POLICY,
    TEMPLATE_KINDS,
    Kind,
)
from drods.model.namespaces import SYSTEM
from drods.model.policy import PropagationPolicySpec, ResourcePlacementPolicySpec, ResourceSelector
from drods.model.quantity import cores, count, gib
from drods.model.volume_claims import workload_claims

log = logging.getLogger(__name__)


class Stored(Protocol):
    """What `decode_policy` reads of a stored policy (a `drods.store.KeyValue`)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> bytes: ...


DETECTED_KINDS: tuple[Kind, ...] = TEMPLATE_KINDS
# Namespaces every cluster has of its own: never placed by a policy (Karmada's namespace sync skips them too)
RESERVED_NAMESPACES = frozenset(SYSTEM)


def karmada_policy_key(binding: Mapping[str, Any]) -> str | None:
    """The store key of the Karmada PropagationPolicy or ClusterPropagationPolicy that placed ``binding``
    (its ``policyRef``); None when another kind of policy did."""
    ref = (binding.get("spec") or {}).get("policyRef") or {}
    kind = next((k for k in KARMADA_PROPAGATION_KINDS
                 if k.api_version == ref.get("apiVersion") and k.kind == ref.get("kind")), None)
    if kind is None or not ref.get("name"):
        return None
    return kind.key(str(ref["name"]), ref.get("namespace") or None)


def placeable(kind: Kind, obj: Mapping[str, Any]) -> bool:
    """A Namespace is placed only by a cluster-wide policy that selects it, never one of the members' own
    (`RESERVED_NAMESPACES`, ``kube-*``); a member otherwise gets a namespace where a workload lands."""
    if kind.kind != "Namespace":
        return True
    name = str((obj.get("metadata") or {}).get("name") or "")
    return name not in RESERVED_NAMESPACES and not name.startswith("kube-")


def binding_name(kind: str, namespace: str, name: str) -> str:
    """``<kind>-<namespace>-<name>`` (namespace empty for a cluster-scoped kind, as in Karmada's object
    references); names beyond 253 characters are shortened with a hash."""
    full = f"{kind.lower()}-{namespace}-{name}"
    if len(full) <= 253:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    return f"{full[:240].rstrip('-.')}-{digest}"


def binding_is_for(binding: Mapping[str, Any] | None, kind: str, namespace: str, name: str, *,
                   api_version: str | None = None, uid: str | None = None) -> bool:
    """Whether ``binding`` (one found under `binding_name`'s name) places the object ``kind``
    ``namespace``/``name`` (namespace empty for a cluster-scoped kind) — its ``spec.resource`` names it,
    in ``api_version``'s API group and with ``uid`` when those are given and the Binding records them.

    The computed name is not unique (Secret ``team-a/s1`` and Secret ``team/a-s1`` are both
    ``secret-team-a-s1``): every lookup by that name asks this first and takes a Binding of another
    object for none, so no one acts on another namespace's Binding through an object of its own."""
    if binding is None:
        return False
    ref = (binding.get("spec") or {}).get("resource")
    if not isinstance(ref, Mapping) or ref.get("kind") != kind or ref.get("name") != name:
        return False
    if str(ref.get("namespace") or "") != (namespace or ""):
        return False
    if api_version is not None and ref.get("apiVersion") is not None \
            and _group(str(ref["apiVersion"])) != _group(api_version):
        return False
    return not (uid and ref.get("uid") and ref["uid"] != uid)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


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


def requested(requirements: Mapping[str, Any]) -> dict[str, Any]:
    """Karmada's ReplicaRequirements (``resourceRequest``: quantities) in the units of `pod_requests`."""
    request = requirements.get("resourceRequest")
    return pod_requests({"spec": {"containers": [{"resources": {"requests": dict(request)}}]}}) \
        if isinstance(request, Mapping) else {}


def replicas_of(kind: Kind, obj: Mapping[str, Any], interpreter: Interpreter | None = None) -> int:
    how = interpreter.of(kind.api_version, kind.kind) if interpreter else interpretation(kind.api_version, kind.kind)
    return how.replicas_of(obj)


# F3: kinds whose replicas share state (ordinal identity, volumes): one cluster holds them all unless
# the policy itself says how to spread them (a stateful topology, replica scheduling, spread constraints)
KEPT_WHOLE = frozenset({"StatefulSet"})


TOPOLOGY_FIELDS = ("statefulTopology", "replicaScheduling", "spreadConstraints")


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
    karmada: KarmadaTerms | None = None  # a Karmada policy's claim and activation terms

    def order(self) -> tuple[int, int, int, int, str]:
        """Karmada's precedence: namespaced first, then explicit priority, then how specifically the
        selector names the resource, then (DRO-DS) a ResourcePlacementPolicy, then the name."""
        return (self.scope, -self.priority, -self.specificity, self.kind_rank, self.name)

    def ref(self) -> dict[str, str]:
        return {"apiVersion": self.policy_kind.api_version, "kind": self.policy_kind.kind, "name": self.name,
                **({"namespace": self.namespace} if self.namespace else {})}

    def preempts(self, holder: PolicyMatch) -> bool:
        """Karmada's ``preemption: Always``: a PropagationPolicy takes a resource from a lower-priority
        one or from any ClusterPropagationPolicy; a ClusterPropagationPolicy only from a lower-priority
        ClusterPropagationPolicy. DRO-DS's own kinds always re-choose (level-triggered)."""
        if self.karmada is not None and not self.karmada.preemption:
            return False
        if self.scope == 0:
            return holder.scope == 1 or self.priority > holder.priority
        return holder.scope == 1 and self.priority > holder.priority


@dataclass(frozen=True, slots=True)
class KarmadaTerms:
    """What a Karmada propagation policy says beyond placement (the detector acts on them)."""

    preemption: bool = False
    lazy: bool = False
    dependent_overrides: tuple[str, ...] = ()
    priority_class: str | None = None


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
    karmada: KarmadaTerms | None = None


def decode_policy(kind: Kind) -> Callable[[Stored], _Policy | None]:
    def decode(kv: Stored) -> _Policy | None:
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
                return _Policy(kind, name, kp.priority, tuple(kp.resourceSelectors), placement, (), (), ns,
                               _karmada_extra(spec), _karmada_terms(kp))
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


def _karmada_extra(spec: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The Karmada policy fields a Binding takes as they are (how its Works are dispatched)."""
    return tuple((k, spec[k]) for k in ("conflictResolution", "suspension", "failover", "preserveResourcesOnDeletion")
                 if spec.get(k))


def _karmada_terms(kp: KarmadaPropagationSpec) -> KarmadaTerms:
    pc = kp.schedulePriority.priorityClassName if kp.schedulePriority is not None else None
    return KarmadaTerms(kp.preemption == "Always", kp.activationPreference == "Lazy",
                        tuple(kp.dependentOverrides), pc)


def best_policy(policies: list[_Policy], kind: Kind, obj: Mapping[str, Any],
                claimed: Mapping[str, Any] | None = None) -> PolicyMatch | None:
    """The policy that places ``obj``. ``claimed`` is the ``policyRef`` of its current Binding: a
    Karmada policy that still matches keeps its claim unless another preempts it (Karmada's rule)."""
    matches = _matches(policies, kind, obj) if placeable(kind, obj) else []
    if not matches:
        return None
    best = min(matches, key=PolicyMatch.order)
    held = {k: claimed.get(k) for k in ("apiVersion", "kind", "name", "namespace") if claimed and claimed.get(k)}
    holder = next((m for m in matches if m.ref() == held), None)
    if holder is None or holder.karmada is None:
        return best
    challengers = [m for m in matches if m is not holder and m.preempts(holder)]
    return min(challengers, key=PolicyMatch.order) if challengers else holder


def _matches(policies: list[_Policy], kind: Kind, obj: Mapping[str, Any]) -> list[PolicyMatch]:
    out: list[PolicyMatch] = []
    for p in policies:
        spec = max((s for s in (selector_specificity(sel, kind, obj) for sel in p.selectors) if s is not None),
                   default=None)
        if spec is None or (p.namespace is not None and not kind.namespaced):  # a namespaced policy: its namespace's
            continue
        if p.namespace is not None and p.namespace != ((obj.get("metadata") or {}).get("namespace") or "default"):
            continue
        out.append(PolicyMatch(0 if p.namespace is not None else 1, spec, p.priority,
                               0 if p.kind is RESOURCE_PLACEMENT_POLICY else 1, p.name, p.kind,
                               p.placement, p.target_names, p.target_labels, p.namespace, p.extra, p.karmada))
    return out


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


class ReplicasUnknown(Exception):
    """The kind's GetReplicas script failed on the object: what its Binding would ask for is unknown."""


def desired_binding(kind: Kind, obj: Mapping[str, Any], match: PolicyMatch,
                    interpreter: Interpreter | None = None) -> dict[str, Any]:
    """The Binding object the detector wants for ``obj`` under ``match`` (replicas and requests read
    through ``interpreter``, else the built-in interpretation). Raises `ReplicasUnknown` when a
    GetReplicas script fails on ``obj`` (Karmada builds no binding then either)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"]}
    if kind.namespaced:  # a cluster-scoped object's reference names no namespace (as Karmada's)
        ref["namespace"] = meta.get("namespace") or "default"
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    how = interpreter.of(kind.api_version, kind.kind) if interpreter else interpretation(kind.api_version, kind.kind)
    needs = how.scripted_needs(obj)  # a Karmada GetReplicas script: its count and per-replica requests
    if needs is None and (why := how.replicas_unknown(obj)) is not None:
        raise ReplicasUnknown(why)
    spec: dict[str, Any] = {
        "resource": ref,
        "replicas": needs.replicas if needs is not None else how.replicas_of(obj),
        "priority": match.priority,
        "resources": requested(needs.requirements) if needs is not None else pod_requests(how.pod_template_of(obj)),
        "policyRef": match.ref(),
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
    groups = affinity_groups(placement.get("workloadAffinity"), meta.get("labels") or {})
    if groups:
        spec["affinityGroups"] = groups
    labels = {MANAGED_BY: DETECTOR_NAME, RESOURCE_KIND_LABEL: kind.singular}
    wclass = (meta.get("labels") or {}).get(WORKLOAD_CLASS_LABEL)
    if wclass:
        labels[WORKLOAD_CLASS_LABEL] = wclass  # H2: the scheduler's Dissonance score reads it here
    if workload_claims(obj):
        labels[KEEPS_DATA_LABEL] = "true"  # F3: its data moves only with a plan
    return {
        "apiVersion": BINDING.api_version, "kind": BINDING.kind,
        "metadata": {"name": binding_name(kind.kind, str(ref.get("namespace") or ""), meta["name"]),
                     "labels": labels},
        "spec": spec,
    }


def affinity_groups(rules: Any, labels: Mapping[str, str]) -> dict[str, str]:
    """Karmada's ``affinityGroups`` of a workload: ``<labelKey>=<labelValue>`` for each term of
    ``placement.workloadAffinity`` whose key the workload's template carries (a workload without
    the label is in no group)."""
    out: dict[str, str] = {}
    for term, field in (("affinity", "affinityGroup"), ("antiAffinity", "antiAffinityGroup")):
        key = ((rules or {}).get(term) or {}).get("groupByLabelKey") if isinstance(rules, dict) else None
        if key and key in labels:
            out[field] = f"{key}={labels[key]}"
    return out


def static_weight_list(weights: Mapping[str, float]) -> list[dict[str, object]]:
    """The Binding's ``weightPreference.staticWeightList`` for ``weights`` (integer weights, ‰)."""
    return [{"targetCluster": {"clusterNames": [c]}, "weight": max(1, round(w * 1000))}
            for c, w in sorted(weights.items())]


def autoscaled(spec: dict[str, Any], replicas: int | None, weights: Mapping[str, float],
               moved_at: str | None) -> None:
    """A derived Binding ``spec`` under the workload's autoscaler: the total it decided
    (``status.desiredReplicas``) instead of the template's, and the per-cluster weights it set from
    feedback (H3) dividing the whole total again (not for a Duplicated placement)."""
    if replicas is not None:
        spec["replicas"] = replicas
    placement = spec.get("placement") or {}
    if weights and (placement.get("replicaScheduling") or {}).get("replicaSchedulingType") != "Duplicated":
        spec["placement"] = {**placement, "replicaScheduling": {
            "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": static_weight_list(weights)}}}
        if moved_at:
            spec["rescheduleTriggeredAt"] = moved_at
