"""What DRO-DS sends to one member for one Binding: the workload template's copy with that cluster's
share of the replicas, its overrides, ownership metadata, and the objects it depends on.

Conventions (M3, documented in the README "Member clusters"):

* **Namespace mapping** — a namespaced object goes to the *same namespace* in the member; DRO-DS
  creates the namespace when it is missing (labelled ``multicluster.io/managed-by=drods``) and never
  deletes a namespace (it may hold other tenants' objects).
* **Ownership** — every copy carries the label ``multicluster.io/managed-by=drods`` and
  ``multicluster.io/binding`` plus annotations with the binding's name and uid, the template's
  generation and a hash of the manifest. DRO-DS updates and deletes only objects with that label;
  an object of the same name that it did not create is reported as a conflict and left alone.
* **Replicas** — Deployments and StatefulSets get the cluster's share in ``spec.replicas``; a Job's
  ``parallelism`` is the share and ``completions`` are split in proportion (largest remainder);
  a kind an interpreter customization gives a replica path gets its share there
  (`drods.model.interpreter`); everything else (Services, ConfigMaps, Secrets, DaemonSets,
  Namespaces) is duplicated unchanged.
* **Dependents** — ConfigMaps and Secrets a pod template references (volumes, projected volumes,
  envFrom, env valueFrom, imagePullSecrets), its ServiceAccount (``serviceAccountName``) and the
  PersistentVolumeClaims its volumes claim, Services in the namespace whose selector matches the pod
  template's labels, and Ingresses in the namespace whose backends name one of those Services go to
  the same clusters, before the workload; so do the objects a kind's interpreter customization says
  it names (a CronJob), and a custom resource's CustomResourceDefinition (first). The pod template is
  where the kind's interpretation says it is.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from drods.controllers.overrides import OverrideError, apply_overrides, containers, pod_spec
from drods.controllers.work_record import manifests_digest
from drods.model import jsondoc
from drods.model.annotations import (
    ANN_BINDING,
    ANN_BINDING_UID,
    ANN_CLUSTER,
    ANN_DEPENDENT_OF,
    ANN_HASH,
    ANN_OVERRIDES,
    ANN_TEMPLATE_GENERATION,
    BINDING_LABEL,
    LAST_APPLIED,
    MANAGED_BY,
    MANAGER,
    STATEFUL_ROLE_LABEL,
    manifest_hash,
)
from drods.model.dispatch import CONFLICT_ANNOTATION, PRESERVE_ANNOTATION
from drods.model.interpreter import DependencyRef, Interpretation
from drods.model.pod_references import pod_spec_references
from drods.model.policy import ClusterOverridePolicySpec
from drods.model.selector import selects
from drods.model.work import Ref, label_value

Obj = dict[str, Any]

REPLICA_KINDS = frozenset({"Deployment", "StatefulSet", "Job"})
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job"})
_KEEP_META = ("name", "namespace", "labels", "annotations")
_OUR_ANNOTATIONS = (ANN_BINDING, ANN_BINDING_UID, ANN_TEMPLATE_GENERATION, ANN_HASH, ANN_CLUSTER, ANN_OVERRIDES,
                    ANN_DEPENDENT_OF, LAST_APPLIED)


@dataclass
class ManifestSet:
    """What one binding wants on one cluster: ``manifests`` in apply order (dependents first).

    A plan the binding controller keeps between passes is ``summary()``: everything but the
    manifests (kept for every binding × cluster they weighed as much as the Works themselves); a pass
    that must write a Work plans it again."""

    binding: str
    manifests: list[Obj] = field(default_factory=list)
    refs: list[Ref] = field(default_factory=list)
    hash: str = ""
    namespace: str | None = None
    main: Ref | None = None
    main_hash: str | None = None  # ``manifest_hash`` of the main manifest (the member copy's annotation)
    digest: bytes = b""  # ``manifests_digest(manifests)``: compared with a stored Work's
    complete: bool = True  # False: a summary, without ``manifests``
    # the replicas the main manifest asks of its cluster, overrides applied (None: no ``spec.replicas``):
    # an OverridePolicy may set another count than the placement's share, and the copy is judged by it
    replicas: int | None = None

    def summary(self) -> ManifestSet:
        return replace(self, manifests=[], complete=False)


def digest(obj: Any) -> str:
    return hashlib.sha256(jsondoc.canonical(obj)).hexdigest()[:16]


def strip(template: Obj) -> Obj:
    """The template as a member should see it: no control-plane identity, status or apply history."""
    meta = template.get("metadata") or {}
    out = {k: copy.deepcopy(v) for k, v in template.items() if k not in ("metadata", "status")}
    out["metadata"] = {k: copy.deepcopy(meta[k]) for k in _KEEP_META if meta.get(k) not in (None, {}, "")}
    anns = out["metadata"].get("annotations")
    if anns:
        for a in _OUR_ANNOTATIONS:
            anns.pop(a, None)
        if not anns:
            out["metadata"].pop("annotations")
    return out


def split_largest_remainder(total: int, weights: list[int]) -> list[int]:
    """``total`` in proportion to ``weights`` (Hamilton's method); ties to the earlier entry."""
    wsum = sum(weights)
    if wsum <= 0 or total <= 0:
        return [0] * len(weights)
    exact = [total * w / wsum for w in weights]
    out = [int(x) for x in exact]
    rest = total - sum(out)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:rest]:
        out[i] += 1
    return out


def set_replicas(obj: Obj, share: int, job_completions: int | None = None) -> None:
    """A workload's share in one cluster; a kind without replicas is left as it is (a ``spec`` added
    to a ConfigMap would be an undeclared field, which a member's server-side apply refuses)."""
    kind = obj.get("kind")
    if kind in ("Deployment", "StatefulSet"):
        obj.setdefault("spec", {})["replicas"] = share
    elif kind == "Job":
        spec = obj.setdefault("spec", {})
        spec["parallelism"] = share
        if job_completions is not None:
            spec["completions"] = job_completions


def job_completions(template: Obj, shares: list[int]) -> list[int | None]:
    completions = (template.get("spec") or {}).get("completions")
    if not isinstance(completions, int):
        return [None] * len(shares)
    return list(split_largest_remainder(completions, shares))


def quantities_as_strings(obj: Obj) -> None:
    """Container resource quantities as strings (``{"nvidia.com/gpu": 2}`` from an override → ``"2"``),
    the form a Kubernetes API server stores and clients expect."""
    for c in containers(obj):
        res = c.get("resources")
        if not isinstance(res, dict):
            continue
        for part in ("limits", "requests"):
            values = res.get(part)
            if isinstance(values, dict):
                res[part] = {k: (format(v, "g") if isinstance(v, float) else str(v))
                             if isinstance(v, int | float) and not isinstance(v, bool) else v
                             for k, v in values.items()}


def own(obj: Obj, *, binding: str, binding_uid: str, template_generation: int, cluster: str,
        overrides: list[str], dependent_of: str | None = None, overwrite: bool = False,
        preserve: bool = False) -> Obj:
    """Add the ownership metadata and the manifest hash (of everything else) to a member copy;
    ``overwrite`` lets the applier adopt an object the member already has (``Overwrite``), ``preserve``
    keeps the copy, released, where it would be deleted (``preserveResourcesOnDeletion``)."""
    meta = obj.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    labels[MANAGED_BY] = MANAGER
    labels[BINDING_LABEL] = label_value(binding)
    anns = meta.setdefault("annotations", {})
    anns[ANN_BINDING] = binding
    anns[ANN_BINDING_UID] = binding_uid
    anns[ANN_TEMPLATE_GENERATION] = str(template_generation)
    anns[ANN_CLUSTER] = cluster
    if overrides:
        anns[ANN_OVERRIDES] = ",".join(overrides)
    if dependent_of:
        anns[ANN_DEPENDENT_OF] = dependent_of
    if overwrite:
        anns[CONFLICT_ANNOTATION] = "overwrite"
    if preserve:
        anns[PRESERVE_ANNOTATION] = "true"
    anns.pop(ANN_HASH, None)
    anns[ANN_HASH] = digest(obj)
    return obj


# ---- dependents --------------------------------------------------------------------------------


def referenced(template: Obj, pod: Obj | None = None) -> set[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, ServiceAccount and PersistentVolumeClaim a pod template
    uses (``pod``: the pod template where the interpreter says it is, else the built-in places)."""
    ps = pod.get("spec") if pod is not None else pod_spec(template)
    if not isinstance(ps, dict):
        return set()
    return pod_spec_references(ps)


def ingress_backends(ingress: Obj) -> set[str]:
    """The Service names an Ingress routes to (default backend and every rule path)."""
    spec = ingress.get("spec") or {}
    backends = [spec.get("defaultBackend")]
    for rule in spec.get("rules") or []:
        backends += [p.get("backend") for p in ((rule or {}).get("http") or {}).get("paths") or []
                     if isinstance(p, dict)]
    return {str(b["service"]["name"]) for b in backends
            if isinstance(b, dict) and isinstance(b.get("service"), dict) and b["service"].get("name")}


def dependents(template: Obj, lookup: Callable[[str, str, str], Obj | None],
               services: Callable[[str], Iterable[Obj]],
               ingresses: Callable[[str], Iterable[Obj]] = lambda ns: (), *,
               how: Interpretation | None = None,
               named: Callable[[str, str, str, str], Obj | None] = lambda av, k, ns, n: None,
               matching: Callable[[DependencyRef], list[Obj]] = lambda ref: [],
               ) -> tuple[list[Obj], set[tuple[str, str, str]]]:
    """(the dependent objects that exist, every (kind, namespace, name) looked for — to watch; a
    name of ``*`` for a kind's every object in a namespace).

    ``how`` (the kind's interpretation) says where the pod template is and which objects the
    workload names that follow it (looked up with ``named(apiVersion, kind, namespace, name)``, or
    ``matching(ref)`` for a label selector)."""
    ns = str((template.get("metadata") or {}).get("namespace") or "default")
    found: list[Obj] = []
    wanted: set[tuple[str, str, str]] = set()
    if how is not None:
        for ref in sorted(how.dependency_refs(template), key=lambda r: r.order):
            wanted.add((ref.kind, ref.namespace, ref.name or "*"))
            if ref.selector is not None:
                found += [o for o in matching(ref) if o not in found]
            elif (o := named(ref.api_version, ref.kind, ref.namespace, ref.name)) is not None and o not in found:
                found.append(o)
    pod = dict(p) if how is not None and how.pod_template and (p := how.pod_template_of(template)) else None
    if pod is None and (not built_in_group(template) or pod_spec(template) is None):
        return _once(found), wanted  # a custom kind's pod template is where its interpretation says, or none
    # a GetDependencies script is the kind's whole answer (Karmada's interpreter runs one implementation
    # of an operation): the pod template's ConfigMaps, Secrets, account and claims are not added to it
    if how is None or how.lua is None or not how.lua.has("dependencyInterpretation"):
        uses = {(kind, ns, name) for kind, name in referenced(template, pod)}
        wanted |= uses
        found += [o for kind, _, name in sorted(uses) if (o := lookup(kind, ns, name)) is not None]
    selected = sorted((s for s in services(ns) if selects(s, template, pod)), key=lambda s: str(s["metadata"]["name"]))
    found += selected
    names = {str(s["metadata"]["name"]) for s in selected}
    found += sorted((i for i in ingresses(ns) if ingress_backends(i) & names),
                    key=lambda i: str(i["metadata"]["name"]))
    return _once(found), wanted


def built_in_group(obj: Obj) -> bool:
    """A Kubernetes kind (core or an undotted group: apps, batch): its pod template is found where
    Kubernetes keeps one; a custom kind's only where its interpretation declares it."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return "." not in group


def _once(objs: list[Obj]) -> list[Obj]:
    """Each object once, in its first place: a script may name what a pod template also names."""
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for o in objs:
        meta = o.get("metadata") or {}
        key = (str(o.get("apiVersion")), str(o.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        if key not in seen:
            seen.add(key)
            out.append(o)
    return out


# ---- the plan for one binding ------------------------------------------------------------------


@dataclass
class Target:
    cluster: str
    share: int
    labels: dict[str, str]
    role: str | None = None  # F3: Primary / Replica of a stateful topology (labels the main object)
    fields: dict[str, str] = field(default_factory=dict)  # provider / region / zone / city (fieldSelector)
    conflict: str = "Abort"  # the Binding's conflictResolution: Overwrite marks the manifests
    preserve: bool = False  # the Binding's preserveResourcesOnDeletion: marks the manifests


def plan_cluster(binding: str, binding_uid: str, template: Obj, target: Target, deps: list[Obj],
                 policies: list[tuple[str, ClusterOverridePolicySpec]], completions: int | None,
                 how: Interpretation | None = None) -> ManifestSet:
    """The manifest set for one cluster; raises `OverrideError` when an override does not fit."""
    gen = int((template.get("metadata") or {}).get("generation") or 1)
    main_ref = Ref.of(template)
    manifests: list[Obj] = []
    for dep in deps:
        m = strip(dep)
        applied = apply_overrides(m, target.cluster, target.labels, policies, target.fields)
        manifests.append(own(m, binding=binding, binding_uid=binding_uid, cluster=target.cluster,
                             template_generation=int((dep.get("metadata") or {}).get("generation") or 1),
                             overrides=applied, dependent_of=str(main_ref),
                             overwrite=target.conflict == "Overwrite", preserve=target.preserve))
    m = strip(template)
    if how is not None and not how.built_in:
        # where the kind's customization says its replicas are; a failed revision is not sent (the
        # whole template's count on every member was: 18 copies for 6)
        if (unrevised := how.set_replicas(m, target.share)) is not None:
            raise OverrideError(f"replicas not revised: {unrevised}")
    else:
        set_replicas(m, target.share, completions)
    applied = apply_overrides(m, target.cluster, target.labels, policies, target.fields)
    quantities_as_strings(m)
    if target.role:
        m.setdefault("metadata", {}).setdefault("labels", {})[STATEFUL_ROLE_LABEL] = target.role.lower()
    manifests.append(own(m, binding=binding, binding_uid=binding_uid, template_generation=gen,
                         cluster=target.cluster, overrides=applied, overwrite=target.conflict == "Overwrite",
                         preserve=target.preserve))
    refs = [Ref.of(x) for x in manifests]
    ns = str((template.get("metadata") or {}).get("namespace") or "") or None
    count = (m.get("spec") or {}).get("replicas")
    return ManifestSet(binding, manifests, refs, digest([manifest_hash(x) for x in manifests]), ns, main_ref,
                       manifest_hash(manifests[-1]), manifests_digest(manifests),
                       replicas=count if isinstance(count, int) and not isinstance(count, bool) else None)


def plan(binding: str, binding_uid: str, template: Obj, targets: list[Target], deps: list[Obj],
         policies: list[tuple[str, ClusterOverridePolicySpec]],
         how: Interpretation | None = None) -> dict[str, ManifestSet | OverrideError]:
    """The manifest set per target cluster (or the override error that keeps it from being applied)."""
    kind = str(template.get("kind"))
    completions = job_completions(template, [t.share for t in targets]) if kind == "Job" \
        else [None] * len(targets)
    out: dict[str, ManifestSet | OverrideError] = {}
    for t, c in zip(targets, completions, strict=True):
        try:
            out[t.cluster] = plan_cluster(binding, binding_uid, template, t, deps, policies, c, how)
        except OverrideError as e:
            out[t.cluster] = e
    return out
