"""How busy a simulated pod is: a fraction of its requests, optionally a sinusoid over time, so a
cluster's water level reflects use and not only requests.

A workload can instead be given a CPU *demand* at run time (`drods sim load`, `LoadTable`): cores
its application needs on this cluster, shared evenly by its running pods — so adding replicas
lowers each pod's use, as it does behind a load balancer, and an autoscaler's loop closes."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from drods.sim.config import ANN_AMPLITUDE, ANN_CPU_UTIL, ANN_MEMORY_UTIL, ANN_PERIOD, UsageModel
from drods.sim.resources import Resources, is_terminal, pod_requests

Obj = dict[str, Any]
# A pod without requests still uses a little (what metrics-server shows for an idle container).
IDLE_CPU = 0.001  # cores
IDLE_MEMORY = 4 * 1024**2  # bytes


def _float(annotations: dict[str, str], key: str, default: float) -> float:
    try:
        return float(annotations[key])
    except (KeyError, ValueError):
        return default


def _running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not is_terminal(pod) and bool((pod.get("spec") or {}).get("nodeName"))


def owner_of(pod: Obj) -> tuple[str, str, str] | None:
    """(namespace, kind, name) of the workload that made the pod (a Deployment's pods name it, not a ReplicaSet)."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") and ref.get("name"):
            return str(meta.get("namespace") or "default"), str(ref["kind"]), str(ref["name"])
    return None


@dataclass
class LoadTable:
    """A demand per workload, set at run time: (namespace, kind, name) → cores (CPU) or Mbps
    (network traffic, `drods.sim.traffic`) on this cluster, shared by its running pods."""

    cpu: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def set(self, namespace: str, kind: str, name: str, cores: float | None) -> None:
        """Set a workload's demand; None clears it (its pods go back to the usage model)."""
        key = (namespace, kind, name)
        if cores is None:
            self.cpu.pop(key, None)
        elif cores < 0 or cores != cores:
            raise ValueError("a demand must be a non-negative number")
        else:
            self.cpu[key] = float(cores)

    def describe(self, unit: str = "cpu") -> list[dict[str, Any]]:
        return [{"namespace": ns, "kind": k, "name": n, unit: c} for (ns, k, n), c in sorted(self.cpu.items())]

    def shares(self, pods: Iterable[Obj]) -> dict[str, float]:
        """Pod uid (or namespace/name) → the cores its workload's demand gives it."""
        if not self.cpu:
            return {}
        members: dict[tuple[str, str, str], list[str]] = {}
        for pod in pods:
            owner = owner_of(pod)
            if owner in self.cpu and _running(pod):
                members.setdefault(owner, []).append(pod_key(pod))
        return {k: self.cpu[o] / len(keys) for o, keys in members.items() for k in keys}


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def pod_usage(pod: Obj, now: float, model: UsageModel, demand: float | None = None) -> Resources:
    """Current usage of one pod (zero unless it runs on a node); ``demand``: its share of its
    workload's CPU demand (`LoadTable.shares`), which replaces the CPU fraction."""
    if not _running(pod):
        return Resources()
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    cpu_f = _float(ann, ANN_CPU_UTIL, model.cpu)
    mem_f = _float(ann, ANN_MEMORY_UTIL, model.memory)
    amplitude = _float(ann, ANN_AMPLITUDE, model.amplitude)
    period = _float(ann, ANN_PERIOD, model.period)
    if amplitude and period > 0:
        # Each pod gets its own phase (from its uid) so a fleet of replicas doesn't move in lockstep.
        phase = (zlib.crc32(str(pod["metadata"].get("uid", "")).encode()) % 1000) / 1000 * 2 * math.pi
        wave = amplitude * math.sin(2 * math.pi * now / period + phase)
        cpu_f += wave
        mem_f += wave / 2  # memory moves less than CPU
    req = pod_requests(pod)
    cpu = max(0.0, req.cpu * cpu_f) if req.cpu else IDLE_CPU
    if demand is not None:
        cpu = max(demand, IDLE_CPU)
    memory = max(0.0, req.memory * mem_f) if req.memory else IDLE_MEMORY
    return Resources(cpu, memory, req.gpu)
