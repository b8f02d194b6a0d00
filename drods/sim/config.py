"""What one simulated member cluster looks like: its node pools, topology and usage model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from drods.model.quantity import GIB, quantity
from drods.sim.distance import Link

# Pods DRO-DS does not own (another tenant) that `--preload` puts on every node.
PRELOAD_NAMESPACE = "other-tenant"
# Pod (or pod template) annotations that override the sim's usage model for one workload.
ANN_CPU_UTIL = "sim.drods.io/cpu-utilisation"  # fraction of the CPU request in use, e.g. "0.8"
ANN_MEMORY_UTIL = "sim.drods.io/memory-utilisation"  # fraction of the memory request in use
ANN_AMPLITUDE = "sim.drods.io/usage-amplitude"  # sinusoid amplitude, as a fraction of the request
ANN_PERIOD = "sim.drods.io/usage-period-seconds"  # sinusoid period
ANN_NETWORK_MBPS = "sim.drods.io/network-mbps"  # megabits per second a running pod moves (in + out)
ANN_RUN_SECONDS = "sim.drods.io/run-seconds"  # a Job's (or run-to-completion pod's) running time
ANN_EXIT_CODE = "sim.drods.io/exit-code"  # its exit status when it ends: non-zero fails the pod (and so a Job)


def default_state_dir() -> Path:
    """Where running sims register themselves (name → ports) for `drods sim fault`."""
    env = os.environ.get("DRODS_SIM_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("DRODS_DATA_DIR", str(Path.home() / ".drods"))) / "sims"


def parse_cpu(text: str) -> float:
    """``"8"``, ``"8000m"`` or ``"2.5"`` → cores."""
    value = float(quantity(text.strip()))
    if value <= 0:
        raise ValueError(f"CPU must be positive, got {text!r}")
    return value


def parse_memory(text: str) -> int:
    """A Kubernetes quantity (``"32Gi"``, ``"64G"``); a bare number means GiB (``"32"`` = 32Gi)."""
    text = text.strip()
    value = quantity(text) * GIB if _is_plain_number(text) else quantity(text)
    if value <= 0:
        raise ValueError(f"memory must be positive, got {text!r}")
    return int(value)


def _is_plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class NodePool:
    """``count`` identical nodes."""

    count: int
    cpu: float  # cores
    memory: int  # bytes
    gpus: int = 0
    gpu_model: str | None = None
    zone: str | None = None  # overrides the cluster's zone for this pool
    instance_type: str | None = None
    max_pods: int = 110

    def __post_init__(self) -> None:
        if self.count < 0 or self.gpus < 0 or self.max_pods <= 0:
            raise ValueError("count and gpus must be >= 0 and max-pods > 0")

    @property
    def type_name(self) -> str:
        """``node.kubernetes.io/instance-type``: given, else derived from the shape (``sim-8c32g``)."""
        if self.instance_type:
            return self.instance_type
        mem_gib = self.memory / GIB
        mem = f"{mem_gib:g}" if mem_gib >= 1 else f"{self.memory // 1024**2}m"
        name = f"sim-{self.cpu:g}c{mem}g"
        if self.gpus:
            model = (self.gpu_model or "gpu").lower().replace(" ", "-")
            name += f"-{self.gpus}x{model}"
        return name.replace(".", "p")

    @classmethod
    def parse(cls, spec: str) -> NodePool:
        """``count=2,cpu=16,memory=64Gi,gpus=4,gpu-model=A100,zone=z1,instance-type=x,max-pods=110``."""
        fields: dict[str, str] = {}
        for part in spec.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"node pool item {part!r} is not key=value")
            fields[key.strip().lower().replace("_", "-")] = value.strip()
        known = {"count", "cpu", "memory", "gpus", "gpu-model", "zone", "instance-type", "max-pods"}
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown node pool key(s): {', '.join(sorted(unknown))}")
        if "cpu" not in fields or "memory" not in fields:
            raise ValueError("a node pool needs cpu= and memory=")
        return cls(
            count=int(fields.get("count", "1")), cpu=parse_cpu(fields["cpu"]), memory=parse_memory(fields["memory"]),
            gpus=int(fields.get("gpus", "0")), gpu_model=fields.get("gpu-model"), zone=fields.get("zone"),
            instance_type=fields.get("instance-type"), max_pods=int(fields.get("max-pods", "110")),
        )


@dataclass(frozen=True)
class UsageModel:
    """Default usage of a pod as a fraction of its requests, optionally a sinusoid over time."""

    cpu: float = 0.5
    memory: float = 0.6
    amplitude: float = 0.0
    period: float = 600.0
    network_mbps: float = 2.0  # per running pod, in + out (`drods.sim.traffic`)
    node_network_mbps: float = 0.2  # per node beside its pods (kubelet, system daemons), in + out


@dataclass
class SimConfig:
    name: str
    pools: list[NodePool]
    host: str = "127.0.0.1"
    port: int = 0  # 0 = any free port (the real one is written to the state file and kubeconfig)
    control_port: int = 0  # loopback, for `drods sim fault` (0 = any free port; written to the state file)
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    city: str | None = None
    preload: float = 0.0  # fraction of every node's allocatable cpu/memory taken by another tenant
    reserved_cpu: float = 0.0  # per node: capacity - allocatable
    reserved_memory: int = 0
    usage: UsageModel = field(default_factory=UsageModel)
    startup_seconds: float = 0.0  # a bound pod becomes Ready after this long
    job_seconds: float = 5.0  # a Job's pod runs this long, then Succeeded
    volume_bandwidth_mbps: float = 1000.0  # a volume copy's pull from another sim (drods.sim.storage)
    data_dir: Path | None = None  # store, keys, certificates (default: state_dir/NAME)
    state_dir: Path = field(default_factory=default_state_dir)
    kubeconfig_out: Path | None = None
    tls: bool = True
    resync_seconds: float = 5.0
    latency_to: dict[str, Link] = field(default_factory=dict)  # probing site → emulated link (C2)

    def __post_init__(self) -> None:
        if self.volume_bandwidth_mbps <= 0:
            raise ValueError("--volume-bandwidth-mbps must be positive")
        if not 0.0 <= self.preload < 1.0:
            raise ValueError("--preload must be in [0, 1)")
        if not self.pools or sum(p.count for p in self.pools) == 0:
            raise ValueError("a sim needs at least one node")
        for p in self.pools:
            if self.reserved_cpu >= p.cpu or self.reserved_memory >= p.memory:
                raise ValueError("reserved cpu/memory must be smaller than a node")

    @property
    def data_path(self) -> Path:
        return self.data_dir if self.data_dir is not None else self.state_dir / self.name

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)
