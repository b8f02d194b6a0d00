"""The nodes (and the other tenant's preload pods) a sim starts with, built from its flags."""

from __future__ import annotations

import math
from typing import Any

from drods.api.routes.discovery import KUBE_GIT_VERSION
from drods.members import labels as L
from drods.model.quantity import format_cpu, format_memory
from drods.sim.config import ANN_AMPLITUDE, ANN_CPU_UTIL, ANN_MEMORY_UTIL, PRELOAD_NAMESPACE, NodePool, SimConfig
from drods.sim.resources import node_allocatable

Obj = dict[str, Any]


def node_name(cfg: SimConfig, index: int) -> str:
    return f"{cfg.name}-node-{index}"


def node_ip(index: int) -> str:
    return f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256 + 1}" if index else "10.0.0.1"


def _resources(cpu: float, memory: int, pool: NodePool) -> dict[str, str]:
    out = {"cpu": format_cpu(cpu), "memory": format_memory(memory), "pods": str(pool.max_pods),
           "ephemeral-storage": "100Gi", "hugepages-2Mi": "0"}
    if pool.gpus:
        out[L.GPU_RESOURCE] = str(pool.gpus)
    return out


def build_nodes(cfg: SimConfig) -> list[Obj]:
    nodes: list[Obj] = []
    index = 0
    for pool in cfg.pools:
        for _ in range(pool.count):
            name = node_name(cfg, index)
            zone = pool.zone or cfg.zone
            labels = {
                L.HOSTNAME: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/worker": "", L.INSTANCE_TYPE: pool.type_name, "type": "drods-sim",
            }
            for key, value in ((L.REGION, cfg.region), (L.ZONE, zone), (L.PROVIDER, cfg.provider),
                               (L.CITY, cfg.city), (L.GPU_PRODUCT, pool.gpu_model if pool.gpus else None)):
                if value:
                    labels[key] = value
            if pool.gpus:
                labels["nvidia.com/gpu.count"] = str(pool.gpus)
            ip = node_ip(index)
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"providerID": f"{cfg.provider or 'drods-sim'}://{cfg.region or ''}/{zone or ''}/{name}",
                         "podCIDR": f"10.244.{index % 256}.0/24"},
                "status": {
                    "capacity": _resources(pool.cpu, pool.memory, pool),
                    "allocatable": _resources(pool.cpu - cfg.reserved_cpu, pool.memory - cfg.reserved_memory, pool),
                    "conditions": node_conditions(True),
                    "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {
                        "kubeletVersion": KUBE_GIT_VERSION, "kubeProxyVersion": KUBE_GIT_VERSION,
                        "operatingSystem": "linux", "architecture": "amd64", "osImage": "DRO-DS simulated node",
                        "containerRuntimeVersion": "drods-sim://1.0", "kernelVersion": "", "machineID": name,
                        "systemUUID": name, "bootID": "",
                    },
                    "phase": "Running",
                },
            })
            index += 1
    return nodes


def node_conditions(ready: bool, since: str = "1970-01-01T00:00:00Z") -> list[Obj]:
    def cond(type_: str, status: bool, reason: str, message: str) -> Obj:
        return {"type": type_, "status": "True" if status else "False", "reason": reason, "message": message,
                "lastHeartbeatTime": since, "lastTransitionTime": since}

    return [
        cond("MemoryPressure", False, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", False, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", False, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond("Ready", ready, "KubeletReady" if ready else "KubeletNotReady",
             "kubelet is posting ready status" if ready else "simulated node is not ready"),
    ]


def preload_pods(cfg: SimConfig, nodes: list[Obj]) -> list[Obj]:
    """One pod per node in a namespace DRO-DS does not own, taking ``preload`` of the node and using
    all of what it requests, so the cluster looks busy to requests *and* to usage."""
    if cfg.preload <= 0:
        return []
    pods = []
    for node in nodes:
        alloc, _ = node_allocatable(node)
        cpu = math.floor(alloc.cpu * cfg.preload * 1000) / 1000
        memory = (int(alloc.memory * cfg.preload) // 1024**2) * 1024**2
        name = node["metadata"]["name"]
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"preload-{name}", "namespace": PRELOAD_NAMESPACE,
                         "labels": {"app": "preload", "sim.drods.io/preload": "true"},
                         "annotations": {ANN_CPU_UTIL: "1.0", ANN_MEMORY_UTIL: "1.0", ANN_AMPLITUDE: "0"}},
            "spec": {"nodeName": name, "restartPolicy": "Always",
                     "containers": [{"name": "load", "image": "drods-sim/load:1",
                                     "resources": {"requests": {"cpu": format_cpu(cpu),
                                                                "memory": format_memory(memory)}}}]},
            "status": {"phase": "Pending"},
        })
    return pods
