"""Karmada's ``FederatedResourceQuota`` (``policy.karmada.io/v1alpha1``, namespaced).

``spec.overall`` bounds what the namespace's workloads may request across every cluster: the
scheduler refuses a decision whose placed replicas × per-replica requests, added to what the
namespace's other bindings hold, would exceed it (`drods.schedulerd.quota`). ``spec.staticAssignments``
go to each named member as a ResourceQuota of the same name in the namespace (one Work each,
`drods.controllers.quota_assignments`); ``status`` counts what placements request
(`drods.controllers.federated_quota`).

The resources enforced when placing are those a binding's per-replica requests carry: ``cpu`` /
``requests.cpu``, ``memory`` / ``requests.memory``, ``ephemeral-storage`` /
``requests.ephemeral-storage``, ``nvidia.com/gpu`` / ``requests.nvidia.com/gpu`` and ``pods``; any
other name (limits, object counts) is left to the members' ResourceQuotas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drods.model.meta import check_label_key
from drods.model.quantity import GIB, quantity

# A ResourceList: resource name → quantity (``"500m"``, ``2``, ``"4Gi"``).
ResourceList = dict[str, str | int | float]

# the ResourceQuota names a placement is checked against, and the request each one counts
ENFORCED: Mapping[str, str] = {
    "cpu": "cpu", "requests.cpu": "cpu",
    "memory": "memory", "requests.memory": "memory",
    "ephemeral-storage": "storage", "requests.ephemeral-storage": "storage",
    "nvidia.com/gpu": "gpu", "requests.nvidia.com/gpu": "gpu",
    "pods": "pods",
}


# kube-apiserver's standard ResourceQuota names (any other name must carry a domain: ``nvidia.com/gpu``,
# ``count/deployments.apps``), as Karmada's validating webhook checks them
STANDARD_QUOTA_NAMES = frozenset({
    "cpu", "memory", "ephemeral-storage", "storage", "pods", "services", "replicationcontrollers",
    "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims", "services.nodeports",
    "services.loadbalancers", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"})


def _resource_name(name: str) -> str | None:
    """Why ``name`` is no ResourceQuota resource name (None: it is one)."""
    try:
        check_label_key(name)  # a resource name is a qualified name, as a label key is
    except ValueError:
        return "not a qualified name ([DNS-subdomain/]name)"
    bare = name.removeprefix("requests.").removeprefix("limits.")
    if "/" not in name and name not in STANDARD_QUOTA_NAMES and not bare.startswith("hugepages-"):
        return f"not a standard quota resource ({', '.join(sorted(STANDARD_QUOTA_NAMES))}; others name a domain)"
    return None


def _valid(v: ResourceList) -> ResourceList:
    for name, q in v.items():
        if (why := _resource_name(name)) is not None:
            raise ValueError(f"{name}: {why}")
        try:
            if quantity(q) < 0:
                raise ValueError(f"{name}: a quantity may not be negative")
        except (ValueError, TypeError, ArithmeticError) as e:
            raise ValueError(f"{name}: {q!r} is not a quantity ({e})") from None
    return v


class StaticClusterAssignment(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterName: str = Field(min_length=1)
    hard: ResourceList

    @field_validator("hard")
    @classmethod
    def _quantities(cls, v: ResourceList) -> ResourceList:
        return _valid(v)


class FederatedResourceQuotaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    overall: ResourceList
    staticAssignments: list[StaticClusterAssignment] = Field(default_factory=list)

    @field_validator("overall")
    @classmethod
    def _quantities(cls, v: ResourceList) -> ResourceList:
        return _valid(v)

    @field_validator("staticAssignments")
    @classmethod
    def _one_per_cluster(cls, v: list[StaticClusterAssignment]) -> list[StaticClusterAssignment]:
        names = [a.clusterName for a in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"clusterName listed twice: {', '.join(twice)}")
        return v

    @model_validator(mode="after")
    def _assignments_within_overall(self) -> FederatedResourceQuotaSpec:
        """Karmada's webhook rule: every assigned resource is in ``overall``, and the assignments of each
        add up to no more than it."""
        total: dict[str, Any] = {}
        for i, a in enumerate(self.staticAssignments):
            for name, q in a.hard.items():
                if name not in self.overall:
                    raise ValueError(f"staticAssignments[{i}].hard.{name}: not a resource of overall")
                total[name] = total.get(name, 0) + quantity(q)
        for name, assigned in total.items():
            if assigned > quantity(self.overall[name]):
                raise ValueError(f"overall.{name}: {self.overall[name]} is less than the static assignments' "
                                 f"sum of it")
        return self


def in_units(name: str, value: Any) -> float:
    """A quota quantity in the units a binding's requests use (cores, GiB, devices, pods)."""
    q = quantity(value)
    return float(q / GIB) if ENFORCED.get(name) in ("memory", "storage") else float(q)


def format_used(name: str, amount: float) -> str:
    """What ``overallUsed`` shows for ``amount`` (in request units) of ``name``."""
    unit = ENFORCED.get(name)
    if unit in ("memory", "storage"):
        b = round(amount * GIB)
        return f"{b // 1024**2}Mi" if b and b % 1024**2 == 0 else str(b)
    if unit == "cpu":
        milli = round(amount * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return str(round(amount))
