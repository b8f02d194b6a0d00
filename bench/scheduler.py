"""Scheduler benchmark: a synthetic fleet, M tasks through filter+score+select+divide+assume.

    python bench/scheduler.py --clusters 1000 --tasks 20000 [--mode algorithm] [--seed 1]

Prints the run's conditions, then one JSON line with at least
``clusters, tasks, mode, p50_ms, p99_ms, throughput_per_s, peak_rss_mb``; the varied algorithm run
adds ``cpu_ms_per_decision`` (process CPU over the loop), the e2e run with a scheduler process
``scheduler_cpu_ms_per_binding`` (that process's CPU from the first write to the last decision):
on a shared machine their ratio is the steadier measure of what the path beyond the decision costs.

``--mode e2e --store sqlite|etcd``: the fleet's Cluster objects and status documents go into a
fresh store (a throw-away etcd for ``etcd``), ``drods scheduler`` runs as its own process (or
``--scheduler inprocess``), and M Bindings are written through the object registry (``--inflight``
concurrent writes, optionally at ``--rate`` per second). Latency is from the write call to the
decision persisted in the Binding's status, seen through a store watch (``p99_after_first_second_ms``:
of the bindings written after the first second, without the start-up); throughput is decided
bindings over the span from the first write to the last decision. Decisions accumulate (no churn):
late tasks may find the fleet full, which is still a decision. The conditions count the decisions
per status transaction (bindings written together share their store revision).
Objects are sealed at rest as the default ``encryption`` list says (SEC2); ``--no-seal-bindings``
leaves Bindings out of it, for the bench and the scheduler alike (docs/performance.md).

The algorithm runs in this process with the C allocator set as every long-running DRO-DS process
sets it at start (``drods.machinery.memory.tune_allocator``: freed heap kept for the next arrays);
``--allocator glibc`` leaves glibc's defaults, under which each decision over 10,000 clusters paid
~140 page faults for arrays it had just given back (every figure this bench printed before
2026-12-07 was measured so).

``--mode algorithm --shape storm``: the varied fleet, and only the failure storm's bindings (``bench/memory.py``:
1-3 replicas of 0.5 cpu / 1 GiB, no placement), what the scheduler decides again when a fleet returns.

``--mode algorithm --shape matched --division AvailableReplicas|Static|Duplicated|WaterLevel
--fleet FILE``: one fixed binding (a Deployment, 12 replicas x 500m / 1Gi, first scheduling) on
the fleet in FILE (a JSON list of clusters: name, region, zone, provider, cpu, cpu_allocated,
mem_gib, mem_allocated_gib, pods, pods_allocated, nodes; ``*_allocated`` is both the reported use
and the requests, every node can hold a replica). ``Static`` is one equal-weight rule per cluster
(``targetCluster.clusterNames: [name]``, weight 1). Each decision is timed (wall and process CPU);
its placement is then assumed and forgotten, untimed, so every decision sees the same fleet.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.machinery.memory import tune_allocator  # noqa: E402
from drods.model.binding import (  # noqa: E402
    BindingSpec,
    NetworkRequirements,
    ObjectReference,
    ReplicaRequirements,
)
from drods.model.cluster import ClusterSpec, CostModel, GpuOffer, NetworkProfile, StorageOffer, Taint  # noqa: E402
from drods.model.dataset import DatasetRead  # noqa: E402
from drods.model.placement import (  # noqa: E402
    ClusterAffinity,
    FieldSelector,
    FieldSelectorRequirement,
    Placement,
    ReplicaScheduling,
    SpreadConstraint,
    StaticClusterWeight,
    Toleration,
    WeightPreference,
)
from drods.scheduler import Profile, Scheduler, Snapshot, Task  # noqa: E402

REGIONS = [f"region-{i}" for i in range(12)]
PROVIDERS = ["aws", "gcp", "azure", "onprem"]
CITIES = ["DFW", "LHR", "FRA", "NRT", "SIN", "SYD", "GRU", "JFK", "SFO", "CDG", "AMS", "BOM"]
GPU_MODELS = ["A100", "H100", "T4", "L4"]
GPU_PERF = {"A100": 1.0, "H100": 3.2, "T4": 0.3, "L4": 0.5}


FleetRow = tuple[str, dict[str, str], ClusterSpec, bool, dict[str, Any]]


CLASSES = ("latency-sensitive", "cpu-batch", "gpu-training", "io-heavy")


def fleet_rows(n: int, rng: np.random.Generator, prices: bool = True, offers: bool = False) -> list[FleetRow]:
    """Random capacities, loads, labels, regions, taints, costs: (name, labels, spec, ready, status).
    ``offers``: GPUs as counts per model (``spec.gpus``, allocation in ``gpuByModel``) and storage
    tiers with capacities (``spec.storage``), from the same draws."""
    rows: list[FleetRow] = []
    for i in range(n):
        region = REGIONS[int(rng.integers(len(REGIONS)))]
        cpu = float(rng.choice([64, 128, 256, 512, 1024, 2048]))
        mem = cpu * float(rng.choice([2, 4, 8]))
        gpu = float(rng.choice([0, 0, 0, 8, 16, 64]))
        load = float(rng.uniform(0.05, 0.6))
        node_cpu = float(rng.choice([8, 16, 32, 64]))
        spec = ClusterSpec(
            region=region,
            zone=f"{region}-{'abc'[int(rng.integers(3))]}",
            provider=PROVIDERS[int(rng.integers(len(PROVIDERS)))],
            city=CITIES[int(rng.integers(len(CITIES)))],
            capabilities=[c for c, p in (("tls-encryption", 0.5), ("gpu", 1.0 if gpu else 0.0),
                                         ("fpga", 0.05)) if rng.random() < p],
            gpuModels=[GPU_MODELS[int(rng.integers(len(GPU_MODELS)))]] if gpu else [],
            storageTiers=["ssd", "hdd"] if rng.random() < 0.7 else ["hdd"],
            taints=[Taint(key="dedicated", value="batch", effect="NoSchedule")] if rng.random() < 0.05 else [],
            cost=_priced(prices, CostModel(cpuCoreHour=float(rng.uniform(0.01, 0.08)), memoryGiBHour=0.004,
                                           gpuHour=float(rng.uniform(0.5, 3)))),
            network=NetworkProfile(bandwidthMbps=float(rng.choice([1000, 10000, 40000])),
                                   latencyMs={c: float(rng.uniform(1, 150)) for c in CITIES[:4]}),
        )
        if offers:
            spec = spec.model_copy(update={
                "gpus": [GpuOffer(model=m, count=int(gpu), relativePerformance=GPU_PERF[m]) for m in spec.gpuModels],
                "gpuModels": [], "storage": [StorageOffer(tier=t, capacityGiB=5000.0) for t in spec.storageTiers],
                "storageTiers": []})
        status = {
            "timestamp": "2024-01-01T00:00:00Z", "source": "push",
            "cpu": {"capacity": cpu, "allocatable": cpu * 0.95, "allocated": cpu * load,
                    "used": cpu * load * float(rng.uniform(0.6, 1.1))},
            "memory": {"capacity": mem, "allocatable": mem * 0.95, "allocated": mem * load * 0.9},
            "gpu": {"capacity": gpu, "allocated": float(np.floor(gpu * load))},
            "pods": {"capacity": cpu * 8, "used": cpu * load * 4},
            "storage": {"capacity": 10_000.0, "available": float(rng.uniform(1000, 9000))},
            "largestNodeFree": {"cpu": node_cpu * float(rng.uniform(0.2, 1.0)),
                                "memory": node_cpu * 4 * float(rng.uniform(0.2, 1.0)),
                                "gpu": 8.0 if gpu else 0.0},
            "network": {"inMbps": float(rng.uniform(0, 500)), "outMbps": float(rng.uniform(0, 500))},
        }
        if offers:
            status["gpuByModel"] = {g.model: {"allocated": float(np.floor(gpu * load))} for g in spec.gpus}
            status["storageByTier"] = {t.tier: {"allocated": 1000.0} for t in spec.storage}
        labels = {"env": ["prod", "staging", "dev"][int(rng.integers(3))],
                  "tier": ["gold", "silver", "bronze"][int(rng.integers(3))]}
        rows.append((f"cluster-{i:05d}", labels, spec, rng.random() > 0.02, status))
    return rows


def _priced(prices: bool, cost: CostModel) -> CostModel | None:
    """The cost model, or none (the random draws happen either way, so the fleet is the same)."""
    return cost if prices else None


def build_fleet(n: int, rng: np.random.Generator, prices: bool = True, offers: bool = False) -> Snapshot:
    snap = Snapshot(capacity=max(16, n))
    for name, labels, spec, ready, status in fleet_rows(n, rng, prices, offers):
        snap.upsert_cluster(name, labels, spec, ready, status)
    return snap


def build_templates(k: int, n_clusters: int, rng: np.random.Generator) -> list[BindingSpec]:
    """A pool of varied task shapes (affinities, GPUs, spread, static weights, ...)."""
    out: list[BindingSpec] = []
    for _ in range(k):
        kind = rng.random()
        res = ReplicaRequirements(cpu=float(rng.choice([0.1, 0.25, 0.5, 1, 2, 4])),
                                  memory=float(rng.choice([0.25, 0.5, 1, 2, 4, 8])))
        kw: dict[str, Any] = {}
        pl: dict[str, Any] = {}
        if kind < 0.10:
            res = ReplicaRequirements(cpu=4, memory=16, gpu=int(rng.choice([1, 2])),
                                      gpuModel=GPU_MODELS[int(rng.integers(len(GPU_MODELS)))])
        elif kind < 0.30:
            regions = list(rng.choice(REGIONS, size=int(rng.integers(1, 4)), replace=False))
            pl["clusterAffinity"] = ClusterAffinity(fieldSelector=FieldSelector(matchExpressions=[
                FieldSelectorRequirement(key="region", operator="In", values=regions)]))
        elif kind < 0.38:
            pl["clusterTolerations"] = [Toleration(key="dedicated", operator="Equal", value="batch",
                                                   effect="NoSchedule")]
            kw["capabilities"] = ["tls-encryption"]
        elif kind < 0.43:
            pl["spreadConstraints"] = [SpreadConstraint(spreadByField="region", minGroups=2, maxGroups=3)]
        elif kind < 0.47:
            names = [f"cluster-{int(i):05d}" for i in rng.choice(n_clusters, size=min(3, n_clusters),
                                                                    replace=False)]
            pl["replicaScheduling"] = ReplicaScheduling(weightPreference=WeightPreference(staticWeightList=[
                StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[nm]), weight=j + 1)
                for j, nm in enumerate(names)]))
        elif kind < 0.52:
            pl["replicaScheduling"] = ReplicaScheduling(replicaDivisionPreference="Aggregated")
        elif kind < 0.55:
            names = [f"cluster-{int(i):05d}" for i in rng.choice(n_clusters, size=min(3, n_clusters),
                                                                    replace=False)]
            pl["clusterAffinity"] = ClusterAffinity(clusterNames=names)
            pl["replicaScheduling"] = ReplicaScheduling(replicaSchedulingType="Duplicated")
        elif kind < 0.60:
            kw["network"] = NetworkRequirements(identifier=CITIES[int(rng.integers(4))], maxLatencyMs=100)
        elif kind < 0.63:
            kw["targetClusters"] = [f"cluster-{int(rng.integers(n_clusters)):05d}"]
        replicas = int(rng.choice([1, 1, 2, 3, 5, 10, 20]))
        out.append(BindingSpec(replicas=replicas, resources=res, placement=Placement(**pl), **kw))
    return out


MATCHED_DIVISIONS = ("AvailableReplicas", "Static", "Duplicated", "WaterLevel")
# bench/memory.py's failure storm: 1-3 replicas of 0.5 cpu / 1 GiB, no placement (the default policy)
STORM_SHAPES = [BindingSpec(replicas=k, resources=ReplicaRequirements(cpu=0.5, memory=1.0)) for k in (1, 2, 3)]


def load_matched_fleet(path: str) -> Snapshot:
    """The fleet file as a snapshot: allocated = requests = use, no node-size limit."""
    rows = json.loads(Path(path).read_text())
    snap = Snapshot(capacity=max(16, len(rows)))
    for c in rows:
        spec = ClusterSpec(region=c.get("region"), zone=c.get("zone"), provider=c.get("provider"))
        status = {
            "timestamp": "2024-01-01T00:00:00Z", "source": "push",
            "cpu": {"capacity": float(c["cpu"]), "allocatable": float(c["cpu"]),
                    "allocated": float(c["cpu_allocated"]), "used": float(c["cpu_allocated"])},
            "memory": {"capacity": float(c["mem_gib"]), "allocatable": float(c["mem_gib"]),
                       "allocated": float(c["mem_allocated_gib"]), "used": float(c["mem_allocated_gib"])},
            "pods": {"capacity": float(c["pods"]), "used": float(c["pods_allocated"])},
        }
        snap.upsert_cluster(str(c["name"]), {}, spec, True, status)
    return snap


def matched_binding(division: str, names: list[str]) -> BindingSpec:
    """The binding of the Karmada comparison: Deployment, 12 replicas x 500m / 1Gi, in ``division``."""
    rs: ReplicaScheduling
    if division == "Duplicated":
        rs = ReplicaScheduling(replicaSchedulingType="Duplicated")
    elif division == "Static":
        rs = ReplicaScheduling(replicaDivisionPreference="Weighted", weightPreference=WeightPreference(
            staticWeightList=[StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[nm]), weight=1)
                              for nm in names]))
    else:
        rs = ReplicaScheduling(replicaDivisionPreference="Weighted",
                               weightPreference=WeightPreference(dynamicWeight=division))  # type: ignore[arg-type]
    return BindingSpec(
        resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="bench", namespace="default"),
        replicas=12, resources=ReplicaRequirements(cpu=0.5, memory=1.0),
        placement=Placement(replicaScheduling=rs))


def run_matched(args: argparse.Namespace) -> dict[str, Any]:
    if not args.fleet or args.division not in MATCHED_DIVISIONS:
        raise SystemExit("bench/scheduler.py: --shape matched needs --fleet FILE and --division "
                         + "|".join(MATCHED_DIVISIONS))
    t0 = time.perf_counter()
    snap = load_matched_fleet(args.fleet)
    build_s = time.perf_counter() - t0
    spec = matched_binding(args.division, list(snap.names))
    profile = Profile.load(args.profile) if args.profile else Profile.default()
    sched = Scheduler(profile, rng_seed=args.seed)
    perf = time.perf_counter
    cpu = time.process_time
    for _ in range(args.warmup):
        r = sched.schedule(Task(spec, name="bench"), snap)
        if r.placement:
            snap.assume(r.placement, spec.resources, key="bench")
            snap.forget(key="bench")
    lat = np.empty(args.tasks)
    cpu_lat = np.empty(args.tasks)
    phases: collections.Counter[str] = collections.Counter()
    clusters_used = 0
    t_loop = perf()
    for i in range(args.tasks):
        t = perf()
        c = cpu()
        r = sched.schedule(Task(spec, name="bench"), snap)
        cpu_lat[i] = cpu() - c
        lat[i] = perf() - t
        phases[r.phase] += 1
        clusters_used += len(r.placement)
        if r.placement:
            snap.assume(r.placement, spec.resources, key="bench")
            snap.forget(key="bench")
    loop_s = perf() - t_loop
    lat_ms = lat * 1e3
    conditions = {
        "shape": "matched", "division": args.division, "fleet": args.fleet, "fleet_load_s": round(build_s, 2),
        "binding": "Deployment, 12 replicas x 500m/1Gi, first scheduling", "warmup": args.warmup,
        "phases": dict(phases), "mean_clusters_per_placement": round(clusters_used / max(1, args.tasks), 2),
        "mean_ms": round(float(lat_ms.mean()), 4), "max_ms": round(float(lat_ms.max()), 3),
    }
    return {
        "clusters": snap.n, "tasks": args.tasks, "mode": "algorithm", "shape": "matched",
        "division": args.division,
        "p50_ms": round(float(np.percentile(lat_ms, 50)), 4),
        "p99_ms": round(float(np.percentile(lat_ms, 99)), 4),
        "cpu_p50_ms": round(float(np.percentile(cpu_lat * 1e3, 50)), 4),
        "throughput_per_s": round(args.tasks / loop_s, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "conditions": conditions,
    }


def run_algorithm(args: argparse.Namespace) -> dict[str, Any]:
    if args.shape == "matched":
        return run_matched(args)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    snap = build_fleet(args.clusters, rng, prices=not args.no_prices, offers=args.gpu_offers)
    build_s = time.perf_counter() - t0
    templates = STORM_SHAPES if args.shape == "storm" else build_templates(args.templates, args.clusters, rng)
    if args.gpu_offers:  # the GPU shapes also take 100 GiB of ssd per replica
        templates = [t.model_copy(update={"resources": t.resources.model_copy(update={
            "storage": 100.0, "storageTier": "ssd"})}) if t.resources.gpu else t for t in templates]
    if args.cost_first > 0:
        templates = [t.model_copy(update={"placement": t.placement.model_copy(update={"costFirst": True})})
                     if rng.random() < args.cost_first else t for t in templates]
    classes: list[str | None] = [CLASSES[int(rng.integers(len(CLASSES)))] if rng.random() < args.classes else None
                                 for _ in templates]
    profile = Profile.load(args.profile) if args.profile else Profile.default()
    sched = Scheduler(profile, rng_seed=args.seed)
    # churn keeps the fleet in a steady state: the oldest assumed task completes when too many are live
    headroom = float(np.maximum(0.85 - snap.water_level, 0).dot(snap.alloc[: snap.n, 0]))
    mean_cores = float(np.mean([t.resources.cpu * t.replicas for t in templates]))
    live_max = args.live or max(100, int(0.5 * headroom / max(mean_cores, 1e-9)))
    live: collections.deque[str] = collections.deque()
    for i in range(min(args.warmup, args.tasks)):
        sched.schedule(templates[i % len(templates)], snap, name=f"warm-{i}")
    lat = np.empty(args.tasks)
    phases: collections.Counter[str] = collections.Counter()
    partial = 0
    spread_sum = 0
    perf = time.perf_counter
    plugin_ms: dict[str, list[float]] = {p.name: [] for p, _ in profile.scores}
    if any(f.name == "GpuStorageFit" for f in profile.filters):  # the one filter that skips without input
        plugin_ms["GpuStorageFit"] = []
    talk_draw = np.random.default_rng(args.seed + 1).random(args.tasks)
    if args.datasets > 0:
        snap.datasets = {f"default/ds{j}": (snap.names[(7 * j) % snap.n], snap.names[(7 * j + 3) % snap.n])
                         for j in range(50)}
    cpu_loop = time.process_time()
    t_loop = perf()
    for i in range(args.tasks):
        spec = templates[i % len(templates)]
        cls = classes[i % len(templates)]
        key = f"task-{i}"
        t = perf()
        wl = None
        if args.traffic > 0 and i > 0 and talk_draw[i] < args.traffic:
            wl = f"bench/{key}"
            snap.traffic[wl] = {f"bench/task-{i - 1}": 1e6}
        if args.datasets > 0 and talk_draw[i] < args.datasets:  # reads one of 50 datasets on 2 clusters
            spec = spec.model_copy(update={"datasets": [DatasetRead(name=f"ds{i % 50}", readGiBPerHour=20.0)]})
        r = sched.schedule(Task(spec, name=key, workload_class=cls, workload=wl), snap)
        if args.traffic > 0:
            snap.workload_placements[f"bench/{key}"] = tuple((p.cluster, p.replicas) for p in r.placement)
        if r.placement:
            snap.assume(r.placement, spec.resources, key=key)
            if cls:
                snap.set_class_placement(key, cls, [(p.cluster, p.replicas) for p in r.placement],
                                         spec.resources.cpu)
        lat[i] = perf() - t
        needs_offers = bool(spec.resources.gpu or spec.resources.storageTier)
        for pn in plugin_ms:
            if pn in r.timings_ms and (needs_offers or pn != "GpuStorageFit"):
                plugin_ms[pn].append(r.timings_ms[pn])
        phases[r.phase] += 1
        if r.placement:
            live.append(key)
            spread_sum += len(r.placement)
            if len(live) > live_max:
                gone = live.popleft()
                snap.forget(key=gone)
                snap.drop_class_placement(gone)
                snap.workload_placements.pop(f"bench/{gone}", None)
                snap.traffic.pop(f"bench/{gone}", None)
        partial += r.partial
    loop_s = perf() - t_loop
    cpu_s = time.process_time() - cpu_loop
    levels = snap.water_level
    ready = snap.ready[: snap.n]
    lat_ms = lat * 1e3
    conditions = {
        "fleet_build_s": round(build_s, 2), "task_shapes": len(templates), "live_max": live_max,
        "phases": dict(phases), "partial": partial,
        "mean_clusters_per_placement": round(spread_sum / max(1, phases["Scheduled"]), 2),
        "fleet_water_level_end": round(snap.fleet_water_level(ready), 3),
        "max_water_level_end": round(float(levels.max()) if levels.size else 0.0, 3),
        "mean_ms": round(float(lat_ms.mean()), 4), "max_ms": round(float(lat_ms.max()), 3),
        "inputs": {"prices": not args.no_prices, "classes": args.classes, "cost_first": args.cost_first,
                   "traffic": args.traffic, "datasets": args.datasets, "gpu_offers": args.gpu_offers},
        # per score plugin (and GpuStorageFit): decisions it ran in (skipped ones have no timing), mean ms then
        "score_plugins": {pn: {"ran": len(v), "mean_ms": round(float(np.mean(v)), 4) if v else 0.0}
                          for pn, v in plugin_ms.items()},
    }
    return {
        "clusters": args.clusters, "tasks": args.tasks, "mode": "algorithm", "shape": args.shape,
        "p50_ms": round(float(np.percentile(lat_ms, 50)), 4),
        "p99_ms": round(float(np.percentile(lat_ms, 99)), 4),
        "throughput_per_s": round(args.tasks / loop_s, 1),
        "cpu_ms_per_decision": round(cpu_s * 1e3 / max(1, args.tasks), 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "conditions": conditions,
    }


def run_e2e(args: argparse.Namespace) -> dict[str, Any]:
    """Bindings written through the object registry into ``--store``; latency until the scheduler's
    placement is persisted, observed by a store watch (submit → status with a decision)."""
    return asyncio.run(_e2e(args))


async def _seed_fleet(store: Any, registry: Any, rows: list[FleetRow]) -> None:
    from drods.model.kinds import CLUSTER
    from drods.store import Put

    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    objs = [(CLUSTER, {"metadata": {"name": name, "labels": labels},
                       "spec": spec.model_dump(mode="json", exclude_unset=True),
                       "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})
            for name, labels, spec, ready, _ in rows]
    for i in range(0, len(objs), 500):
        await registry.batch_upsert(objs[i:i + 500])
    docs = [Put(f"/status/clusters/{name}", json.dumps({"status": st, "publishedAt": now}).encode())
            for name, _, _, _, st in rows]
    step = max(1, store.max_txn_ops)
    for i in range(0, len(docs), step):
        await store.txn([], docs[i:i + step])


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 when unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


async def _e2e(args: argparse.Namespace) -> dict[str, Any]:
    import shutil
    import signal
    import subprocess

    from drods.assembly import encrypted_store
    from drods.model.kinds import BINDING
    from drods.registry.objects import ObjectRegistry
    from drods.registry.secrets import SecretBox, load_or_create_key
    from drods.schedulerd.service import SchedulerService, SchedulerSettings
    from drods.security.at_rest import DEFAULT_RESOURCES, EncryptionConfig, resource_name
    from drods.store import EventType, open_store

    tmp = scratch_dir("drods-bench-")
    etcd = None
    if args.store == "etcd":
        from tests.etcd_server import EtcdCluster

        etcd = EtcdCluster(1, base_dir=str(tmp / "etcd")).start()
        url = f"etcd://{etcd.endpoints[0]}"
    else:
        url = f"sqlite://{tmp / 'drods.db'}"
    # Sealed at rest as the configuration says (SEC2): the default list, or without Bindings. The
    # scheduler process reads the same list from drods.yaml in its data dir and shares the keyring.
    keys = tmp / "scheduler"
    keys.mkdir()
    resources = [n for n in DEFAULT_RESOURCES if args.seal_bindings or n != resource_name(BINDING)]
    (keys / "drods.yaml").write_text(json.dumps({"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration",
                                                 "encryption": {"resources": resources}}))
    store = encrypted_store(open_store(url), keys, EncryptionConfig(resources=resources))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp / "encryption.key")))
    rng = np.random.default_rng(args.seed)
    rows = fleet_rows(args.clusters, rng)
    templates = STORM_SHAPES if args.shape == "storm" else build_templates(args.templates, args.clusters, rng)
    if args.mix == "simple":  # the example shape only: Divided by water level, cpu and memory
        templates = [BindingSpec(replicas=t.replicas, resources=ReplicaRequirements(cpu=t.resources.cpu,
                                                                                    memory=t.resources.memory))
                     for t in templates]
    bodies = [t.model_dump(mode="json", exclude_unset=True) for t in templates]
    t0 = time.perf_counter()
    await _seed_fleet(store, registry, rows)
    seed_s = time.perf_counter() - t0

    proc: asyncio.subprocess.Process | None = None
    task: asyncio.Task[None] | None = None
    if args.scheduler == "process":
        from tests.server_process import drods_command

        cmd = [*drods_command(), "scheduler", "--store", url, "--data-dir", str(keys), "--port", "0",
               "--log-level", "warning"]
        if args.profile:
            cmd += ["--profile", args.profile]
        proc = await asyncio.create_subprocess_exec(*cmd, stdin=subprocess.DEVNULL)
    else:
        from drods.scheduler.profile import Profile

        svc = SchedulerService(store, profile=Profile.load(args.profile) if args.profile else None,
                               settings=SchedulerSettings())
        task = asyncio.create_task(svc.run())
    deadline = time.monotonic() + 60
    while await store.get("/leases/scheduler") is None:  # the scheduler campaigns once its view is synced
        if time.monotonic() > deadline or (proc is not None and proc.returncode is not None):
            raise RuntimeError("the scheduler did not start")
        await asyncio.sleep(0.05)

    n = args.tasks
    names = [f"bench-{i:07d}" for i in range(n)]
    submitted = np.zeros(n)
    decided = np.full(n, np.nan)
    index = {nm: i for i, nm in enumerate(names)}
    phases: collections.Counter[str] = collections.Counter()
    status_revisions: set[int] = set()
    all_done = asyncio.Event()
    rev0 = await store.current_revision()
    perf = time.perf_counter

    async def watch() -> None:
        left = n
        async for ev in store.watch(BINDING.key_prefix(), start_revision=rev0 + 1):
            if ev.type is not EventType.PUT or b'"scheduledGeneration"' not in ev.kv.value:
                continue
            i = index.get(ev.kv.key.rsplit("/", 1)[-1])
            if i is None or not np.isnan(decided[i]):
                continue
            decided[i] = perf()
            status_revisions.add(ev.kv.mod_revision)  # one revision per store transaction
            phases[json.loads(ev.kv.value)["status"]["phase"]] += 1
            left -= 1
            if left == 0:
                all_done.set()
                return

    watcher = asyncio.create_task(watch())
    sem = asyncio.Semaphore(args.inflight)
    cpu0 = _cpu_s(proc.pid) if proc is not None else 0.0
    start = perf()

    async def submit(i: int) -> None:
        if args.rate > 0:
            delay = start + i / args.rate - perf()
            if delay > 0:
                await asyncio.sleep(delay)
        async with sem:
            submitted[i] = perf()
            await registry.create(BINDING, {"metadata": {"name": names[i]}, "spec": bodies[i % len(bodies)]})

    await asyncio.gather(*(submit(i) for i in range(n)))
    written_s = perf() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_done.wait(), timeout=max(120.0, n / 50))
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    ok = ~np.isnan(decided)
    lat_ms = (decided[ok] - submitted[ok]) * 1e3
    # after the first second: without the start-up (cold caches, the first writes piling up)
    steady = ok & (submitted - start >= 1.0)
    steady_ms = (decided[steady] - submitted[steady]) * 1e3
    span = float(np.nanmax(decided) - submitted.min()) if ok.any() else float("nan")
    sched_cpu_ms = None
    if proc is not None:
        sched_cpu_ms = round((_cpu_s(proc.pid) - cpu0) * 1e3 / max(1, int(ok.sum())), 3)
        rss = _vm_hwm_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
    else:
        assert task is not None
        from drods.machinery.tasks import stop_tasks

        await stop_tasks([task])
        rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    await store.close()
    if etcd is not None:
        etcd.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "clusters": args.clusters, "tasks": n, "mode": "e2e", "store": args.store,
        "p50_ms": round(float(np.percentile(lat_ms, 50)), 2) if lat_ms.size else None,
        "p99_ms": round(float(np.percentile(lat_ms, 99)), 2) if lat_ms.size else None,
        "p99_after_first_second_ms": round(float(np.percentile(steady_ms, 99)), 2) if steady_ms.size else None,
        "throughput_per_s": round(int(ok.sum()) / span, 1) if ok.any() else 0.0,
        "scheduler_cpu_ms_per_binding": sched_cpu_ms,
        "peak_rss_mb": rss,
        "conditions": {
            "scheduler": args.scheduler, "bindings_sealed": args.seal_bindings, "task_mix": args.mix,
            "decided": int(ok.sum()), "phases": dict(phases),
            "offered_rate_per_s": args.rate or "unbounded", "inflight_writes": args.inflight,
            "write_s": round(written_s, 2), "write_rate_per_s": round(n / written_s, 1),
            "seed_fleet_s": round(seed_s, 2), "task_shapes": len(templates),
            "decisions_per_status_transaction": round(int(ok.sum()) / max(1, len(status_revisions)), 2),
            "bench_process_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
    }


def run_fleet_change(args: argparse.Namespace) -> dict[str, Any]:
    """S11: one cluster's label change in a decided fleet; how many bindings it enqueues and
    re-decides, and how long until the last affected decision is written."""
    return asyncio.run(_fleet_change(args))


async def _fleet_change(args: argparse.Namespace) -> dict[str, Any]:

    from drods.model.kinds import BINDING, CLUSTER
    from drods.registry.objects import ObjectRegistry
    from drods.registry.secrets import SecretBox, load_or_create_key
    from drods.schedulerd.service import SchedulerService, SchedulerSettings
    from drods.store import EventType, open_store

    tmp = scratch_dir("drods-bench-")
    store = open_store(f"sqlite://{tmp / 'drods.db'}")
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp / "encryption.key")))
    rng = np.random.default_rng(args.seed)
    pools = max(2, args.pools)
    rows = [(name, {**labels, "pool": f"p{i % pools}"}, spec, True, st)
            for i, (name, labels, spec, _, st) in enumerate(fleet_rows(args.clusters, rng))]
    await _seed_fleet(store, registry, rows)
    # every binding selects one pool; one in ten is Duplicated, the rest divided by water level
    bodies = []
    for i in range(args.tasks):
        pl: dict[str, Any] = {"clusterAffinity": {"labelSelector": {"matchLabels": {"pool": f"p{i % pools}"}}}}
        if i % 10 == 0:
            pl["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
        bodies.append((BINDING, {"metadata": {"name": f"fc-{i:06d}"},
                                 "spec": {"replicas": 4, "resources": {"cpu": 0.1, "memory": 0.1}, "placement": pl}}))
    for i in range(0, len(bodies), 500):
        await registry.batch_upsert(bodies[i:i + 500])
    svc = SchedulerService(store, settings=SchedulerSettings(lease_ttl=10, rng_seed=args.seed))
    task = asyncio.create_task(svc.run())
    seen: dict[str, float] = {}
    changed_at: list[float] = []

    async def watch() -> None:
        rev = (await store.get(BINDING.key("fc-000000")) or None)
        async for ev in store.watch(BINDING.key_prefix(), start_revision=(rev.mod_revision if rev else 0) + 1):
            if ev.type is EventType.PUT and changed_at and b"re-placed after" in ev.kv.value:
                seen.setdefault(ev.kv.key, time.perf_counter())

    async def decided() -> int:
        n = 0
        for kv in (await store.range(BINDING.key_prefix()))[0]:
            n += b'"scheduledGeneration"' in kv.value
        return n

    deadline = time.monotonic() + 600
    while await decided() < args.tasks:
        if time.monotonic() > deadline:
            raise SystemExit("the fleet's bindings were not all decided within 600 s")
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # the last decisions' echoes
    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    name, labels = rows[0][0], rows[0][1]
    obj = await registry.get(CLUSTER, name)
    before = svc.metrics.incoming.labels(event="ClusterLabelsChanged")._value.get()
    moved_before = svc.metrics.fleet_moved._value.get()
    t0 = time.perf_counter()
    changed_at.append(t0)
    obj["metadata"]["labels"] = {**labels, "pool": "p1" if labels["pool"] != "p1" else "p0"}
    await registry.update(CLUSTER, obj)
    quiet_since = time.perf_counter()
    last = 0
    while time.perf_counter() - quiet_since < 3.0:  # settled: no new decision for 3 s
        await asyncio.sleep(0.1)
        if len(seen) != last:
            last, quiet_since = len(seen), time.perf_counter()
    enqueued = int(svc.metrics.incoming.labels(event="ClusterLabelsChanged")._value.get() - before)
    lat = np.array(sorted(t - t0 for t in seen.values())) * 1e3
    watcher.cancel()
    task.cancel()
    await asyncio.gather(watcher, task, return_exceptions=True)
    await store.close()
    conditions = {"fleet": f"{pools} label pools; {args.tasks} bindings of 4 replicas (1 in 10 Duplicated), each "
                            f"selecting one pool; cluster {name} relabelled from {labels['pool']} to another pool",
                  "store": "sqlite, in-process scheduler",
                  "latency": "from the label write to each re-decision's status write, seen by a store watch"}
    return {"conditions": conditions, "clusters": args.clusters, "tasks": args.tasks, "mode": "fleet-change",
            "store": "sqlite",
            "selections": len(svc.fleet.selections), "enqueued": enqueued, "redecided": len(seen),
            "moved_replicas": int(svc.metrics.fleet_moved._value.get() - moved_before),
            "p50_ms": round(float(np.percentile(lat, 50)), 1) if lat.size else None,
            "p99_ms": round(float(np.percentile(lat, 99)), 1) if lat.size else None,
            "last_ms": round(float(lat[-1]), 1) if lat.size else None,
            # re-decisions over the span from the label write to the last of them
            "throughput_per_s": round(lat.size / (float(lat[-1]) / 1e3), 1) if lat.size and lat[-1] > 0 else None,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=positive_int, default=100)
    ap.add_argument("--tasks", type=positive_int, default=10_000)
    ap.add_argument("--mode", choices=["algorithm", "e2e", "fleet-change"], default="algorithm")
    ap.add_argument("--pools", type=int, default=50, help="fleet-change: label pools the bindings select")
    ap.add_argument("--store", choices=["sqlite", "etcd"], default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--templates", type=int, default=500, help="distinct task shapes cycled through")
    ap.add_argument("--live", type=int, default=0, help="max assumed tasks kept (0 = auto)")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--profile", type=str, default=None, help="scheduler profile YAML")
    ap.add_argument("--scheduler", choices=["process", "inprocess"], default="process",
                    help="e2e: run `drods scheduler` as its own process (default) or in the bench's event loop")
    ap.add_argument("--rate", type=float, default=0.0, help="e2e: offered bindings/s (0 = as fast as possible)")
    ap.add_argument("--inflight", type=int, default=64, help="e2e: concurrent binding writes")
    ap.add_argument("--seal-bindings", action=argparse.BooleanOptionalAction, default=True,
                    help="e2e: Bindings sealed at rest (the default encryption list) or not (SEC2)")
    ap.add_argument("--mix", choices=["varied", "simple"], default="varied",
                    help="e2e: the varied task shapes of the algorithm bench, or only Divided cpu/memory tasks")
    ap.add_argument("--no-prices", action="store_true",
                    help="algorithm: clusters without a cost model (the Cost score's input gone)")
    ap.add_argument("--classes", type=float, default=0.0,
                    help="algorithm: fraction of task shapes with a workload class (Dissonance input)")
    ap.add_argument("--cost-first", type=float, default=0.0,
                    help="algorithm: fraction of task shapes with placement.costFirst")
    ap.add_argument("--traffic", type=float, default=0.0,
                    help="algorithm: fraction of tasks that talk to the task before them (TrafficAffinity input)")
    ap.add_argument("--datasets", type=float, default=0.0,
                    help="algorithm: fraction of tasks that read a dataset (DataLocality input)")
    ap.add_argument("--gpu-offers", action="store_true",
                    help="algorithm: clusters count GPUs per model and storage per tier; the GPU task shapes "
                         "(10 %%) consume them, with 100 GiB of ssd a replica (GpuStorageFit input)")
    ap.add_argument("--shape", choices=["varied", "matched", "storm"], default="varied",
                    help="algorithm: the varied task mix, the one binding of the Karmada comparison, or (e2e too) the "
                         "failure storm's bindings (bench/memory.py: 1-3 replicas of 0.5 cpu / 1 GiB, no placement)")
    ap.add_argument("--division", choices=MATCHED_DIVISIONS, default=None,
                    help="matched shape: the binding's replica division")
    ap.add_argument("--fleet", type=str, default=None, help="matched shape: fleet JSON file")
    ap.add_argument("--allocator", choices=["product", "glibc"], default="product",
                    help="this process's C allocator (the algorithm; an in-process scheduler): as drods serve "
                         "and drods scheduler set theirs, or glibc's defaults")
    args = ap.parse_args(argv)
    if args.allocator == "product":
        tune_allocator()
    if args.mode == "e2e":
        args.store = args.store or "sqlite"
        out = run_e2e(args)
    elif args.mode == "fleet-change":
        out = run_fleet_change(args)
    elif args.store is not None:
        print("bench/scheduler.py: --store applies to --mode e2e", file=sys.stderr)
        return 2
    else:
        out = run_algorithm(args)
    cond = out.pop("conditions")
    print(f"# conditions: {out['clusters']} clusters, {args.tasks} tasks, mode {args.mode}, seed {args.seed}, "
          f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"allocator {args.allocator}")
    for k, v in cond.items():
        print(f"#   {k}: {v}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
