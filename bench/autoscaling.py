"""Autoscaler decision cost at scale: one evaluation pass over N FederatedHPAs.

Two figures:

* **decision** — `Autoscaler._evaluate_hpa` for every workload, in memory: the spec read, the
  owner check, the cron bounds, the replica-weighted utilisation over its clusters, the HPA rule
  and the behaviour window (what a leader spends per sync period, without I/O);
* **reconcile** — the full `reconcile` (decision + fenced-style status write + history entry) for
  ``--writes`` of them against a SQLite store, i.e. the store-bound cost.

    python bench/autoscaling.py --workloads 10000 --clusters 50 --writes 2000

Prints the conditions, the figures, and a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.fernet import Fernet  # noqa: E402

from drods.autoscaling.controller import Autoscaler, AutoscalerSettings  # noqa: E402
from drods.model.keys import STATUS_PREFIX  # noqa: E402
from drods.model.kinds import BINDING, FEDERATED_HPA  # noqa: E402
from drods.model.timefmt import now_rfc3339  # noqa: E402
from drods.registry.objects import ObjectRegistry  # noqa: E402
from drods.registry.secrets import SecretBox  # noqa: E402
from drods.store.sqlite import SqliteStore  # noqa: E402


class Cache:
    """An informer's cache without the watch (the bench fills it directly)."""

    def __init__(self, cache: dict[str, Any]) -> None:
        self.cache = cache
        self.revision = 1

    async def wait_synced(self) -> None:
        return None

    def on_change(self, handler: Any) -> Any:
        return lambda: None


def usage(pods: int, rng: random.Random) -> dict[str, Any]:
    """A member's reading of the workload's ``pods`` (0.5 cores and 512 MiB requested each), used at 20–95 %."""
    cpu, mem = rng.uniform(0.2, 0.95), rng.uniform(0.2, 0.8)
    return {"pods": pods, "readyPods": pods,
            "cpu": {"used": f"{int(pods * 500 * cpu)}m", "requested": f"{pods * 500}m"},
            "memory": {"used": f"{int(pods * 512 * mem)}Mi", "requested": f"{pods * 512}Mi"}}


def fleet(n: int, clusters: int, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    names = [f"c{i:03d}" for i in range(clusters)]
    util = {f"{STATUS_PREFIX}{c}": {"cpu": rng.uniform(20, 95), "memory": rng.uniform(20, 80)} for c in names}
    hpas: dict[str, Any] = {}
    bindings: dict[str, Any] = {}
    for i in range(n):
        name = f"w{i:05d}"
        where = rng.sample(names, 4)
        replicas = rng.randint(2, 40)
        split = [replicas // 4 + (1 if k < replicas % 4 else 0) for k in range(4)]
        bindings[BINDING.key(f"deployment-default-{name}")] = {
            "spec": {"replicas": replicas, "resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                        "namespace": "default", "name": name}},
            "status": {"placement": [{"cluster": c, "replicas": r} for c, r in zip(where, split, strict=True)],
                       # what the autoscaler reads: the workload's own pods' use in each member
                       "clusters": [{"cluster": c, "replicas": r, "usage": usage(r, rng)}
                                    for c, r in zip(where, split, strict=True)]}}
        hpas[FEDERATED_HPA.key(name, "default")] = {
            "apiVersion": FEDERATED_HPA.api_version, "kind": "FederatedHPA",
            "metadata": {"name": name, "namespace": "default", "uid": f"u{i}", "generation": 1,
                         "creationTimestamp": now_rfc3339(), "resourceVersion": "1"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": 100,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 60}}},
                                 {"type": "Resource", "resource": {"name": "memory", "target": {
                                     "type": "Utilization", "averageUtilization": 70}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}},
            "status": {}}
    return util, hpas, bindings


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--clusters", type=int, default=50)
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    util, hpas, bindings = fleet(args.workloads, args.clusters, rng)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(str(Path(tmp) / "bench.db"))
        registry = ObjectRegistry(store, SecretBox(Fernet.generate_key()))
        a = Autoscaler(registry, store, hpas=Cache(hpas), crons=Cache({}), bindings=Cache(bindings),  # type: ignore[arg-type]
                       clusters=Cache(util), feedback=Cache({}), members=Cache({}),  # type: ignore[arg-type]
                       settings=AutoscalerSettings())
        a.sync_index()
        print(f"# {args.workloads} FederatedHPAs (2 metrics, 4 clusters each) over {args.clusters} clusters; "
              f"python {platform.python_version()}, {platform.machine()}")
        now = time.time()
        per: list[float] = []
        scaled = 0
        t0 = time.perf_counter()
        for obj in hpas.values():
            s = time.perf_counter()
            status, record = a._evaluate_hpa(obj, {}, now)
            per.append(time.perf_counter() - s)
            scaled += record is not None
        decision_s = time.perf_counter() - t0
        each = decision_s / args.workloads * 1e6
        print(f"decision pass: {decision_s:.3f} s for {args.workloads} ({each:.1f} µs each, "
              f"p99 {sorted(per)[int(0.99 * len(per))] * 1e6:.1f} µs); {scaled} would scale")

        # reconcile with real writes: store the objects, then evaluate a subset
        subset = list(hpas.items())[: args.writes]
        for key, obj in subset:
            await registry.create(FEDERATED_HPA, {k: v for k, v in obj.items() if k != "status"}, "default")
            stored = await registry.get(FEDERATED_HPA, obj["metadata"]["name"], "default")
            hpas[key] = stored
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(32)

        async def one(key: str) -> None:
            async with sem:
                await a.reconcile(key)

        await asyncio.gather(*(one(k) for k, _ in subset))
        reconcile_s = time.perf_counter() - t0
        print(f"reconcile with status write + history: {reconcile_s:.2f} s for {len(subset)} "
              f"({len(subset) / reconcile_s:.0f}/s, SQLite)")
        await store.close()
    print(json.dumps({"bench": "autoscaling", "workloads": args.workloads, "clusters": args.clusters,
                      "decision_pass_s": round(decision_s, 4),
                      "decision_us_mean": round(statistics.fmean(per) * 1e6, 2),
                      "decision_us_p99": round(sorted(per)[int(0.99 * len(per))] * 1e6, 2),
                      "would_scale": scaled, "reconcile_writes": len(subset),
                      "reconcile_per_s": round(len(subset) / reconcile_s, 1)}))


if __name__ == "__main__":
    asyncio.run(main())
