"""Monitoring ingest bench: N clusters × 20 metrics every 10 s, driven as fast as possible.

In-process mode runs each wire-format report through validation → normalise → rate control →
thresholds → surge → history buffer, and flushes the buffer to the SQLite history once per
simulated tick (one transaction). A second phase writes one simulated day for a few clusters
to measure history bytes per cluster-day.

It also measures the per-workload usage collection at ``--usage-clusters`` ×
``--usage-workloads``: the CPU of one collection round (every member's pods and PodMetrics, one list
of each per namespace, matched to every workload's selector) and the bytes of the usage reports.

Prints the conditions, then one final JSON line of figures.

    python bench/monitoring.py [--clusters 1000] [--duration 60] [--interval 10]
                               [--usage-clusters 100] [--usage-workloads 1000]
    python bench/monitoring.py --via-api self [--server-command serve|apiserver]   # its own server (SQLite)
    python bench/monitoring.py --via-api URL --token T [--store URL] [--data-dir DIR] [--server-pid PID]

`--via-api` runs in real time through HTTP: every cluster reports every ``interval`` seconds,
spread evenly over the interval (agents are not synchronised), for ``duration`` seconds. It
reports the server's CPU per report (needs the server's pid: known when it starts its own),
PUT latency, status-update latency (report sent → its status document seen by an independent
store watch; with SQLite that watch runs in another process and polls the file every 100 ms, so
the figure includes up to 100 ms of polling — the PUT of a report that changed the visible
status returns only after the status write committed, so ``put_published_p99_ms`` bounds the
latency too), status writes (rate control), and history bytes per cluster-day extrapolated
from the raw samples written during the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scratch import scratch_dir  # noqa: E402
from drods.monitor import report as r  # noqa: E402
from drods.monitor.pipeline import MonitorPipeline  # noqa: E402
from drods.monitor.report import MetricsReport  # noqa: E402
from drods.monitor.series import DEFAULT_TIERS, SeriesStore  # noqa: E402
from drods.monitor.thresholds import SustainedDetector  # noqa: E402

T0 = 1_700_006_400.0  # simulated start (aligned to a day)


class Fleet:
    """Deterministic synthetic fleet: per-cluster size, diurnal phase and noise."""

    def __init__(self, n: int, seed: int = 1) -> None:
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.names = [f"cluster-{i:04d}" for i in range(n)]
        self.cpu_cap = self.rng.choice([64.0, 128.0, 256.0, 512.0], n)
        self.mem_cap = self.cpu_cap * 4
        self.gpu_cap = self.rng.choice([0.0, 0.0, 4.0, 8.0], n)
        self.sto_cap = self.rng.choice([2000.0, 10000.0], n)
        self.phase = self.rng.uniform(0, 2 * np.pi, n)
        self.net = self.rng.uniform(100, 2000, n)

    def tick(self, t: float) -> list[dict[str, Any]]:
        n, rng = self.n, self.rng
        day = 2 * np.pi * (t - T0) / 86_400
        load = np.clip(0.5 + 0.25 * np.sin(day + self.phase) + rng.normal(0, 0.03, n), 0.01, 0.99)
        mem = np.clip(load * 0.9 + rng.normal(0, 0.02, n), 0.01, 0.99)
        gpu = np.clip(load + rng.normal(0, 0.05, n), 0, 1)
        sto = np.clip(0.4 + rng.normal(0, 0.01, n), 0, 1)
        net = self.net * (0.5 + load) * (1 + rng.normal(0, 0.05, n))
        ts = datetime.fromtimestamp(t, UTC).isoformat()
        out = []
        for i in range(n):
            out.append(
                {
                    "cluster": self.names[i],
                    "timestamp": ts,
                    "cpuCapacity": float(self.cpu_cap[i]),
                    "cpuUsage": round(float(load[i]) * 100, 2),
                    "memoryCapacity": float(self.mem_cap[i]),
                    "memoryAvailable": round(float(self.mem_cap[i] * (1 - mem[i])), 3),
                    "gpuCapacity": float(self.gpu_cap[i]),
                    "gpuUsage": round(float(gpu[i]) * 100, 2),
                    "storageCapacity": float(self.sto_cap[i]),
                    "storageAvailable": round(float(self.sto_cap[i] * (1 - sto[i])), 1),
                    "networkIn": round(float(net[i]) * 0.6, 2),
                    "networkOut": round(float(net[i]) * 0.4, 2),
                    "pods": int(self.cpu_cap[i] * load[i] * 2),
                    "largestNodeFree": {
                        "cpu": round(float(self.cpu_cap[i]) * 0.05 * (1 - float(load[i])), 2),
                        "memory": round(float(self.mem_cap[i]) * 0.05 * (1 - float(mem[i])), 2),
                        "gpu": float(min(self.gpu_cap[i], 1.0)),
                    },
                    "requestRate": round(float(net[i]) * 3, 1),
                    "agentVersion": "1.2.3",
                }
            )
        return out


class Sink(Protocol):
    """Where reports go; `--via-api` will add an HTTP sink with the same shape."""

    def send(self, reports: list[dict[str, Any]], now: float) -> list[int]:
        """Deliver one tick of reports; return per-report latency in ns."""
        ...

    def end_tick(self, now: float) -> int:
        """Per-tick work (history flush); return its duration in ns."""
        ...


class InProcessSink:
    def __init__(self, pipeline: MonitorPipeline) -> None:
        self.pipeline = pipeline
        self.rejected = 0
        self.events = 0
        self.visible_changes = 0
        self.raw_values = 0

    def send(self, reports: list[dict[str, Any]], now: float) -> list[int]:
        lat: list[int] = []
        ingest = self.pipeline.ingest
        clock = time.perf_counter_ns
        for body in reports:
            t0 = clock()
            res = ingest(MetricsReport.model_validate(body), now)
            lat.append(clock() - t0)
            if res.rejection is not None:
                self.rejected += 1
                continue
            assert res.status is not None
            self.raw_values += len(res.status.values)
            self.events += len(res.events) + len(res.sustained)
            self.visible_changes += len(res.changed)
        return lat

    def end_tick(self, now: float) -> int:
        t0 = time.perf_counter_ns()
        self.pipeline.flush()
        return time.perf_counter_ns() - t0


def history_bytes_per_cluster_day(tmpdir: Path, clusters: int = 10, interval: float = 10.0) -> dict[str, float]:
    """Write one simulated day for a few clusters through the real sample path; measure."""
    fleet = Fleet(clusters, seed=7)
    now = [T0]
    store = SeriesStore(tmpdir / "day.db", clock=lambda: now[0])
    pipe = MonitorPipeline(series=store, clock=lambda: now[0])
    ticks = int(86_400 / interval)
    t_start = time.perf_counter()
    for k in range(ticks):
        t = T0 + k * interval
        now[0] = t
        for body in fleet.tick(t):
            pipe.ingest(MetricsReport.model_validate(body), t)
        pipe.flush()
    fill_s = time.perf_counter() - t_start
    raw_rows = store.row_counts().get(0, 0)
    raw_bytes = store.size_bytes()
    now[0] = T0 + 86_400 + 3600
    t_ds = time.perf_counter()
    store.downsample()
    ds_s = time.perf_counter() - t_ds
    counts = store.row_counts()
    total_bytes = store.size_bytes()
    store.close()
    # Rollup rows are the same shape as raw rows (+1 small int), so bytes/row carries over.
    bpr = raw_bytes / max(raw_rows, 1)
    per_day = {step: counts.get(step, 0) * bpr / clusters for step in (60, 3600)}
    per_day[0] = raw_bytes / clusters
    steady = sum(per_day[t.step_s] * t.keep_s / 86_400 for t in DEFAULT_TIERS)
    return {
        "history_raw_bytes_per_cluster_day": round(per_day[0]),
        "history_raw_bytes_per_row": round(bpr, 1),
        "history_1m_bytes_per_cluster_day": round(per_day[60]),
        "history_1h_bytes_per_cluster_day": round(per_day[3600]),
        "history_day_db_bytes_after_rollup_per_cluster": round(total_bytes / clusters),
        "history_steady_state_bytes_per_cluster": round(steady),
        "history_rows_per_cluster_day": raw_rows / clusters,
        "history_day_fill_s": round(fill_s, 2),
        "history_day_downsample_s": round(ds_s, 3),
        "history_day_clusters": clusters,
    }


def run(args: argparse.Namespace, make_sink: Callable[[MonitorPipeline], Sink]) -> dict[str, Any]:
    fleet = Fleet(args.clusters)
    tmp = scratch_dir("drods-bench-")
    now = [T0]
    store = SeriesStore(tmp / "history.db", clock=lambda: now[0])
    pipe = MonitorPipeline(
        series=store,
        sustained=[SustainedDetector(r.WATER_LEVEL, 0.8, duration_s=120, hysteresis=0.05)],
        clock=lambda: now[0],
    )
    sink = make_sink(pipe)
    ticks = int(args.duration / args.interval)
    # Warm-up tick (imports, first-series inserts) is measured separately.
    lat: list[int] = []
    flush_ns: list[int] = []
    gen_s = 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    first_tick_ms = 0.0
    for k in range(ticks):
        t = T0 + k * args.interval
        now[0] = t
        g0 = time.perf_counter()
        reports = fleet.tick(t)
        gen_s += time.perf_counter() - g0
        tick0 = time.perf_counter()
        lat += sink.send(reports, t)
        flush_ns.append(sink.end_tick(t))
        if k == 0:
            first_tick_ms = (time.perf_counter() - tick0) * 1e3
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    n = len(lat)
    lat_us = np.array(lat) / 1e3
    flush_ms = np.array(flush_ns) / 1e6
    # Generation of synthetic reports is bench overhead, not pipeline cost: subtract it.
    cpu_pipeline = max(cpu - gen_s, 0.0)
    assert isinstance(sink, InProcessSink)
    out: dict[str, Any] = {
        "bench": "monitoring",
        "mode": "in-process",
        "clusters": args.clusters,
        "metrics_per_report": len(r.METRICS),
        "interval_s": args.interval,
        "simulated_s": args.duration,
        "reports": n,
        "raw_values": sink.raw_values,
        "rejected": sink.rejected,
        "events": sink.events,
        "visible_changes": sink.visible_changes,
        "cpu_us_per_report": round(cpu_pipeline / n * 1e6, 1),
        "pipeline_p50_us": round(float(np.percentile(lat_us, 50)), 1),
        "pipeline_p99_us": round(float(np.percentile(lat_us, 99)), 1),
        "pipeline_max_us": round(float(lat_us.max()), 1),
        "flush_ms_per_tick_p50": round(float(np.percentile(flush_ms, 50)), 2),
        "flush_ms_per_tick_max": round(float(flush_ms.max()), 2),
        "flush_us_per_report": round(float(flush_ms.sum()) * 1e3 / n, 1),
        "first_tick_ms": round(first_tick_ms, 1),
        "reports_per_s": round(n / max(wall - gen_s, 1e-9)),
        "wall_s": round(wall, 2),
        "history_db_bytes": store.size_bytes(),
    }
    store.close()
    if not args.skip_day:
        out.update(history_bytes_per_cluster_day(tmp, clusters=args.day_clusters, interval=args.interval))
    return out


def _usage_member(workloads: int, namespaces: int, pods_each: int, seed: int) -> tuple[list[dict[str, Any]], ...]:
    """One member's workloads, pods and PodMetrics, as the Kubernetes API lists them."""
    rng = np.random.default_rng(seed)
    ws, pods, metrics = [], [], []
    for w in range(workloads):
        ns, name = f"ns-{w % namespaces}", f"app-{w}"
        ws.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                   "spec": {"selector": {"matchLabels": {"app": name}}}})
        for i in range(pods_each):
            pod = f"{name}-{i}"
            pods.append({"metadata": {"name": pod, "namespace": ns, "labels": {"app": name, "tier": "web"}},
                         "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {
                             "cpu": "250m", "memory": "256Mi"}}}]},
                         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
            metrics.append({"metadata": {"name": pod, "namespace": ns}, "containers": [{"name": "c", "usage": {
                "cpu": f"{int(rng.integers(1, 250_000_000))}n", "memory": f"{int(rng.integers(1, 262_144))}Ki"}}]})
    return ws, pods, metrics


def workload_usage_cost(clusters: int, workloads: int, namespaces: int = 10, pods_each: int = 3) -> dict[str, Any]:
    """Per-workload usage: CPU of one collection round over the fleet — every member's pods and
    PodMetrics (one list of each per namespace) matched to every workload's selector — and bytes per report."""
    from drods.members.workload_usage import measure

    member = _usage_member(workloads, namespaces, pods_each, seed=7)  # every cluster holds every workload
    by_ns: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for kind, items in enumerate(member):
        for it in items:
            by_ns.setdefault(it["metadata"]["namespace"], ([], [], []))[kind].append(it)
    cpu0 = time.process_time()
    docs: list[dict[str, Any]] = []
    for _ in range(clusters):
        docs = [u.to_doc() for ws, pods, metrics in by_ns.values() for u in measure(ws, pods, metrics).values()]
    cpu = time.process_time() - cpu0
    per_workload = [len(json.dumps(d, separators=(",", ":"))) for d in docs]
    return {"usage_clusters": clusters, "usage_workloads_per_cluster": workloads, "usage_pods_per_workload": pods_each,
            "usage_namespaces": namespaces, "usage_lists_per_cluster_round": 2 * namespaces,
            "usage_cpu_s_per_round": round(cpu, 3), "usage_cpu_ms_per_cluster": round(1000 * cpu / clusters, 2),
            "usage_bytes_per_workload_report": round(float(np.mean(per_workload)), 1),
            "usage_bytes_per_cluster_round": int(sum(per_workload))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds")
    ap.add_argument("--interval", type=float, default=10.0, help="report interval, simulated seconds")
    ap.add_argument("--day-clusters", type=int, default=10, help="clusters for the bytes/cluster-day phase")
    ap.add_argument("--skip-day", action="store_true", help="skip the bytes/cluster-day phase")
    ap.add_argument("--via-api", metavar="URL|self", help="send through PUT /api/v1/metrics of a running server, "
                    "or 'self' to start one (drods serve, SQLite, temp data dir)")
    ap.add_argument("--token", help="bearer token for --via-api URL (operator or admin)")
    ap.add_argument("--store", help="with --via-api URL: the server's store URL, to watch /status/clusters/")
    ap.add_argument("--data-dir", type=Path, help="with --via-api URL: the server's data dir (history size)")
    ap.add_argument("--server-pid", type=int, help="with --via-api URL: the server's pid (CPU cost)")
    ap.add_argument("--concurrency", type=int, default=64, help="--via-api: requests in flight at most")
    ap.add_argument("--server-command", choices=("serve", "apiserver"), default="serve",
                    help="--via-api self: `serve` (every component: monitoring maintenance, scheduler, …) or "
                    "`apiserver` (the ingest path alone; history flushed inline)")
    ap.add_argument("--usage-clusters", type=int, default=100, help="per-workload usage cost: clusters")
    ap.add_argument("--usage-workloads", type=int, default=1000, help="per-workload usage cost: workloads per cluster")
    args = ap.parse_args()
    if args.via_api:
        if args.via_api != "self" and not args.token:
            ap.error("--via-api URL needs --token")
        print(
            f"conditions: python {platform.python_version()} on {platform.machine()} {platform.system()}, "
            f"{os.cpu_count()} CPUs (client and server share them), sqlite {sqlite3.sqlite_version}; "
            f"{args.clusters} clusters x {len(r.METRICS)} metrics every {args.interval:g}s for {args.duration:g}s "
            f"real time through HTTP/1.1 (httpx, keep-alive, <= {args.concurrency} in flight), reports spread "
            f"evenly over the interval; server: "
            + (f"own `drods {args.server_command}` (embedded SQLite store"
               + (", all components incl. scheduler)" if args.server_command == "serve" else ", no components)")
               if args.via_api == "self" else args.via_api)
        )
        res = asyncio.run(run_via_api(args))
        res.update(workload_usage_cost(args.usage_clusters, args.usage_workloads))
        print(json.dumps(res))
        return
    print(
        f"conditions: python {platform.python_version()} on {platform.machine()} {platform.system()}, "
        f"{os.cpu_count()} CPUs, sqlite {sqlite3.sqlite_version}, numpy {np.__version__}; "
        f"{args.clusters} clusters x {len(r.METRICS)} metrics every {args.interval:g}s for "
        f"{args.duration:g}s simulated, in-process, history on local disk (tempdir, WAL, synchronous=NORMAL); "
        "report JSON generation excluded from CPU figures; per-workload usage: "
        f"{args.usage_clusters} clusters x {args.usage_workloads} workloads (3 pods each, 10 namespaces), "
        "one round of matching pods and PodMetrics to selectors, in-process (no HTTP)"
    )
    res = run(args, InProcessSink)
    res.update(workload_usage_cost(args.usage_clusters, args.usage_workloads))
    print(json.dumps(res))


# ---------------------------------------------------------------------------------------------
# --via-api: end to end through the API server
# ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnServer:
    """`drods serve` in a child process on a temp data dir (embedded SQLite store)."""

    def __init__(self, root: Path, command: str = "serve") -> None:
        from drods.sim.harness import drods_command

        self.data_dir = root / "server"
        self.data_dir.mkdir(parents=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = drods_command()
        self.token = subprocess.run([*cmd, "token", "create", "--role", "admin", "--data-dir", str(self.data_dir)],
                                    check=True, capture_output=True, text=True).stdout.strip()
        self.log = open(root / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        # Plain HTTP: the benchmark measures ingest, comparable with earlier runs (TLS is the default).
        self.proc = subprocess.Popen([*cmd, command, "--data-dir", str(self.data_dir), "--port", str(self.port),
                                      "--insecure-http"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.store_url = f"sqlite://{self.data_dir / 'drods.db'}"

    async def wait_ready(self, http: Any, within_s: float = 60.0) -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"drods serve exited with {self.proc.returncode}")
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            await asyncio.sleep(0.1)
        raise TimeoutError("drods serve not ready")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of a process (Linux /proc), None when unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(np.array(values), q)), 2) if values else None


async def run_via_api(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from drods.model.keys import STATUS_PREFIX
    from drods.store import EventType, open_store
    from drods.transport import async_transport

    root = scratch_dir("drods-bench-api-")
    own = OwnServer(root, args.server_command) if args.via_api == "self" else None
    url = own.url if own else args.via_api
    token = own.token if own else args.token
    store_url = own.store_url if own else args.store
    data_dir = own.data_dir if own else args.data_dir
    pid = own.proc.pid if own else args.server_pid
    fleet = Fleet(args.clusters)
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    sent: dict[tuple[str, int], float] = {}
    visible: list[float] = []
    put_ms: list[float] = []
    put_published_ms: list[float] = []
    counts = {"accepted": 0, "rejected": 0, "published": 0, "http_errors": 0, "events": 0}
    try:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60,
                                     transport=async_transport(limits=limits)) as http:
            if own:
                await own.wait_ready(http)
            sem = asyncio.Semaphore(args.concurrency)

            async def register(name: str) -> None:
                async with sem:
                    r = await http.post("/api/v1/clusters", json={"name": name, "syncMode": "Pull"})
                    if r.status_code not in (201, 409):
                        raise RuntimeError(f"register {name}: {r.status_code} {r.text}")

            await asyncio.gather(*(register(n) for n in fleet.names))

            watcher_task = None
            store = open_store(store_url) if store_url else None
            if store is not None:
                rev = await store.current_revision()

                async def watch() -> None:
                    async for ev in store.watch(STATUS_PREFIX, start_revision=rev + 1):
                        if ev.type is not EventType.PUT:
                            continue
                        arrived = time.perf_counter()
                        try:
                            doc = json.loads(ev.kv.value)
                            ts = datetime.fromisoformat(doc["observed"]["timestamp"].replace("Z", "+00:00"))
                        except (ValueError, KeyError, TypeError):
                            continue
                        t0 = sent.get((ev.kv.key[len(STATUS_PREFIX):], round(ts.timestamp() * 1000)))
                        if t0 is not None:
                            visible.append((arrived - t0) * 1e3)

                watcher_task = asyncio.create_task(watch())

            # Idle baseline of the server's own background work (components), to subtract.
            cpu_idle0, idle_t0 = _cpu_seconds(pid), time.perf_counter()
            await asyncio.sleep(3.0)
            cpu_idle1, idle_s = _cpu_seconds(pid), time.perf_counter() - idle_t0
            history0 = _history_bytes(data_dir)

            async def send(body: dict[str, Any]) -> None:
                async with sem:
                    key = (body["cluster"], round(datetime.fromisoformat(body["timestamp"]).timestamp() * 1000))
                    t0 = time.perf_counter()
                    sent[key] = t0
                    try:
                        resp = await http.put("/api/v1/metrics", json=body)
                    except httpx.HTTPError:
                        counts["http_errors"] += 1
                        return
                    ms = (time.perf_counter() - t0) * 1e3
                    put_ms.append(ms)
                    if resp.status_code == 200:
                        out = resp.json()
                        counts["accepted"] += 1
                        counts["events"] += out["events"]
                        if out["published"]:
                            counts["published"] += 1
                            put_published_ms.append(ms)
                    elif resp.status_code == 202:
                        counts["rejected"] += 1
                    else:
                        counts["http_errors"] += 1

            ticks = int(args.duration / args.interval)
            n = args.clusters
            tasks: list[asyncio.Task[None]] = []
            cpu0 = _cpu_seconds(pid)
            start = time.perf_counter()
            wall0 = time.time()
            gen_s = 0.0
            for k in range(ticks):
                g0 = time.perf_counter()
                bodies = fleet.tick(wall0 + k * args.interval)
                gen_s += time.perf_counter() - g0
                for i, body in enumerate(bodies):
                    due = start + k * args.interval + i * args.interval / n
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    body["timestamp"] = datetime.now(UTC).isoformat()
                    tasks.append(asyncio.create_task(send(body)))
            await asyncio.gather(*tasks)
            elapsed = time.perf_counter() - start
            cpu1 = _cpu_seconds(pid)
            if watcher_task is not None:
                await asyncio.sleep(0.5)  # the last status writes reach the watcher (SQLite polls at 100 ms)
                watcher_task.cancel()
            if store is not None:
                await store.close()
            if not own:
                await asyncio.sleep(1.5)  # one history flush interval
                history1 = _history_bytes(data_dir)
    finally:
        if own:
            own.stop()  # flushes the history buffer and checkpoints the WAL into history.db
    if own:
        history1 = _history_bytes(data_dir)
    reports = len(put_ms)
    out: dict[str, Any] = {
        "bench": "monitoring",
        "mode": "via-api",
        "server": f"self (drods {args.server_command}, sqlite)" if own else url,
        "clusters": args.clusters,
        "metrics_per_report": len(r.METRICS),
        "interval_s": args.interval,
        "duration_s": args.duration,
        "reports": reports,
        **counts,
        "achieved_reports_per_s": round(reports / elapsed, 1),
        "offered_reports_per_s": round(args.clusters / args.interval, 1),
        "put_p50_ms": _pct(put_ms, 50),
        "put_p99_ms": _pct(put_ms, 99),
        "put_published_p99_ms": _pct(put_published_ms, 99),
        "status_visible_samples": len(visible),
        "status_visible_p50_ms": _pct(visible, 50),
        "status_visible_p99_ms": _pct(visible, 99),
        "status_writes_per_report": round(counts["published"] / max(counts["accepted"], 1), 3),
    }
    if cpu0 is not None and cpu1 is not None and cpu_idle0 is not None and cpu_idle1 is not None:
        idle_rate = (cpu_idle1 - cpu_idle0) / idle_s
        ingest_cpu = max((cpu1 - cpu0) - idle_rate * elapsed, 0.0)
        out.update({
            "server_cpu_s": round(cpu1 - cpu0, 2),
            "server_idle_cpu_pct": round(idle_rate * 100, 2),
            "ingest_cpu_us_per_report": round(ingest_cpu / max(reports, 1) * 1e6, 1),
            "ingest_cpu_cores_at_offered_rate": round(ingest_cpu / elapsed, 3),
        })
    if history0 is not None and history1 is not None:
        grown = history1 - history0
        out.update({
            "history_bytes_written": grown,
            "history_raw_bytes_per_cluster_day": round(grown / args.clusters * 86_400 / elapsed),
        })
    return out


def _history_bytes(data_dir: Path | None) -> int | None:
    """history.db + WAL on disk (the server checkpoints on its own; both count)."""
    if data_dir is None:
        return None
    total = 0
    for name in ("history.db", "history.db-wal"):
        p = data_dir / name
        if p.exists():
            total += p.stat().st_size
    return total


if __name__ == "__main__":
    main()
