"""Propagation benchmark: how fast a scheduled Binding becomes a Deployment in its members, and how
fast a failed member's workloads are re-placed.

Starts ``drods serve`` and N ``drods sim`` members (separate processes), joins them (push mode,
kubeconfig credentials) and watches every member's Deployments with the official client. Then:

1. **latency** — M Deployment templates, then M Bindings created at ``--rate`` per second, each
   already placed (as the scheduler writes it: ``status.placement`` with ``scheduledGeneration``)
   on ``--spread`` members. Latency = first watch event of the copy in the member − the moment the
   Binding with its placement was sent. p50 / p99 / max, and copies per second over the phase.
2. **burst** — another M Bindings in one ``/api/v1/sync/batch`` request: time until every copy is
   present, and copies per second (the capacity of the whole setup, members included).

Each phase's Bindings and templates are deleted (and their copies gone) before the next phase.
3. **failover** — F Bindings with one replica on a victim member and one elsewhere; the victim goes
   ``down``; measured from the moment the control plane marks it NotReady until every one of them is
   re-placed by the scheduler off the victim and each new placement's Deployment is in its member
   with the right replica count (toleration 0 s, so the clock measures the machinery).

Prints the conditions, a line per phase and a final JSON line.

    python bench/propagation.py --clusters 20 --workloads 1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from kubernetes import watch as k8s_watch  # noqa: E402

from bench.arguments import positive_float, positive_int  # noqa: E402
from bench.configuration import write_configuration  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.sim.harness import SimProcess  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"
SELECTOR = "multicluster.io/managed-by=drods"


class Watcher:
    """Every member's Deployments as they appear and change (first-seen time and latest replicas)."""

    def __init__(self, sims: list[SimProcess]) -> None:
        self.first: dict[tuple[str, str], float] = {}
        self.replicas: dict[tuple[str, str], int] = {}
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in sims]
        for t in self.threads:
            t.start()

    def _run(self, sim: SimProcess) -> None:
        """List, then watch from the list's resourceVersion; after a broken watch, list again (a
        watch started from "now" would never report what was deleted in between)."""
        api = k8s_config.new_client_from_config(str(sim.kubeconfig), persist_config=False)
        apps = k8s.AppsV1Api(api)
        while not self.stop.is_set():
            try:
                listed: Any = apps.list_deployment_for_all_namespaces(label_selector=SELECTOR,
                                                                      _request_timeout=(2, 30))
                now = time.time()
                with self.changed:
                    for key in [k for k in self.replicas if k[0] == sim.name]:
                        del self.replicas[key]
                    for d in listed.items:
                        self.first.setdefault((sim.name, d.metadata.name), now)
                        self.replicas[(sim.name, d.metadata.name)] = int(d.spec.replicas or 0)
                    self.changed.notify_all()
                for ev in k8s_watch.Watch().stream(apps.list_deployment_for_all_namespaces, label_selector=SELECTOR,
                                                   resource_version=listed.metadata.resource_version,
                                                   timeout_seconds=300, _request_timeout=(2, 330)):
                    now = time.time()
                    obj = ev["object"]
                    key = (sim.name, obj.metadata.name)
                    with self.changed:
                        if ev["type"] == "DELETED":
                            self.replicas.pop(key, None)
                        else:
                            self.first.setdefault(key, now)
                            self.replicas[key] = int(obj.spec.replicas or 0)
                        self.changed.notify_all()
            except Exception:  # noqa: BLE001 - a member going down breaks its watch: list and watch again
                time.sleep(0.2)

    def wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not cond():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1", "resources": {
                                      "requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def binding(name: str, placement: dict[str, int], replicas: int = 0) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding", "metadata": {"name": name},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"},
                     "replicas": replicas, "resources": {"cpu": 0.01, "memory": 0.015625}},
            "status": {"phase": "Scheduled", "scheduledGeneration": 1, "scheduledTime": now,
                       "placement": [{"cluster": c, "replicas": n} for c, n in placement.items()]}}


def batch(http: httpx.Client, objects: list[dict[str, Any]]) -> None:
    for i in range(0, len(objects), 1000):
        r = http.post("/api/v1/sync/batch", json={"objects": objects[i:i + 1000]}, timeout=120)
        r.raise_for_status()


def remove(http_clients: list[httpx.Client], watcher: Watcher, names: list[str], timeout: float = 300) -> float:
    """Delete the phase's bindings and templates; seconds until no copy is left (phases stay independent)."""
    t0 = time.time()

    def one(i: int) -> None:
        c = http_clients[i % len(http_clients)]
        c.delete(f"{BINDINGS}/{names[i]}")
        c.delete(f"/apis/apps/v1/namespaces/default/deployments/{names[i]}")

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, range(len(names))))
    gone = set(names)
    watcher.wait(lambda: not any(n in gone for _, n in watcher.replicas), timeout)
    return time.time() - t0


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


class CpuMeter:
    """CPU seconds of the control plane and of the members over a phase (Linux /proc)."""

    def __init__(self, server: ServerProcess, sims: list[SimProcess]) -> None:
        self.server, self.sims = server, sims
        self.start = self.read()

    def read(self) -> tuple[float, float]:
        assert self.server.proc is not None
        return cpu_seconds(self.server.proc.pid), sum(cpu_seconds(s.pid) for s in self.sims)

    def per_copy_ms(self, copies: int) -> dict[str, float]:
        end = self.read()
        n = max(copies, 1)
        return {"control_plane_cpu_ms_per_copy": round((end[0] - self.start[0]) * 1000 / n, 2),
                "members_cpu_ms_per_copy": round((end[1] - self.start[1]) * 1000 / n, 2)}


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = scratch_dir("bench-propagation-")
    names = [f"m{i:02d}" for i in range(args.clusters)]
    sim_args = ["--nodes", str(args.nodes), "--max-pods", "500", *(["--no-tls"] if args.no_tls else [])]
    sims = [SimProcess(n, root / "sims", sim_args).start() for n in names]
    data = root / "server"
    data.mkdir()
    write_configuration(data, members={"probeIntervalSeconds": 2, "notReadyGraceSeconds": 6, "tolerationSeconds": 0})
    server = ServerProcess(data, args=["--store", args.store] if args.store else [])
    server.start_timeout = 120  # a loaded machine imports slowly
    result: dict[str, Any] = {}
    try:
        server.start()
        for s in sims:
            s.wait_ready(120)
        http = server.client(timeout=60)
        for s in sims:
            r = http.post("/api/v1/clusters", json={"name": s.name, "endpoint": s.server,
                                                    "credentials": {"kubeconfig": s.kubeconfig.read_text()}})
            r.raise_for_status()

        def all_ready() -> bool:
            items = http.get("/apis/multicluster.io/v1alpha1/clusters").json()["items"]
            return sum(any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (i.get("status") or {}).get("conditions") or []) for i in items) == len(sims)

        deadline = time.monotonic() + 60
        while not all_ready():
            if time.monotonic() > deadline:
                raise TimeoutError("members not Ready")
            time.sleep(0.2)
        watcher = Watcher(sims)
        time.sleep(1.0)
        m, k = args.workloads, min(args.spread, len(names))

        # ---- 1. latency at a steady rate
        lat_names = [f"lat-{i:05d}" for i in range(m)]
        batch(http, [deployment(n) for n in lat_names])
        sent: dict[str, float] = {}
        placed = {n: {names[(i + j) % len(names)]: 1 for j in range(k)} for i, n in enumerate(lat_names)}
        meter = CpuMeter(server, sims)
        started = time.time()
        clients = [server.client(timeout=60) for _ in range(8)]

        def send(i: int) -> None:
            due = started + i / args.rate
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            n = lat_names[i]
            sent[n] = time.time()
            clients[i % len(clients)].post(BINDINGS, json=binding(n, placed[n])).raise_for_status()

        with ThreadPoolExecutor(max_workers=32) as pool:
            list(pool.map(send, range(m)))
        want = [(c, n) for n in lat_names for c in placed[n]]
        ok = watcher.wait(lambda: all(w in watcher.first for w in want), 120)
        lat = [watcher.first[(c, n)] - sent[n] for c, n in want if (c, n) in watcher.first]
        last = max(watcher.first.get(w, 0.0) for w in want)
        order = sorted((sent[n], watcher.first[(c, n)] - sent[n]) for c, n in want if (c, n) in watcher.first)
        tenth = max(1, len(order) // 10)
        trend = [round(statistics.median(x for _, x in order[i:i + tenth]) * 1000) for i in range(0, len(order), tenth)]
        result["latency"] = {"p50_ms_by_tenth": trend[:10],
            "bindings": m, "copies": len(want), "present": len(lat), "complete": ok, "rate": args.rate,
            "p50_ms": round(pct(lat, 50) * 1000, 1), "p99_ms": round(pct(lat, 99) * 1000, 1),
            "max_ms": round(max(lat) * 1000, 1) if lat else None,
            "copies_per_s": round(len(lat) / max(last - started, 1e-9), 1), **meter.per_copy_ms(len(lat))}
        print(f"latency: {result['latency']}", flush=True)
        result["latency"]["removed_s"] = round(remove(clients, watcher, lat_names), 2)

        # ---- 2. burst: one batch of bindings
        burst_names = [f"burst-{i:05d}" for i in range(m)]
        batch(http, [deployment(n) for n in burst_names])
        placed_b = {n: {names[(i + j) % len(names)]: 1 for j in range(k)} for i, n in enumerate(burst_names)}
        meter = CpuMeter(server, sims)
        t0 = time.time()
        batch(http, [binding(n, placed_b[n]) for n in burst_names])
        t_sent = time.time()
        want_b = [(c, n) for n in burst_names for c in placed_b[n]]
        ok = watcher.wait(lambda: all(w in watcher.first for w in want_b), 300)
        seen = [watcher.first[w] for w in want_b if w in watcher.first]
        done = max(seen) if seen else t0
        lat_b = [watcher.first[(c, n)] - t_sent for c, n in want_b if (c, n) in watcher.first]
        result["burst"] = {"bindings": m, "copies": len(want_b), "present": len(seen), "complete": ok,
                           "batch_write_s": round(t_sent - t0, 3), "all_present_s": round(done - t0, 3),
                           "p50_ms": round(pct(lat_b, 50) * 1000, 1), "p99_ms": round(pct(lat_b, 99) * 1000, 1),
                           "copies_per_s": round(len(seen) / max(done - t0, 1e-9), 1), **meter.per_copy_ms(len(seen))}
        print(f"burst: {result['burst']}", flush=True)
        result["burst"]["removed_s"] = round(remove(clients, watcher, burst_names), 2)

        # ---- 3. failover
        if args.failover:
            victim, others = names[0], names[1:]
            fo_names = [f"fo-{i:04d}" for i in range(args.failover)]
            batch(http, [deployment(n) for n in fo_names])
            batch(http, [binding(n, {victim: 1, others[i % len(others)]: 1}, replicas=2)
                         for i, n in enumerate(fo_names)])
            want_f = [(c, n) for n in fo_names for c in (victim, others[fo_names.index(n) % len(others)])]
            if not watcher.wait(lambda: all(w in watcher.first for w in want_f), 120):
                raise TimeoutError("failover workloads not present before the fault")
            sims[0].fault("down")
            t_fault = time.time()
            t_nr = None
            while time.time() - t_fault < 60:
                c = http.get(f"/apis/multicluster.io/v1alpha1/clusters/{victim}").json()
                if any(x.get("type") == "Ready" and x.get("status") == "False"
                       for x in (c.get("status") or {}).get("conditions") or []):
                    t_nr = time.time()
                    break
                time.sleep(0.05)
            if t_nr is None:
                raise TimeoutError("victim never NotReady")
            replaced_at: dict[str, float] = {}
            deadline = time.time() + args.failover_timeout
            while time.time() < deadline and len(replaced_at) < len(fo_names):
                items = http.get(BINDINGS).json()["items"]
                for b in items:
                    n = b["metadata"]["name"]
                    if n not in fo_names or n in replaced_at:
                        continue
                    pl = {t["cluster"]: t["replicas"] for t in (b.get("status") or {}).get("placement") or []}
                    if not pl or victim in pl or sum(pl.values()) != 2:
                        continue
                    with watcher.changed:
                        if all(watcher.replicas.get((c, n)) == r for c, r in pl.items() if r):
                            replaced_at[n] = time.time()
                time.sleep(0.1)
            sims[0].fault("up")
            times = sorted(t - t_nr for t in replaced_at.values())
            result["failover"] = {
                "workloads": len(fo_names), "replaced": len(replaced_at), "victim": victim,
                "not_ready_after_fault_s": round(t_nr - t_fault, 2),
                "all_replaced_after_not_ready_s": round(times[-1], 2) if len(times) == len(fo_names) else None,
                "p50_replaced_s": round(statistics.median(times), 2) if times else None}
            print(f"failover: {result['failover']}", flush=True)
        watcher.stop.set()
        for c in clients:
            c.close()
        http.close()
    finally:
        try:
            server.stop(check=False)
        finally:
            for s in sims:
                s.stop()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=positive_int, default=20)
    ap.add_argument("--workloads", type=positive_int, default=1000)
    ap.add_argument("--spread", type=positive_int, default=2, help="members per binding")
    ap.add_argument("--rate", type=positive_float, default=10.0, help="bindings per second in the latency phase (keep "
                    "rate x spread below the burst phase's copies_per_s, or the latency measures queueing)")
    ap.add_argument("--nodes", type=positive_int, default=3, help="nodes per member")
    ap.add_argument("--failover", type=int, default=100, help="workloads on the failing member (0 = skip)")
    ap.add_argument("--failover-timeout", type=float, default=60.0)
    ap.add_argument("--store", default=None, help="store URL for drods serve (default: its sqlite)")
    ap.add_argument("--no-tls", action="store_true",
                    help="members serve plain HTTP (what TLS to the members costs: compare with the default)")
    args = ap.parse_args()
    print(f"conditions: {args.clusters} sims x {args.nodes} nodes, {args.workloads} workloads on {args.spread} "
          f"members each, latency phase at {args.rate:g} bindings/s, failover of {args.failover} workloads, "
          f"members over {'plain HTTP' if args.no_tls else 'TLS'}; "
          f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{platform.platform()}", flush=True)
    res = run(args)
    print(json.dumps({"bench": "propagation", "clusters": args.clusters, "workloads": args.workloads,
                      "spread": args.spread, "membersTls": not args.no_tls, **res}))


if __name__ == "__main__":
    main()
