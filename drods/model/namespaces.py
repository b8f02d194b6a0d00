"""A Namespace's lifecycle, as kube-apiserver keeps it: the rules, as pure functions.

A Namespace carries ``spec.finalizers: ["kubernetes"]`` from its creation. Deleting it only marks
it (``deletionTimestamp``, ``status.phase: Terminating``) while that finalizer is there; the
namespace controller (`drods.controllers.namespaces`) deletes what is stored in it, then removes
the finalizer, and the Namespace goes. Meanwhile nothing new may be created in it, so what the
controller deleted cannot come back behind it. ``default``, ``kube-system`` and ``kube-public``
may not be deleted at all (kube-apiserver's NamespaceLifecycle admission: every cluster relies on
them being there); they and ``kube-node-lease`` are there from the start (`SYSTEM`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from drods.model.kinds import WORKLOAD_KINDS, Kind

Obj = dict[str, Any]

NAMESPACE: Kind = next(k for k in WORKLOAD_KINDS if k.kind == "Namespace")
FINALIZER = "kubernetes"  # the namespace controller's, in ``spec.finalizers``
IMMORTAL = frozenset({"default", "kube-system", "kube-public"})
# the namespaces every cluster has from its start (kube-apiserver creates them): stored objects here too
SYSTEM = ("default", "kube-system", "kube-public", "kube-node-lease")
FINALIZE = "finalize"  # the subresource that alone changes ``spec.finalizers``


NAME_LABEL = "kubernetes.io/metadata.name"


def labelled(ns: Obj) -> Obj:
    """The Namespace with the label kube-apiserver keeps on every one (1.21+), its name: namespace
    selectors (NetworkPolicies, webhooks, `kubectl get ns -l …`) rely on it."""
    meta = dict(ns.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: str(meta.get("name") or "")}
    return {**ns, "metadata": meta}


def defaulted(ns: Obj) -> Obj:
    """A new Namespace as kube-apiserver stores it: with the ``kubernetes`` finalizer and Active, and
    its name label."""
    out = labelled(ns)
    spec = dict(out.get("spec") or {})
    finalizers = [f for f in spec.get("finalizers") or [] if isinstance(f, str)]
    spec["finalizers"] = finalizers if FINALIZER in finalizers else [*finalizers, FINALIZER]
    out["spec"] = spec
    out["status"] = {**(out.get("status") or {}), "phase": "Active"}
    return out


def spec_finalizers(ns: Mapping[str, Any]) -> list[str]:
    spec = ns.get("spec")
    return list(spec.get("finalizers") or []) if isinstance(spec, dict) else []


def finalized(ns: Mapping[str, Any]) -> bool:
    """No finalizer of either kind is left: a deleted Namespace may go."""
    return not spec_finalizers(ns) and not (ns.get("metadata") or {}).get("finalizers")


def terminating(ns: Mapping[str, Any]) -> bool:
    return bool((ns.get("metadata") or {}).get("deletionTimestamp"))


def marked(ns: Obj, now: str) -> Obj:
    """``ns`` as a delete leaves it: stamped, Terminating, and held by the ``kubernetes`` finalizer
    until the namespace controller has emptied it (also when stored before it was given one)."""
    out = defaulted(copy.deepcopy(ns))
    out["metadata"]["deletionTimestamp"] = now
    out["metadata"]["deletionGracePeriodSeconds"] = 0
    out["status"]["phase"] = "Terminating"
    return out


def kept_on_update(current: Mapping[str, Any], incoming: Obj) -> Obj:
    """An update of a Namespace leaves ``spec.finalizers`` as they are (only `FINALIZE` changes
    them): a ``kubectl replace`` without a spec must not let a later delete skip the cleanup."""
    spec = dict(incoming.get("spec") or {})
    kept = spec_finalizers(current)
    if kept:
        spec["finalizers"] = kept
    else:
        spec.pop("finalizers", None)
    return {**incoming, "spec": spec}


def without_finalizer(ns: Mapping[str, Any], finalizer: str = FINALIZER) -> Obj:
    """What the namespace controller writes through `FINALIZE` once the namespace is empty."""
    out = copy.deepcopy(dict(ns))
    out["spec"] = {**(out.get("spec") or {}), "finalizers": [f for f in spec_finalizers(ns) if f != finalizer]}
    return out


# The conditions kube-controller-manager's namespace controller keeps on a Terminating namespace, with
# its reasons and messages when all is well (`kubectl describe ns` shows them): False unless content or
# its finalizers remain.
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
_SETTLED = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted",
                                        "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def deletion_conditions(resources: Mapping[str, int], finalizers: Mapping[str, int],
                        previous: Sequence[Mapping[str, Any]], now: str) -> list[Obj]:
    """The Terminating namespace's conditions: what is left of its content (``resources``:
    ``<plural>.<group>`` → objects, as kube words it) and the finalizers holding it (→ objects);
    a condition keeps its ``lastTransitionTime`` while its status stays."""
    wanted = {kind: ("False", reason, message) for kind, (reason, message) in _SETTLED.items()}
    if resources:
        left = ", ".join(sorted(f"{r} has {n} resource instances" for r, n in resources.items()))
        wanted[CONTENT_REMAINING] = ("True", "SomeResourcesRemain", f"Some resources are remaining: {left}")
    if finalizers:
        held = ", ".join(sorted(f"{f} in {n} resource instances" for f, n in finalizers.items()))
        wanted[FINALIZERS_REMAINING] = ("True", "SomeFinalizersRemain",
                                        f"Some content in the namespace has finalizers remaining: {held}")
    before = {c.get("type"): c for c in previous}
    out = []
    for kind, (status, reason, message) in wanted.items():
        old = before.get(kind) or {}
        since = old.get("lastTransitionTime") if old.get("status") == status and old.get("lastTransitionTime") else now
        out.append({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    return out
