"""The ``kube`` module interpreter scripts get with ``require("kube")`` — the helpers Karmada gives
its Lua customizations, with the same names, arguments and results:

* ``kube.resourceAdd(q1, q2, ...)`` — the sum of quantities (``"250m"``, ``"1Gi"``), as a quantity;
* ``kube.getResourceQuantity(q)`` — a quantity as a number (``"500m"`` → 0.5);
* ``kube.accuratePodRequirements(podTemplate)`` — what one replica needs: ``resourceRequest`` (the
  pod's effective requests, Kubernetes' rule: the containers' sum or the largest init container,
  whichever is more, plus the pod overhead), ``nodeClaim`` (``nodeSelector``, ``tolerations``,
  ``hardNodeAffinity``), ``namespace`` and ``priorityClassName``;
* ``kube.getPodDependencies(podTemplate, namespace)`` — the ConfigMaps, Secrets, ServiceAccount and
  PersistentVolumeClaims the pod names, as ``{apiVersion, kind, namespace, name}`` references.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from drods.model.pod_references import pod_spec_references
from drods.model.quantity import quantity


def canonical(value: Decimal) -> str:
    """A quantity as text an API server accepts: whole numbers plain, fractions in milli-units."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value())}m"


def resource_add(*quantities: Any) -> str:
    return canonical(sum((quantity(q) for q in quantities), Decimal(0)))


def get_resource_quantity(q: Any) -> float:
    return float(quantity(q))


def _container_requests(c: Mapping[str, Any]) -> dict[str, Decimal]:
    """A container's requests; a resource with only a limit requests its limit (Kubernetes' default)."""
    res = c.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {str(k): quantity(v) for k, v in merged.items()}


def pod_resource_request(pod_spec: Mapping[str, Any]) -> dict[str, str]:
    total: dict[str, Decimal] = {}
    for c in pod_spec.get("containers") or []:
        for k, v in _container_requests(c).items():
            total[k] = total.get(k, Decimal(0)) + v
    for c in pod_spec.get("initContainers") or []:
        for k, v in _container_requests(c).items():
            total[k] = max(total.get(k, Decimal(0)), v)
    for k, v in (pod_spec.get("overhead") or {}).items():
        total[str(k)] = total.get(str(k), Decimal(0)) + quantity(v)
    return {k: canonical(v) for k, v in sorted(total.items()) if v}


def accurate_pod_requirements(template: Mapping[str, Any] | None) -> dict[str, Any]:
    template = template or {}
    ps = template.get("spec") or {}
    out: dict[str, Any] = {}
    claim: dict[str, Any] = {}
    if ps.get("nodeSelector"):
        claim["nodeSelector"] = ps["nodeSelector"]
    if ps.get("tolerations"):
        claim["tolerations"] = ps["tolerations"]
    hard = (((ps.get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if hard:
        claim["hardNodeAffinity"] = hard
    if claim:
        out["nodeClaim"] = claim
    if requests := pod_resource_request(ps):
        out["resourceRequest"] = requests
    ns = (template.get("metadata") or {}).get("namespace")
    if ns:
        out["namespace"] = ns
    if ps.get("priorityClassName"):
        out["priorityClassName"] = ps["priorityClassName"]
    return out


def get_pod_dependencies(template: Mapping[str, Any] | None, namespace: Any = None) -> list[dict[str, str]]:
    ps = (template or {}).get("spec") or {}
    ns = str(namespace or "default")
    return [{"apiVersion": "v1", "kind": kind, "namespace": ns, "name": name}
            for kind, name in sorted(pod_spec_references(ps))]


HELPERS: dict[str, Callable[..., Any]] = {
    "resourceAdd": resource_add,
    "getResourceQuantity": get_resource_quantity,
    "accuratePodRequirements": accurate_pod_requirements,
    "getPodDependencies": get_pod_dependencies,
}
