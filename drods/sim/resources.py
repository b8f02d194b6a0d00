"""Resource arithmetic the sim's placer, status and metrics share (one definition of "requested")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drods.members import summary
from drods.members.labels import GPU_RESOURCE
from drods.model.quantity import quantity

Obj = dict[str, Any]
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Resources:
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes
    gpu: float = 0.0  # devices

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu)

    def fits_in(self, free: Resources) -> bool:
        eps = 1e-9
        return self.cpu <= free.cpu + eps and self.memory <= free.memory + eps and self.gpu <= free.gpu + eps

    def short_of(self, free: Resources) -> list[str]:
        """The resources ``free`` lacks, named as the kube-scheduler names them."""
        eps = 1e-9
        out = []
        if self.cpu > free.cpu + eps:
            out.append("cpu")
        if self.memory > free.memory + eps:
            out.append("memory")
        if self.gpu > free.gpu + eps:
            out.append(GPU_RESOURCE)
        return out


def of_list(resources: dict[str, Any] | None) -> Resources:
    r = resources or {}
    return Resources(float(quantity(r.get("cpu"))), float(quantity(r.get("memory"))),
                     float(quantity(r.get(GPU_RESOURCE))))


def pod_requests(pod: Obj) -> Resources:
    """Effective requests, by the one definition DRO-DS uses for members (`drods.members.summary`)."""
    r = summary.pod_requests(pod)
    return Resources(r.cpu, r.memory, r.gpu)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def node_allocatable(node: Obj) -> tuple[Resources, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return of_list(alloc), int(quantity(alloc.get("pods", 110)))


def node_ready(node: Obj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def condition(obj: Obj, type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None
