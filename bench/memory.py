"""Memory of a whole ``drods serve`` holding a large fleet and many bindings.

    python bench/memory.py [--clusters 10000] [--bindings 100000] [--settle 30]

A fresh SQLite store gets ``--clusters`` Cluster objects (through the object registry) with a
status document each, and ``--bindings`` Bindings scheduled an hour earlier (status with a placement of one to
three clusters, which the clusters' statuses already show), written straight into the store in
large transactions. Then ``drods
serve`` starts on that store; once ``/readyz`` answers, its RSS is sampled every second for
``--settle`` seconds (informers listed, scheduler cache and queue built, controllers started).
After the server stops, the bench counts the Bindings by status phase: in a failure storm, how many
the scheduler had decided again by the end.

``--works``: each binding propagates a Deployment (with a ConfigMap it reads, a dependent that goes
with it) and has its Works stored, one per placed cluster, as the binding controller plans them
(ownership metadata and all) and as applied — 100,000 bindings over 1–3 clusters are ~200,000 Works.

``--members reporting`` (the default) makes every cluster a pull-mode member whose status document
the bench refreshes every ``--report-seconds``, as its agent's reports would: the fleet stays Ready,
which is the steady state of a control plane holding it. ``--members unreachable`` registers
push-mode members with no endpoint: after the health grace every cluster is NotReady and every
binding fails over to nowhere, a failure storm rather than a steady state. The product holds failover
while no cluster is Ready (``members.holdFailoverWhileNoneReady``) and paces it while most are NotReady
(``members.unhealthyClusterThreshold``); to make that storm the bench turns both off unless ``--hold-failover``
is given (the conditions say which).

``--outage S`` (with reporting members): the members stop reporting at ``/readyz`` and report again S
seconds later, as agents cut off and reconnected would: once their last report is older than the
pull grace every cluster is NotReady, bindings fail over after the toleration (to nowhere: every
cluster is down) and the scheduler decides each again — a Binding on one cluster turns Unschedulable,
one on several stays Scheduled on the others, short of its replicas (``Partial`` in the counts); then
every cluster is Ready again and the parked and short bindings are placed anew. From the return on the
bench reads the Bindings every ``--poll-seconds`` (another reader of the store file) until every one is
Scheduled with all its replicas: ``converge_s``; each reading (seconds after the return, Bindings per phase
and the Ready clusters) is printed among the conditions, so where the time went shows.

``--list-limit N`` (with ``--works``): after the settling, every Work is listed through the API as a
client would — in pages of N (kubectl's chunk is 500), or all in one answer with 0 — and the server's
memory is read around it: ``list_s``, ``listed``, ``list_rss_before_mb`` (VmRSS before) and
``list_peak_rss_mb`` (VmHWM after).

Prints the conditions, then one JSON line: ``rss_mb`` (last sample), ``peak_rss_mb`` (VmHWM),
``ready_s`` (start → /readyz), the store's size, ``last_120s_growth_pct`` (RSS growth over the last
two minutes of sampling) and ``binding_phases`` (Bindings per status phase at the end, ``Partial`` for
one Scheduled short of its replicas); with
``--outage`` also ``phases_at_return`` (Bindings per phase when the members reported again) and
``converge_s`` (return → every Binding Scheduled with all its replicas; null if not within
``--settle``). The seed is
sealed at rest with the data dir's keys, as the server's own writes are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from bench.configuration import FAILOVER_UNHELD, write_configuration  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.assembly import encrypted_store  # noqa: E402
from drods.controllers import manifests as M  # noqa: E402
from drods.controllers.fleet import ready_condition  # noqa: E402
from drods.controllers.settings import MemberSettings  # noqa: E402
from drods.model.annotations import LEADER_GENERATION  # noqa: E402
from drods.model.kinds import BINDING, CLUSTER, WORK, by_kind  # noqa: E402
from drods.model.timefmt import rfc3339_ms  # noqa: E402
from drods.model.work import EXECUTION_FINALIZER, work_labels, work_name  # noqa: E402
from drods.registry.objects import ObjectRegistry  # noqa: E402
from drods.registry.secrets import SecretBox, load_or_create_key  # noqa: E402
from drods.store import Put, Store, open_store  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

REGIONS = [f"region-{i}" for i in range(12)]


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _cluster_names(clusters: int) -> list[str]:
    return [f"cluster-{i:05d}" for i in range(clusters)]


async def report(store: Store, clusters: int, rng: np.random.Generator) -> None:
    """Every cluster's status document, stamped now (what its agent's report leaves in the store)."""
    stamp = rfc3339_ms(time.time())
    docs = []
    for nm in _cluster_names(clusters):
        cpu = float(rng.choice([64, 128, 256, 512]))
        docs.append(Put(f"/status/clusters/{nm}", json.dumps({"status": {
            "timestamp": stamp, "source": "push",
            "cpu": {"capacity": cpu, "allocatable": cpu, "allocated": cpu * 0.3, "used": cpu * 0.3},
            "memory": {"capacity": cpu * 4, "allocatable": cpu * 4, "allocated": cpu, "used": cpu},
            "pods": {"capacity": cpu * 8, "used": cpu}}, "publishedAt": stamp}).encode()))
    for i in range(0, len(docs), 5000):
        await store.txn([], docs[i:i + 5000])


DEPLOYMENT, CONFIG_MAP = by_kind("apps/v1", "Deployment"), by_kind("v1", "ConfigMap")


def _templates(name: str, replicas: int, stamp: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Deployment and the ConfigMap it reads, as stored."""
    meta = {"namespace": "shop", "uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": stamp}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", **meta},
          "data": {"LOG_LEVEL": "info", "UPSTREAM": f"http://{name}-backend:8080"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": name, "labels": {"app": name}, **meta, "uid": str(uuid.uuid4())},
              "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                       "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                           {"name": "main", "image": "registry.example.com/shop/web:1.4.2",
                            "envFrom": [{"configMapRef": {"name": f"{name}-config"}}],
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}}
    return deploy, cm


def _propagated(binding: dict[str, Any], clusters: list[dict[str, Any]], stamp: str, members: str) -> list[Put]:
    """The binding's Deployment and ConfigMap, the binding pointed at them, and its Works as the
    binding controller plans them (applied)."""
    assert DEPLOYMENT is not None and CONFIG_MAP is not None
    name, uid = binding["metadata"]["name"], binding["metadata"]["uid"]
    deploy, cm = _templates(name, int(binding["spec"]["replicas"]), stamp)
    binding["spec"]["resource"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "shop"}
    targets = [M.Target(c["metadata"]["name"], 1, dict(c["metadata"].get("labels") or {}), None,
                        {k: str(c["spec"][k]) for k in ("provider", "region", "zone", "city") if c["spec"].get(k)})
               for c in clusters]
    out = [Put(DEPLOYMENT.key(name, "shop"), json.dumps(deploy).encode()),
           Put(CONFIG_MAP.key(f"{name}-config", "shop"), json.dumps(cm).encode())]
    for cluster, p in M.plan(name, uid, deploy, targets, [cm], []).items():
        assert isinstance(p, M.ManifestSet)
        meta: dict[str, Any] = {"name": work_name(name, cluster), "labels": work_labels(name, cluster),
                                "annotations": {LEADER_GENERATION: "1"}, "uid": str(uuid.uuid4()), "generation": 1,
                                "creationTimestamp": stamp}
        if members != "reporting":
            meta["finalizers"] = [EXECUTION_FINALIZER]
        work = {"apiVersion": WORK.api_version, "kind": WORK.kind, "metadata": meta,
                "spec": {"cluster": cluster, "binding": name, "manifests": p.manifests, "hash": p.hash},
                "status": {"observedHash": p.hash, "applied": True, "appliedTime": stamp}}
        out.append(Put(WORK.key(meta["name"]), json.dumps(work).encode()))
    return out


async def seed(url: str, data_dir: Path, clusters: int, bindings: int, rng: np.random.Generator,
               members: str = "reporting", works: bool = False) -> None:
    store = encrypted_store(open_store(url), data_dir)  # sealed at rest, as the server writes them
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(data_dir / "encryption.key")))
    now = time.time()
    names = _cluster_names(clusters)
    mode = {"syncMode": "Pull"} if members == "reporting" else {}
    objs: list[tuple[Any, dict[str, Any]]] = [(CLUSTER, {"metadata": {"name": nm, "labels": {"env": "prod"}},
                       "spec": {"region": REGIONS[i % len(REGIONS)], "zone": f"{REGIONS[i % len(REGIONS)]}-a",
                                "provider": "onprem", **mode},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
            for i, nm in enumerate(names)]
    for i in range(0, len(objs), 1000):
        await registry.batch_upsert(objs[i:i + 1000])
    stamp = rfc3339_ms(now)
    decided = rfc3339_ms(now - 3600)  # decided an hour ago: the clusters' statuses already show them
    await report(store, clusters, rng)
    puts = []
    for b in range(bindings):
        k = int(rng.integers(1, 4))
        where = rng.choice(clusters, size=k, replace=False)
        placement = [{"cluster": names[int(c)], "replicas": 1} for c in where]
        obj: dict[str, Any] = {
            "apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
            "metadata": {"name": f"app-{b:06d}", "uid": str(uuid.uuid4()), "generation": 1,
                         "creationTimestamp": stamp},
            "spec": {"replicas": k, "resources": {"cpu": 0.5, "memory": 1.0}},
            "status": {"phase": "Scheduled", "placement": placement, "message": f"scheduled {k} replicas",
                       "scheduledGeneration": 1, "scheduledTime": decided},
        }
        if works:
            puts += _propagated(obj, [objs[int(c)][1] for c in where], stamp, members)
        puts.append(Put(BINDING.key(obj["metadata"]["name"]), json.dumps(obj, separators=(",", ":")).encode()))
        if len(puts) >= 5000:
            await store.txn([], puts)
            puts = []
    if puts:
        await store.txn([], puts)
    await store.close()


def _phase(binding: dict[str, Any]) -> str:
    """The status phase, or ``Partial`` for a Scheduled Binding placed with fewer replicas than it asks for:
    a failover that cannot move a replica anywhere keeps the Binding Scheduled on the clusters that still
    hold it, so a storm leaves most multi-cluster Bindings Scheduled but short, not Unschedulable."""
    status = binding.get("status") or {}
    phase = str(status.get("phase", ""))
    if phase != "Scheduled":
        return phase
    spec = binding.get("spec") or {}
    wanted = int(spec.get("replicas") or 0)
    placed = [int(p.get("replicas") or 0) for p in status.get("placement") or []]
    duplicated = ((spec.get("placement") or {}).get("replicaScheduling") or {}).get("replicaSchedulingType") \
        == "Duplicated"
    if duplicated:  # every placed cluster holds them all (the scheduler's own count)
        return phase if placed else "Partial"
    return "Partial" if sum(placed) < wanted else phase


async def _phases(url: str, data_dir: Path, *, works: bool = True, ready: bool = False) -> tuple[dict[str, int], int]:
    """Bindings per status phase in the store (how far a storm got; `_phase`), and the Works (unless not
    asked); with ``ready``, the Ready clusters too (``ReadyClusters``)."""
    store = encrypted_store(open_store(url), data_dir)
    try:
        kvs, _ = await store.range(BINDING.key_prefix())
        out: dict[str, int] = {}
        for kv in kvs:
            phase = _phase(json.loads(kv.value))
            out[phase] = out.get(phase, 0) + 1
        del kvs
        if ready:
            clusters, _ = await store.range(CLUSTER.key_prefix())
            out["ReadyClusters"] = sum(ready_condition(json.loads(kv.value)) == "True" for kv in clusters)
        if not works:
            return out, 0
        stored, _ = await store.range(WORK.key_prefix(), limit=0)
        return out, len(stored)
    finally:
        await store.close()


async def _refresh(url: str, clusters: int, rng: np.random.Generator) -> None:
    store = open_store(url)  # another process on the server's file, as the monitor's writes would be
    try:
        await report(store, clusters, rng)
    finally:
        await store.close()


def _growth_pct(samples: list[int], window: int) -> float | None:
    """RSS growth over the last ``window`` one-second samples, in % of where the window began
    (the flatness target: ≤ 5 % over a storm's last two minutes)."""
    if len(samples) <= window or samples[-window - 1] <= 0:
        return None
    return round(100.0 * (samples[-1] - samples[-window - 1]) / samples[-window - 1], 2)


def _list_works(server: ServerProcess, limit: int) -> tuple[int, float]:
    """Every Work through the API, in pages of ``limit`` (0: one answer); how many, and the seconds taken."""
    started = time.perf_counter()
    listed, token = 0, ""
    with server.client(timeout=600) as http:
        while True:
            params = {**({"limit": limit} if limit else {}), **({"continue": token} if token else {})}
            r = http.get("/apis/multicluster.io/v1alpha1/works", params=params)
            r.raise_for_status()
            doc = r.json()
            listed += len(doc.get("items") or [])
            del doc["items"]
            token = (doc.get("metadata") or {}).get("continue") or ""
            if not token:
                return listed, time.perf_counter() - started


HELD = "held while no cluster is Ready, slowed while most are NotReady"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=positive_int, default=10_000)
    ap.add_argument("--bindings", type=positive_int, default=100_000)
    ap.add_argument("--settle", type=float, default=30.0, help="seconds of RSS sampling after /readyz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--members", choices=["reporting", "unreachable"], default="reporting",
                    help="pull-mode members whose status the bench refreshes (steady), or push-mode members "
                         "with no endpoint (every cluster fails)")
    ap.add_argument("--works", action="store_true",
                    help="each binding propagates a Deployment and a ConfigMap, its Works stored (applied)")
    ap.add_argument("--report-seconds", type=float, default=30.0,
                    help="how often reporting members' status documents are refreshed")
    ap.add_argument("--outage", type=float, default=0.0,
                    help="reporting members stop reporting at /readyz and report again this many seconds later")
    ap.add_argument("--poll-seconds", type=float, default=10.0,
                    help="after an outage, how often the Bindings are read to see them all Scheduled again")
    ap.add_argument("--hold-failover", action="store_true",
                    help="the product's default: nothing fails over while no cluster is Ready, and slowly while most "
                         "are NotReady (without it the bench turns both off, so that every cluster failing makes "
                         "the failover storm it measures)")
    ap.add_argument("--list-limit", type=int, default=-1,
                    help="after the settling, list every Work through the API in pages of this many (0: one answer)")
    args = ap.parse_args(argv)
    if args.list_limit >= 0 and not args.works:
        ap.error("--list-limit needs --works (the Works it lists)")
    if args.outage and args.members != "reporting":
        ap.error("--outage needs --members reporting (the members that go quiet and come back)")
    grace = MemberSettings().pullGraceSeconds
    if 0 < args.outage <= grace:  # the members would be Ready throughout: nothing to converge from
        ap.error(f"--outage {args.outage:g}: a member goes NotReady only after the pull grace ({grace:g} s); "
                 "give a longer outage")
    data_dir = scratch_dir("drods-membench-")
    url = f"sqlite://{data_dir / 'drods.db'}"
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    asyncio.run(seed(url, data_dir, args.clusters, args.bindings, rng, args.members, args.works))
    seed_s = time.perf_counter() - t0
    if not args.hold_failover:
        write_configuration(data_dir, members=FAILOVER_UNHELD)
    server = ServerProcess(data_dir, args=["--store", url], start_timeout=600)
    t1 = time.perf_counter()
    server.start()
    ready_s = time.perf_counter() - t1
    assert server.proc is not None
    pid = server.proc.pid
    samples: list[int] = []
    returned: float | None = None
    at_return: dict[str, int] | None = None
    converge_s: float | None = None
    timeline: list[tuple[float, dict[str, int]]] = []  # after the return: (seconds, phases and Ready clusters)
    try:
        start = time.monotonic()
        end = start + args.settle
        next_report = start + (args.outage or args.report_seconds)
        next_poll = math.inf
        while time.monotonic() < end:
            samples.append(_proc_kb(pid, "VmRSS"))
            now = time.monotonic()
            if args.members == "reporting" and now >= next_report:
                if args.outage and returned is None:
                    at_return = asyncio.run(_phases(url, data_dir, works=False))[0]
                    returned = next_poll = time.monotonic()
                asyncio.run(_refresh(url, args.clusters, rng))
                next_report += args.report_seconds
            if converge_s is None and now >= next_poll:
                phases_now = asyncio.run(_phases(url, data_dir, works=False, ready=True))[0]
                assert returned is not None
                timeline.append((round(time.monotonic() - returned, 1), phases_now))
                if phases_now.get("Scheduled", 0) == args.bindings:
                    converge_s = time.monotonic() - returned
                next_poll = time.monotonic() + args.poll_seconds
            time.sleep(1.0)
        peak = _proc_kb(pid, "VmHWM")
        listing: dict[str, Any] = {}
        if args.list_limit >= 0:
            before = _proc_kb(pid, "VmRSS")
            listed, list_s = _list_works(server, args.list_limit)
            listing = {"list_limit": args.list_limit, "listed": listed, "list_s": round(list_s, 1),
                       "list_rss_before_mb": round(before / 1024, 1),
                       "list_peak_rss_mb": round(_proc_kb(pid, "VmHWM") / 1024, 1)}
    except BaseException:
        server.kill()
        raise
    try:
        server.stop(check=False)
        stopped = "SIGTERM"
    except AssertionError:  # a busy process on a loaded machine may take longer than the harness waits
        stopped = "killed after the stop timeout"
    phases, works = asyncio.run(_phases(url, data_dir))
    db_mb = sum(f.stat().st_size for f in data_dir.glob("drods.db*")) / 2**20
    members = (f"pull-mode members reporting every {args.report_seconds:g} s" if args.members == "reporting"
               else "push-mode members with no endpoint (all fail)")
    if args.outage:
        members += f", silent for the first {args.outage:g} s after /readyz"
    print(f"# conditions: drods serve on SQLite, {args.clusters} clusters (with status; {members}), "
          f"{args.bindings} scheduled bindings{' with their Works (Deployment + ConfigMap)' if args.works else ''}, "
          f"failover {HELD if args.hold_failover else 'at once even with most or every cluster down'}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"#   seed_s: {seed_s:.1f}, store_mb: {db_mb:.0f}, stopped: {stopped}, rss samples (MB, 1/s): "
          f"{[round(s / 1024) for s in samples]}")
    if timeline:
        print(f"#   after the return (s: Bindings per phase, Ready clusters): {timeline}")
    print(json.dumps({"clusters": args.clusters, "bindings": args.bindings, "ready_s": round(ready_s, 1),
                      "rss_mb": round(samples[-1] / 1024, 1) if samples else None,
                      "peak_rss_mb": round(peak / 1024, 1), "store_mb": round(db_mb, 1), "works": works,
                      "last_120s_growth_pct": _growth_pct(samples, 120),
                      "binding_phases": phases, **listing,
                      **({"phases_at_return": at_return,
                          "converge_s": None if converge_s is None else round(converge_s, 1)} if args.outage else {})}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
