"""Emulated network traffic of a simulated member: cumulative ``rxBytes`` / ``txBytes`` per node and
per pod, which `drods.sim.stats_summary` serves as the kubelet does and a reader turns into rates by
differencing two samples — as with a real kubelet.

A running pod moves ``sim.drods.io/network-mbps`` (annotation on its template; default
``UsageModel.network_mbps``) megabits per second, half received and half sent, following the same
sinusoid as its CPU (``sim.drods.io/usage-amplitude`` / ``usage-period-seconds``, relative to the
rate). ``drods sim traffic`` gives a workload a demand instead (Mbps its running pods share), so a
test or a demo can start and end a burst. A node moves ``UsageModel.node_network_mbps`` (0.2) of its
own beside its pods. Counters only grow: they advance, at the rate in force,
whenever they are read, and a node's counter keeps what its departed pods moved.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from drods.sim.config import ANN_AMPLITUDE, ANN_NETWORK_MBPS, ANN_PERIOD, UsageModel
from drods.sim.resources import is_terminal
from drods.sim.usage import pod_key

Obj = dict[str, Any]
BYTES_PER_MBIT = 1e6 / 8


def _float(annotations: dict[str, str], key: str, default: float) -> float:
    try:
        return float(annotations[key])
    except (KeyError, ValueError):
        return default


def running(pod: Obj) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and not is_terminal(pod) and bool((pod.get("spec") or {}).get("nodeName"))


def pod_mbps(pod: Obj, now: float, model: UsageModel, demand: float | None = None) -> float:
    """Megabits per second (in + out) a pod moves now; ``demand``: its share of its workload's."""
    if not running(pod):
        return 0.0
    if demand is not None:
        return max(demand, 0.0)
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    base = _float(ann, ANN_NETWORK_MBPS, model.network_mbps)
    amplitude = _float(ann, ANN_AMPLITUDE, model.amplitude)
    period = _float(ann, ANN_PERIOD, model.period)
    if amplitude and period > 0:
        phase = (zlib.crc32(str(pod["metadata"].get("uid", "")).encode()) % 1000) / 1000 * 2 * math.pi
        base *= 1.0 + amplitude * math.sin(2 * math.pi * now / period + phase)
    return max(base, 0.0)


@dataclass
class Counter:
    rx: float = 0.0  # bytes
    tx: float = 0.0
    at: float | None = None

    def advance(self, mbps: float, now: float) -> None:
        if self.at is not None and now > self.at:
            moved = mbps * BYTES_PER_MBIT * (now - self.at) / 2
            self.rx += moved
            self.tx += moved
        self.at = now if self.at is None else max(self.at, now)

    def doc(self, stamp: str) -> Obj:
        return {"time": stamp, "name": "eth0", "rxBytes": int(self.rx), "txBytes": int(self.tx),
                "interfaces": [{"name": "eth0", "rxBytes": int(self.rx), "txBytes": int(self.tx)}]}


@dataclass
class TrafficMeter:
    """Cumulative byte counters per node and per pod, advanced when read."""

    nodes: dict[str, Counter] = field(default_factory=dict)
    pods: dict[str, Counter] = field(default_factory=dict)

    def advance(self, nodes: list[Obj], pods: list[Obj], model: UsageModel, shares: dict[str, float],
                now: float) -> None:
        per_node: dict[str, float] = {n["metadata"]["name"]: model.node_network_mbps for n in nodes}
        live: set[str] = set()
        for pod in pods:
            key = pod_key(pod)
            live.add(key)
            rate = pod_mbps(pod, now, model, shares.get(key))
            self.pods.setdefault(key, Counter()).advance(rate, now)
            node = (pod.get("spec") or {}).get("nodeName")
            if node in per_node:
                per_node[node] += rate
        for name, rate in per_node.items():
            self.nodes.setdefault(name, Counter()).advance(rate, now)
        for gone in self.pods.keys() - live:
            del self.pods[gone]

    def rates(self, pods: list[Obj], model: UsageModel, shares: dict[str, float], now: float) -> float:
        """Mbps (in + out) all running pods move now."""
        return sum(pod_mbps(p, now, model, shares.get(pod_key(p))) for p in pods)
