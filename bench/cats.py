"""Traffic steering at scale (SPEC C6-C8): services x instance sites x client sites.

Builds, in one process over an embedded (sqlite) store: ``--instance-sites`` clusters with a status
document each, ``--client-sites`` client sites measured to every cluster (random delays 2-120 ms),
``--services`` ServiceRegistrations whose workloads run on every cluster (every service sees every
(client site, instance) pair), strategies in rotation. Then it measures

1. **full recomputation** after a status change of every cluster: every service evaluated, damped and
   its changed routes published (`SteeringController.recompute`, everything dirty);
2. **one cluster's status change → affected routes published**: the controller runs as it does in a
   server (informers, watch-triggered); a cluster's CPU saturates (its routes must move at once) and
   the time from the status write to the end of the recomputation that published the moved routes is
   taken, ``--changes`` times.

    python bench/cats.py [--services 1000 --instance-sites 100 --client-sites 50 --changes 30]
                         [--gc server|default]

``--gc server`` (the default) tunes the garbage collector and the C allocator as ``drods serve`` does
(`drods.machinery.memory.tune_for_serving`); ``--gc default`` keeps CPython's defaults, whose full collections over the
controller's state are most of the tail.

Prints the conditions, the figures, and a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.arguments import positive_int  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.machinery.informer import Informer  # noqa: E402
from drods.machinery.memory import tune_for_serving  # noqa: E402
from drods.machinery.tasks import stop_tasks  # noqa: E402
from drods.model.keys import NETWORK_PREFIX, STATUS_PREFIX, status_key  # noqa: E402
from drods.model.kinds import BINDING, CLUSTER, SERVICE_REGISTRATION  # noqa: E402
from drods.model.steering import Measurement  # noqa: E402
from drods.registry.objects import (
    ObjectRegistry,  # noqa: E402
    decode_stored,  # noqa: E402
)
from drods.registry.secrets import SecretBox, load_or_create_key  # noqa: E402
from drods.steering.controller import Recomputation, SteeringController, SteeringInformers  # noqa: E402
from drods.steering.settings import SteeringSettings  # noqa: E402
from drods.steering.status import write_measurements  # noqa: E402
from drods.store import Put  # noqa: E402
from drods.store.sqlite import SqliteStore  # noqa: E402

STRATEGIES = ("experienceFirst", "costFirst", "resourceFirst")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def status_doc(load: float) -> bytes:
    return json.dumps({"status": {"cpu": {"capacity": 64.0, "used": 64.0 * load}}}).encode()


async def put_many(store: SqliteStore, items: list[tuple[str, bytes]]) -> int:
    rev = 0
    for start in range(0, len(items), 500):
        rev = (await store.txn([], [Put(k, v) for k, v in items[start:start + 500]])).revision
    return rev


async def caught_up(informers: SteeringInformers, revision: int) -> None:
    seen = asyncio.Event()
    stop = informers.status.on_change(lambda _k, _o, _n: seen.set())
    try:
        while informers.status.revision < revision:
            await seen.wait()
            seen.clear()
    finally:
        stop()


class Observed:
    """The controller's recomputations, awaitable by store revision."""

    def __init__(self) -> None:
        self.items: list[Recomputation] = []
        self.changed = asyncio.Event()

    def __call__(self, r: Recomputation) -> None:
        self.items.append(r)
        self.changed.set()

    async def reached(self, revision: int) -> Recomputation:
        while True:
            hit = next((r for r in self.items if r.revision >= revision), None)
            if hit is not None:
                return hit
            await self.changed.wait()
            self.changed.clear()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.gc == "server":
        tune_for_serving()
    rng = random.Random(args.seed)
    tmp = scratch_dir("drods-cats-")
    store = SqliteStore(str(tmp / "drods.db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp / "encryption.key")))
    clusters = [f"site-{i:03d}" for i in range(args.instance_sites)]
    clients = [f"client-{k:02d}" for k in range(args.client_sites)]
    setup = time.perf_counter()
    await registry.batch_upsert([(CLUSTER, {"metadata": {"name": c},
                                            "spec": {"cost": {"cpuCoreHour": round(rng.uniform(0.02, 0.2), 3)}}})
                                 for c in clusters])
    loads = {c: rng.uniform(0.1, 0.6) for c in clusters}
    await put_many(store, [(status_key(c), status_doc(loads[c])) for c in clusters])
    await write_measurements(store, [Measurement.model_validate({"from": k, "to": c, "delayMs": rng.uniform(2, 120)})
                                     for k in clients for c in clusters])
    bindings = []
    for n in range(args.services):
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"svc-{n}", "namespace": "default"}
        obj: dict[str, Any] = {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
               "metadata": {"name": f"deployment-default-svc-{n}", "generation": 1},
               "spec": {"resource": ref, "replicas": 1},
               "status": {"placement": [{"cluster": c, "replicas": 1} for c in clusters]}}
        bindings.append((BINDING.key(obj["metadata"]["name"]), json.dumps(obj).encode()))
    await put_many(store, bindings)
    regs = [(SERVICE_REGISTRATION, {"metadata": {"name": f"svc-{n}", "namespace": "default"}, "spec": {
        "serviceId": f"svc-{n}.example",
        "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"svc-{n}", "namespace": "default"},
        "sla": {"maxDelayMs": 150.0}, "strategy": STRATEGIES[n % 3], "clientSites": clients,
        "output": "balanced" if n % 10 == 0 else "preferred", "placementFeedback": False}})
        for n in range(args.services)]
    for start in range(0, len(regs), 200):
        await registry.batch_upsert(regs[start:start + 200])
    setup_s = time.perf_counter() - setup

    informers = SteeringInformers(*(Informer(store, p, decode_stored) for p in (
        SERVICE_REGISTRATION.key_prefix(), BINDING.key_prefix(), CLUSTER.key_prefix(), STATUS_PREFIX, NETWORK_PREFIX)))
    tasks = [asyncio.create_task(inf.run()) for inf in informers.all()]
    for inf in informers.all():
        await inf.wait_synced()
    observed = Observed()
    stats = observed.items
    settings = SteeringSettings(minIntervalSeconds=3600.0, coalesceSeconds=0.0)
    ctl = SteeringController(registry, informers, settings, None, observer=observed)
    t = time.perf_counter()
    await ctl.recompute()
    first_s = time.perf_counter() - t
    first_written = stats[-1].written

    full: list[float] = []
    full_cpu: list[float] = []
    full_written: list[int] = []
    for _ in range(args.full_rounds):
        for c in clusters:
            loads[c] = min(0.95, max(0.05, loads[c] + rng.uniform(-0.3, 0.3)))
        rev = await put_many(store, [(status_key(c), status_doc(loads[c])) for c in clusters])
        await caught_up(informers, rev)
        ctl._all = True  # noqa: SLF001 - the benchmark asks for a full recomputation
        t, cpu = time.perf_counter(), time.process_time()
        await ctl.recompute()
        full.append(time.perf_counter() - t)
        full_cpu.append(time.process_time() - cpu)
        full_written.append(stats[-1].written)

    # Incremental: the controller runs as in a server; one cluster saturates at a time.
    runner = asyncio.create_task(ctl.run())
    await ctl.ready.wait()  # resumed from the published routes, subscribed to the informers
    await observed.reached(max(inf.revision for inf in informers.all()))  # and its first full pass done
    latencies: list[float] = []
    evaluated: list[int] = []
    inside: list[float] = []  # the recomputation itself (evaluation + publishing), without the watch delivery
    written: list[int] = []
    order = rng.sample(clusters, min(args.changes, len(clusters)))
    cpu_used: list[float] = []  # process CPU from the write to the publication (independent of other load)
    for c in order:
        t, cpu = time.perf_counter(), time.process_time()
        rev = await store.put(status_key(c), status_doc(0.9995))
        hit = await observed.reached(rev)
        latencies.append(time.perf_counter() - t)
        cpu_used.append(time.process_time() - cpu)
        evaluated.append(hit.evaluated)
        inside.append(hit.seconds)
        written.append(hit.written)
        loads[c] = 0.3
        rev = await store.put(status_key(c), status_doc(loads[c]))  # calm again (routes stay: hold-down)
        await observed.reached(rev)
    await stop_tasks([runner, *tasks])
    await store.close()
    pairs = args.services * args.instance_sites * args.client_sites
    return {
        "services": args.services, "instanceSites": args.instance_sites, "clientSites": args.client_sites,
        "pairs": pairs, "setupSeconds": round(setup_s, 2), "gc": args.gc,
        "firstRecomputationSeconds": round(first_s, 3), "firstWritten": first_written,
        "fullRecomputationSeconds": {"median": round(statistics.median(full), 3), "max": round(max(full), 3),
                                     "cpuMedian": round(statistics.median(full_cpu), 3)},
        "loadAverage": list(os.getloadavg()),
        "fullWrittenMedian": int(statistics.median(full_written)),
        "oneClusterChange": {"p50": round(pct(latencies, 0.5) * 1000, 1), "p99": round(pct(latencies, 0.99) * 1000, 1),
                             "max": round(max(latencies) * 1000, 1), "unit": "ms",
                             "cpuP50": round(pct(cpu_used, 0.5) * 1000, 1),
                             "cpuP99": round(pct(cpu_used, 0.99) * 1000, 1),
                             "routesWrittenMedian": int(statistics.median(written)),
                             "recomputationMsMedian": round(statistics.median(inside) * 1000, 1),
                             "servicesEvaluatedMedian": int(statistics.median(evaluated))},
        "targets": {"fullRecomputationSeconds": 1.0, "oneClusterChangeP99Ms": 200.0},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--services", type=positive_int, default=1000)
    ap.add_argument("--instance-sites", type=positive_int, default=100)
    ap.add_argument("--client-sites", type=positive_int, default=50)
    ap.add_argument("--changes", type=positive_int, default=30)
    ap.add_argument("--full-rounds", type=positive_int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--gc", choices=("server", "default"), default="server",
                    help="garbage collector tuning: as `drods serve` (server) or CPython's defaults")
    args = ap.parse_args()
    print(f"conditions: python {platform.python_version()}, {os.cpu_count()} cpus, {platform.machine()}, "
          f"sqlite store, {args.gc} gc; {args.services} services x {args.instance_sites} instance sites x "
          f"{args.client_sites} client sites")
    out = asyncio.run(run(args))
    print(f"full recomputation after every cluster's status changed: median {out['fullRecomputationSeconds']['median']}"
          f" s, max {out['fullRecomputationSeconds']['max']} s ({out['pairs']:,} pairs; "
          f"{out['fullWrittenMedian']} ServiceRoutes rewritten; CPU {out['fullRecomputationSeconds']['cpuMedian']} s); "
          f"first (all published): "
          f"{out['firstRecomputationSeconds']} s")
    o = out["oneClusterChange"]
    print(f"one cluster saturates -> affected routes published: p50 {o['p50']} ms, p99 {o['p99']} ms, max {o['max']} "
          f"ms ({o['servicesEvaluatedMedian']} services evaluated, {o['routesWrittenMedian']} ServiceRoutes written; "
          f"the recomputation itself {o['recomputationMsMedian']} ms; process CPU p50 {o['cpuP50']} ms, "
          f"p99 {o['cpuP99']} ms)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
