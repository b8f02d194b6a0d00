"""How busy a simulated pod is: a fraction of its requests, optionally a sinusoid over time, so a
cluster's water level reflects use and not only requests."""

from __future__ import annotations

import math
import zlib
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


def pod_usage(pod: Obj, now: float, model: UsageModel) -> Resources:
    """Current usage of one pod (zero unless it runs on a node)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or is_terminal(pod) or not (pod.get("spec") or {}).get("nodeName"):
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
    memory = max(0.0, req.memory * mem_f) if req.memory else IDLE_MEMORY
    return Resources(cpu, memory, req.gpu)
