"""How many `drods sim` member clusters one machine holds.

Starts K sims (each NODES nodes and DEPLOYMENTS deployments of REPLICAS pods, applied through
MemberClient), lets them settle, then measures each sim process's resident memory (VmRSS) and its
CPU over an idle window (utime+stime from /proc). From the medians it estimates how many sims fit
in a memory budget (default 16 GiB) and how many the machine's cores carry at idle (at most half of
them busy). Prints the conditions, one line per K, and a final JSON line.

    python bench/sim_capacity.py --counts 5,10,20 --window 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from drods.members.client import MemberClient, MemberOptions
from drods.sim.harness import SimProcess

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def deployment(i: int, replicas: int) -> dict[str, Any]:
    name = f"app-{i}"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1",
                                                           "resources": {"requests": {"cpu": "250m",
                                                                                      "memory": "256Mi"}}}]}}}}


async def load(sims: list[SimProcess], deployments: int, replicas: int) -> None:
    options = MemberOptions(read_timeout=30, retries=3)
    clients = [MemberClient.from_kubeconfig(s.name, s.kubeconfig, options=options) for s in sims]
    try:
        await asyncio.gather(*(c.apply(deployment(i, replicas)) for c in clients for i in range(deployments)))
        deadline = time.monotonic() + 120
        for c in clients:
            for i in range(deployments):
                while ((await c.status("apps/v1", "Deployment", f"app-{i}", "default")) or {}).get(
                        "readyReplicas") != replicas:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{c.name}/app-{i} not ready")
                    await asyncio.sleep(0.2)
    finally:
        await asyncio.gather(*(c.close() for c in clients))


def run(k: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    state = root / f"k{k}"
    sims = [SimProcess(f"bench-{k}-{i}", state, ["--nodes", str(args.nodes), "--node-cpu", "16",
                                                 "--node-memory", "64Gi"]) for i in range(k)]
    started = time.monotonic()
    try:
        for s in sims:
            s.start()
        for s in sims:
            s.wait_ready(timeout=60 + 5 * k)
        startup = time.monotonic() - started
        asyncio.run(load(sims, args.deployments, args.replicas))
        time.sleep(args.settle)
        before = {s.pid: cpu_seconds(s.pid) for s in sims}
        t0 = time.monotonic()
        time.sleep(args.window)
        elapsed = time.monotonic() - t0
        cpu = [(cpu_seconds(s.pid) - before[s.pid]) / elapsed * 100 for s in sims]
        rss = [rss_bytes(s.pid) / 2**20 for s in sims]
    finally:
        codes = [s.stop() for s in sims]
    return {"sims": k, "startup_s": round(startup, 2), "rss_mib_median": round(statistics.median(rss), 1),
            "rss_mib_max": round(max(rss), 1), "idle_cpu_pct_median": round(statistics.median(cpu), 2),
            "idle_cpu_pct_total": round(sum(cpu), 1), "clean_exits": codes.count(0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--counts", default="5,10,20", help="numbers of sims to run at once, comma-separated")
    p.add_argument("--nodes", type=int, default=5, help="nodes per sim")
    p.add_argument("--deployments", type=int, default=3, help="deployments per sim")
    p.add_argument("--replicas", type=int, default=3, help="replicas per deployment")
    p.add_argument("--settle", type=float, default=3.0, help="seconds after the load before measuring")
    p.add_argument("--window", type=float, default=10.0, help="seconds of idle CPU measurement")
    p.add_argument("--budget-gib", type=float, default=16.0, help="memory budget for the estimate")
    args = p.parse_args()
    try:
        counts = [int(c) for c in args.counts.split(",") if c.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        p.error(f"--counts {args.counts}: whole numbers of sims, 1 or more, comma-separated")
    cores = os.cpu_count() or 1
    with open("/proc/meminfo") as f:
        mem_total = int(f.readline().split()[1]) * 1024
    print(f"# conditions: {platform.platform()}, python {platform.python_version()}, {cores} cores, "
          f"{mem_total / 2**30:.1f} GiB RAM; per sim {args.nodes} nodes, {args.deployments} deployments x "
          f"{args.replicas} replicas (250m/256Mi), TLS, sqlite store; idle window {args.window}s after "
          f"{args.settle}s settle", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="drods-bench-sims-") as tmp:
        for k in counts:
            r = run(k, args, Path(tmp))
            results.append(r)
            print(f"K={k:3d}  startup {r['startup_s']:6.2f}s  RSS/sim median {r['rss_mib_median']:6.1f} MiB "
                  f"(max {r['rss_mib_max']:.1f})  idle CPU/sim median {r['idle_cpu_pct_median']:5.2f}% of a core "
                  f"(all {r['idle_cpu_pct_total']:.1f}%)  clean exits {r['clean_exits']}/{k}", flush=True)
    rss = max(r["rss_mib_median"] for r in results)
    cpu = max(r["idle_cpu_pct_median"] for r in results)
    by_memory = int(args.budget_gib * 1024 // rss)
    by_cpu = int(cores * 100 * 0.5 // cpu) if cpu > 0 else None
    estimate = min(by_memory, by_cpu) if by_cpu is not None else by_memory
    print(f"# estimate: {by_memory} sims fit in {args.budget_gib:g} GiB by memory; the idle CPU of "
          f"{by_cpu} sims fills half of {cores} cores -> {estimate} sims on this machine", flush=True)
    print(json.dumps({"bench": "sim_capacity", "cores": cores, "mem_gib": round(mem_total / 2**30, 1),
                      "nodes_per_sim": args.nodes, "pods_per_sim": args.deployments * args.replicas,
                      "results": results, "rss_mib_per_sim": rss, "idle_cpu_pct_per_sim": cpu,
                      "fit_by_memory": by_memory, "budget_gib": args.budget_gib, "fit_by_idle_cpu": by_cpu,
                      "estimate": estimate}))


if __name__ == "__main__":
    main()
