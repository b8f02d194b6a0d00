"""How the steering components hand an object to propagation: a template with a Binding that
delivers it whole to named clusters, like any object a policy selects (push: applied to the member;
pull: in the member's Work); and what the members' copies publish back (load-balancer addresses)."""

from __future__ import annotations

from typing import Any

from drods.model.kinds import BINDING

Obj = dict[str, Any]


def duplicated_binding(name: str, resource: Obj, clusters: list[str], labels: dict[str, str]) -> Obj:
    """A Binding that has propagation deliver ``resource`` whole to ``clusters``; ``labels`` name the
    component that manages it (``multicluster.io/managed-by``), so the detector leaves it alone."""
    meta = resource["metadata"]
    return {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"resource": {"apiVersion": resource["apiVersion"], "kind": resource["kind"],
                                  "namespace": meta["namespace"], "name": meta["name"]},
                     "replicas": 1, "targetClusters": sorted(clusters),
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}


def load_balancer(statuses: list[Obj]) -> Obj:
    """Every distinct load-balancer entry the members' copies report, in a stable order."""
    seen: dict[str, Obj] = {}
    for st in statuses:
        for entry in ((st.get("loadBalancer") or {}).get("ingress")) or []:
            if isinstance(entry, dict):
                seen.setdefault(repr(sorted(entry.items())), entry)
    return {"ingress": [seen[k] for k in sorted(seen)]} if seen else {}
