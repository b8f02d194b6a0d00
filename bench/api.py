"""API server throughput: PUT /api/v1/metrics from many clusters, and one 1,000-object sync batch.

Starts its own ``drods serve`` (or uses ``--server URL --token T``), registers the clusters, then
drives authenticated reports over ``--connections`` concurrent keep-alive connections.

    python bench/api.py --clusters 1000 --connections 32 --seconds 20 [--store sqlite|etcd]

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
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.arguments import positive_float, positive_int  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def report(cluster: str, rng: random.Random) -> dict[str, object]:
    cap = 64.0
    return {
        "cluster": cluster, "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "cpuCapacity": cap, "cpuUsage": round(rng.uniform(10, 90), 2), "memoryCapacity": 256.0,
        "memoryAvailable": round(rng.uniform(20, 200), 2), "gpuCapacity": 8, "gpuUsage": round(rng.uniform(0, 100), 1),
        "storageCapacity": 4096.0, "storageAvailable": 2048.0, "networkIn": rng.uniform(0, 1000),
        "networkOut": rng.uniform(0, 1000), "pods": rng.randint(0, 500),
        "largestNodeFree": {"cpu": 4.0, "memory": 16.0, "gpu": 1},
    }


async def drive(url: str, token: str, clusters: list[str], connections: int, seconds: float) -> dict[str, float]:
    from drods.transport import async_transport

    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, headers=headers, transport=async_transport(limits=limits),
                                 timeout=30) as client:

        async def worker(k: int) -> None:
            nonlocal errors
            rng = random.Random(k)
            i = k
            while time.perf_counter() < deadline:
                body = report(clusters[i % len(clusters)], rng)
                i += connections
                t0 = time.perf_counter()
                r = await client.put("/api/v1/metrics", json=body)
                latencies.append(time.perf_counter() - t0)
                if r.status_code >= 300:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(connections)))
        elapsed = time.perf_counter() - started
    ms = [x * 1000 for x in latencies]
    return {"requests": len(ms), "errors": errors, "rps": len(ms) / elapsed, "p50_ms": pct(ms, 0.5),
            "p99_ms": pct(ms, 0.99), "mean_ms": statistics.fmean(ms) if ms else float("nan")}


# Each wrk thread has its own Lua state: ``setup`` numbers them so they interleave one sequence
# (cluster = counter mod N, round = counter div N) and every report carries a newer timestamp than
# the cluster's last one. Values drift gently and stay clear of the threshold rules, like a steady
# fleet: what is measured is the ingest path, not a storm of threshold events (a flapping metric
# costs one durable event write per crossing; see tests/monitor_e2e for those bounds).
WRK_SCRIPT = """
token = "%(token)s"
threads = %(threads)d
base = os.time() - %(age)d
local n = 0
setup = function(thread)
  thread:set("tid", n)
  n = n + 1
end
init = function(args)
  counter = tid
end
request = function()
  local c = counter %% %(clusters)d
  local k = math.floor(counter / %(clusters)d)
  counter = counter + threads
  local ts = os.date("!%%Y-%%m-%%dT%%H:%%M:%%S", base + k) .. string.format(".%%06dZ", c)
  local body = string.format('{"cluster":"bench-%%05d","timestamp":"%%s","cpuCapacity":64,"cpuUsage":%%d,'
    .. '"memoryCapacity":256,"memoryAvailable":%%d,"gpuCapacity":8,"gpuUsage":10,"storageCapacity":4096,'
    .. '"storageAvailable":2048,"networkIn":%%d,"networkOut":5,"pods":%%d,'
    .. '"largestNodeFree":{"cpu":4,"memory":16,"gpu":1}}', c, ts, 20 + c %% 40 + k %% 3, 128 + c %% 64,
    100 + c %% 50 + k %% 5, 100 + c %% 300)
  return wrk.format("PUT", "/api/v1/metrics",
    {["Content-Type"]="application/json", ["Authorization"]="Bearer " .. token}, body)
end
"""


def drive_wrk(url: str, token: str, clusters: int, connections: int, seconds: float,
              age: int = 120) -> dict[str, float]:
    """wrk (C, from Debian's packages) keeps the load generator from eating the server's CPU."""
    import re
    import shutil
    import subprocess

    wrk = shutil.which("wrk")
    assert wrk is not None
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % {"token": token, "clusters": clusters, "threads": 2, "age": age})
    out = subprocess.run([wrk, "-t2", f"-c{connections}", f"-d{int(seconds)}s", "--latency", "-s", f.name, url],
                         capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert m, out
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"requests": total, "errors": int(bad.group(1)) if bad else 0, "rps": rps, "p50_ms": ms("50"),
            "p99_ms": ms("99"), "mean_ms": float("nan")}


def report_outcomes(url: str, token: str) -> dict[str, float]:
    """The server's own count of accepted and refused reports (202 answers are not wrk errors)."""
    import re

    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30).text
    out: dict[str, float] = {}
    for m in re.finditer(r'^drods_monitor_reports_total\{result="([^"]+)",source="push"\} ([\d.e+]+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def batch_once(url: str, token: str, n: int, run: int) -> float:
    objs = [{"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy",
             "metadata": {"name": f"bench-{run}-{i}"}, "spec": {"resourceType": "Deployment"}} for i in range(n)]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        t0 = time.perf_counter()
        r = c.post("/api/v1/sync/batch", json={"objects": objs})
        elapsed = time.perf_counter() - t0
        r.raise_for_status()
    return elapsed * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=positive_int, default=1000)
    ap.add_argument("--connections", type=positive_int, default=32)
    ap.add_argument("--seconds", type=positive_float, default=20)
    ap.add_argument("--store", choices=["sqlite", "etcd"], default="sqlite")
    ap.add_argument("--server")
    ap.add_argument("--token")
    ap.add_argument("--batches", type=positive_int, default=5)
    ap.add_argument("--python-client", action="store_true", help="use httpx even when wrk is installed")
    args = ap.parse_args()

    from tests.server_process import ServerProcess

    server = etcd = None
    url, token = args.server, args.token
    if url is None:
        tmp = scratch_dir("drods-bench-api-")
        extra: list[str] = []
        if args.store == "etcd":
            from tests.etcd_server import EtcdCluster

            etcd = EtcdCluster(1).__enter__()
            extra = ["--store", f"etcd://{etcd.endpoints[0]}"]
        server = ServerProcess(tmp, command="apiserver", args=extra, tls=False).start()  # wrk: plain HTTP
        url, token = server.url, server.token("admin")
    assert token is not None
    try:
        names = [f"bench-{i:05d}" for i in range(args.clusters)]
        objs = [{"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster", "metadata": {"name": n},
                 "spec": {"syncMode": "Pull"}} for n in names]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            for i in range(0, len(objs), 1000):
                c.post("/api/v1/sync/batch", json={"objects": objs[i:i + 1000]}).raise_for_status()
        import shutil

        use_wrk = shutil.which("wrk") is not None and not args.python_client
        if use_wrk:
            drive_wrk(url, token, args.clusters, args.connections, 2, age=600)  # warm-up, older timestamps
            before = report_outcomes(url, token)
            put = drive_wrk(url, token, args.clusters, args.connections, args.seconds)
        else:
            asyncio.run(drive(url, token, names, args.connections, 2))  # warm-up
            before = report_outcomes(url, token)
            put = asyncio.run(drive(url, token, names, args.connections, args.seconds))
        after = report_outcomes(url, token)
        outcomes = {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v - before.get(k, 0.0) > 0}
        batches = [batch_once(url, token, 1000, r) for r in range(args.batches)]
    finally:
        if server is not None:
            server.stop(check=False)
        if etcd is not None:
            etcd.__exit__(None, None, None)
    print(f"conditions: {os.cpu_count()} cores, python {platform.python_version()}, store={args.store}, "
          f"clusters={args.clusters}, connections={args.connections}, duration={args.seconds}s, "
          f"load generator {'wrk' if use_wrk else 'httpx'} on the same machine")
    print(f"PUT /api/v1/metrics: {put['rps']:.0f} req/s, p50 {put['p50_ms']:.1f} ms, "
          f"p99 {put['p99_ms']:.1f} ms, errors {put['errors']}, outcomes {outcomes}")
    print(f"POST /api/v1/sync/batch (1000 objects): p50 {pct(batches, 0.5):.0f} ms, max {max(batches):.0f} ms")
    print(json.dumps({"bench": "api", "store": args.store, "client": "wrk" if use_wrk else "httpx",
                      "clusters": args.clusters,
                      "connections": args.connections, "seconds": args.seconds,
                      "metrics_rps": round(put["rps"], 1), "metrics_p50_ms": round(put["p50_ms"], 2),
                      "metrics_p99_ms": round(put["p99_ms"], 2), "metrics_errors": put["errors"],
                      "metrics_accepted": outcomes.get("accepted", 0), "metrics_refused": sum(
                          v for k, v in outcomes.items() if k != "accepted"),
                      "batch_1000_p50_ms": round(pct(batches, 0.5), 1), "batch_1000_max_ms": round(max(batches), 1)}))


if __name__ == "__main__":
    main()
