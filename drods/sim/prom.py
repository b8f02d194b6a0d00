"""Prometheus exposition of a sim's nodes and pods on its ``/metrics`` (bearer token, like the API).

Metric names follow node-exporter and kube-state-metrics, which is what DRO-DS's Prometheus reader
(`drods.monitor.series.DEFAULT_PROMQL`) queries, so a real Prometheus scraping sims feeds it as it
would real clusters; every series carries ``cluster="<sim name>"``:

* ``node_cpu_seconds_total{cpu,mode="idle"|"user"}`` (counter per core, integrated from usage),
  ``node_memory_MemTotal_bytes``, ``node_memory_MemAvailable_bytes``,
  ``node_network_receive_bytes_total`` / ``…transmit…`` (the emulated traffic, `drods.sim.traffic`)
* ``kube_node_status_capacity`` / ``kube_node_status_allocatable`` ``{resource,unit}``,
  ``kube_pod_status_phase{namespace,pod,phase}``
* ``drods_sim_node_requests{resource}``, ``drods_sim_node_usage{resource}`` (cores, bytes, devices),
  ``drods_sim_pods{phase}``, ``drods_sim_fault{mode}``
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from drods.model.quantity import quantity
from drods.sim.faults import MODES
from drods.sim.placer import rooms
from drods.sim.resources import node_allocatable, of_list
from drods.sim.running import RunningSim
from drods.sim.usage import pod_key, pod_usage


class SimCollector(Collector):
    def __init__(self, sim: RunningSim) -> None:
        self.sim = sim
        self._cpu_seconds: dict[tuple[str, int, str], float] = {}
        self._last: float | None = None
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        sim, cluster = self.sim, self.sim.cfg.name
        world = sim.controller.world
        now = time.time()
        usage = {n["metadata"]["name"]: (0.0, 0.0, 0.0) for n in world.nodes}
        phases: Counter[str] = Counter()
        pod_phase = GaugeMetricFamily("kube_pod_status_phase", "Pod phase (1 for the current one)",
                                      labels=["cluster", "namespace", "pod", "phase"])
        shares = sim.loads.shares(world.pods)
        for pod in world.pods:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            phases[phase] += 1
            pod_phase.add_metric([cluster, pod["metadata"].get("namespace", ""), pod["metadata"]["name"], phase], 1)
            node = (pod.get("spec") or {}).get("nodeName")
            if node in usage:
                u = pod_usage(pod, now, sim.cfg.usage, shares.get(pod_key(pod)))
                c, m, g = usage[node]
                usage[node] = (c + u.cpu, m + u.memory, g + u.gpu)
        room = rooms(world.nodes, world.pods)

        labels = ["cluster", "node"]
        capacity = GaugeMetricFamily("kube_node_status_capacity", "Node capacity",
                                     labels=[*labels, "resource", "unit"])
        allocatable = GaugeMetricFamily("kube_node_status_allocatable", "Node allocatable",
                                        labels=[*labels, "resource", "unit"])
        requests = GaugeMetricFamily("drods_sim_node_requests", "Sum of requests of pods on the node",
                                     labels=[*labels, "resource"])
        used = GaugeMetricFamily("drods_sim_node_usage", "Simulated usage on the node", labels=[*labels, "resource"])
        mem_total = GaugeMetricFamily("node_memory_MemTotal_bytes", "Memory", labels=labels)
        mem_avail = GaugeMetricFamily("node_memory_MemAvailable_bytes", "Memory available", labels=labels)
        cpu_seconds = CounterMetricFamily("node_cpu_seconds_total", "CPU seconds per core and mode",
                                          labels=[*labels, "cpu", "mode"])
        net_rx = CounterMetricFamily("node_network_receive_bytes_total", "Bytes received",
                                     labels=[*labels, "device"])
        net_tx = CounterMetricFamily("node_network_transmit_bytes_total", "Bytes sent", labels=[*labels, "device"])

        with self._lock:
            # the same counters the kubelet stats summary serves (`drods.sim.traffic`)
            sim.traffic.advance(world.nodes, world.pods, sim.cfg.usage, sim.traffic_demand.shares(world.pods), now)
            dt = 0.0 if self._last is None else max(0.0, now - self._last)
            self._last = now
            for node in world.nodes:
                name = node["metadata"]["name"]
                status = node.get("status") or {}
                cap = of_list(status.get("capacity"))
                alloc, max_pods = node_allocatable(node)
                cap_pods = int(quantity((status.get("capacity") or {}).get("pods", max_pods)))
                for fam, res, pods in ((capacity, cap, cap_pods), (allocatable, alloc, max_pods)):
                    fam.add_metric([cluster, name, "cpu", "core"], res.cpu)
                    fam.add_metric([cluster, name, "memory", "byte"], res.memory)
                    fam.add_metric([cluster, name, "nvidia_com_gpu", "integer"], res.gpu)
                    fam.add_metric([cluster, name, "pods", "integer"], pods)
                r = room[name]
                requests.add_metric([cluster, name, "cpu"], alloc.cpu - r.free.cpu)
                requests.add_metric([cluster, name, "memory"], alloc.memory - r.free.memory)
                requests.add_metric([cluster, name, "gpu"], alloc.gpu - r.free.gpu)
                c, m, g = usage.get(name, (0.0, 0.0, 0.0))
                used.add_metric([cluster, name, "cpu"], c)
                used.add_metric([cluster, name, "memory"], m)
                used.add_metric([cluster, name, "gpu"], g)
                mem_total.add_metric([cluster, name], cap.memory)
                mem_avail.add_metric([cluster, name], max(0.0, cap.memory - m))
                cores = max(1, math.ceil(cap.cpu))
                busy = min(1.0, c / cap.cpu) if cap.cpu else 0.0
                for i in range(cores):
                    for mode, frac in (("idle", 1.0 - busy), ("user", busy)):
                        key = (name, i, mode)
                        self._cpu_seconds[key] = self._cpu_seconds.get(key, 0.0) + frac * dt
                        cpu_seconds.add_metric([cluster, name, str(i), mode], self._cpu_seconds[key])
                counter = sim.traffic.nodes.get(name)
                net_rx.add_metric([cluster, name, "eth0"], counter.rx if counter is not None else 0.0)
                net_tx.add_metric([cluster, name, "eth0"], counter.tx if counter is not None else 0.0)
        yield from (capacity, allocatable, requests, used, mem_total, mem_avail, cpu_seconds, net_rx, net_tx,
                    pod_phase, *_phase_and_fault(cluster, phases, sim.fault.mode))


def sim_registry(sim: RunningSim) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SimCollector(sim))
    return registry


def _phase_and_fault(cluster: str, phases: Counter[str], fault_mode: str) -> tuple[Metric, Metric]:
    pod_counts = GaugeMetricFamily("drods_sim_pods", "Pods by phase", labels=["cluster", "phase"])
    for phase in ("Pending", "Running", "Succeeded", "Failed"):
        pod_counts.add_metric([cluster, phase], phases.get(phase, 0))
    fault = GaugeMetricFamily("drods_sim_fault", "Injected fault (1 for the current mode)", labels=["cluster", "mode"])
    for mode in MODES:
        fault.add_metric([cluster, mode], 1.0 if fault_mode == mode else 0.0)
    return pod_counts, fault
