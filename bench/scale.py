"""Scale scenarios of a whole control plane over a fleet of simulated members, end to end.

The members are one ``drods sim fleet`` process (``--clusters`` × ``--nodes-per-cluster``, each node
holding ``--max-pods``, 1,000 by default; the default 3 × 3 nodes hold ~6,000 of these workloads under
the water-level limit), joined
with ``drods cluster join --from DIR`` (``--mode push``) or ``--pull`` plus ``drods agent --from DIR``
(``--mode pull``); the control plane is one ``drods serve`` on ``--store sqlite|etcd`` (etcd: a
one-member etcd started here), or with ``--processes split`` ``drods apiserver``, ``drods scheduler``
and ``drods controllers`` apart over that store (figures per process; the storm's RSS and the sync's
CPU and memory are the controllers'). Workloads are Deployments in ``default``, each with a ConfigMap its
pod template names (a dependent: it travels in the same Work), placed by one PropagationPolicy on one
member each (Divided, 1 replica). What a member holds is watched through the official Kubernetes
client, as an operator would.

* ``cold-start``: the control plane is stopped, ``--workloads`` Deployments + ConfigMaps and the policy
  are written into its store, and it starts again: ``ready_s`` from its start until every Deployment
  is in a member (``start_s``: until it answers ``/readyz``), then ``works`` (Works in the store,
  ``works_applied`` of them with status applied),
  ``works_per_s``, ``peak_rss_mb`` and ``cpu_s`` per process.
* ``distribution``: steady state with ``--workloads`` placed (every Binding scheduled, every Work
  applied), then ``--rate`` operations/s for
  ``--seconds`` (creates and updates alternating; an update changes an annotation): ``p50_ms`` /
  ``p99_ms`` / ``max_ms`` from the request to the member's watch event showing it (or a later version of
  the same workload: two updates close together may arrive as one),
  ``p99_create_ms`` / ``p99_update_ms`` of each kind apart, and ``cores``: the CPU each process used
  from the first operation to the last arrival, over that time (the bench's own too: its watches
  share the machine). The stream is open: each operation starts
  on its time whether or not earlier ones were answered (``achieved_rate`` falls below ``--rate`` only
  when 32 wait at once). ``--stages`` adds ``stages``: the p50/p99 of each step, from the control
  plane's watch streams (``bound``: to the Binding, ``scheduled``, ``written``: to the Work carrying
  it, ``member``, ``applied``: to the Work's status saying so; ``n``: the operations seen to reach it).
  A step the bench saw after the next one (the API's watch behind the member's) counts as reached
  then; ``stages_late``: the operations that had one.
  ``--trace FILE`` writes one JSON line per operation (``at_s`` from the stream's start, ``op``,
  ``name``, ``ms``: null if it never arrived) — periodic stalls show as latency against ``at_s``.
* ``storm``: steady state, then every member goes ``down`` (``drods sim fault``) for
  ``--down-seconds``, longer (up to ``--timeout``) until every Binding was decided again after the last
  member turned NotReady (within the not-ready toleration a decision keeps the replicas where they are, as
  Karmada's does; ``phases_down`` counts the phases then):
  ``redecisions`` (Bindings the scheduler decided again, from the Bindings' ``scheduledTime``),
  ``all_redecided_s`` (from the fault until the last of them), ``down_s`` and ``redecisions_per_s``
  over it, the control plane's RSS every second
  (``rss_mb``, ``rss_growth_last_pct`` over the last ``--flat-window`` seconds of the storm), then
  every member back ``up``: ``converged_s`` until every Binding is Scheduled with a placement and
  every Work applied at its current hash.
* ``sync``: Binding → Work, measured as Karmada measures its binding-to-Work rate (karmada issue
  7062: the binding controller stopped while the ResourceBindings are made, then started): the
  control plane is stopped, ``--workloads`` more Deployments + ConfigMaps are written into its store
  and bound and scheduled by the resource detector and the scheduler alone (``bind_s``), then the
  whole control plane starts and the Works in the store are counted every 0.25 s from another
  connection: ``first_work_s`` and ``works_written_s`` (from the start), ``works_per_s`` (first Work
  to last), ``works_per_s_middle`` (the middle 80 %), and ``drods serve``'s ``cpu_s`` and
  ``peak_rss_mb`` from its start. The members apply the Works meanwhile (push: the same process;
  pull: the agents). Bindings the members have no room for end it at once with their count (the
  fleet is too small for ``--workloads``), not after ``--timeout``.
* ``idle``: every member Ready and ``--workloads`` placed, then ``cpu_s`` and ``cores`` (CPU
  seconds / wall seconds) of each process over ``--seconds``, and ``rss_mb``: what watching the
  fleet costs with nothing to do.

Prints the conditions, then one JSON line with the figures and ``clusters``, ``workloads``, ``store``
(several scenarios, comma-separated, run in turn over one fleet and control plane: a line each;
cold-start first, as it restarts the control plane over a store it fills).

``--failure-detection``: the control plane finds a silent member NotReady and moves its bindings as the
product does by default (``default``), or at once and even while every member is down (``fast``; by default
the product holds failover while no cluster is Ready), which the storm needs to be seen within a bench's
time and gets unless told otherwise (``--help`` states each one's timings); the conditions line names it.
With ``fast`` on a loaded 2-core machine a cold start or a stream turned members NotReady whose answers
had only queued behind the control plane's own work, and moved their bindings: figures of a failover,
not of the scenario.

    python bench/scale.py --scenario cold-start --clusters 100 --nodes-per-cluster 50 --workloads 30000
    python bench/scale.py --scenario distribution --clusters 100 --rate 50 --seconds 60 --mode pull
    python bench/scale.py --scenario storm --clusters 20 --workloads 2000
    python bench/scale.py --scenario sync --clusters 100 --workloads 10000 --mode pull
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import yaml  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from kubernetes import watch as k8s_watch  # noqa: E402

from bench.arguments import positive_float, positive_int  # noqa: E402
from bench.configuration import FAILOVER_UNHELD, write_configuration  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.sim.harness import drods_command  # noqa: E402
from tests.server_process import ServerProcess, wait_until  # noqa: E402

SELECTOR = "multicluster.io/managed-by=drods"
MARK = "bench.drods.io/version"
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"
WORKS = "/apis/multicluster.io/v1alpha1/works"
# ``--failure-detection``: the settings it lays over the control plane's, and how the conditions line names them
FAILURE_DETECTION = {
    "default": ({}, "the product's", "probed every 5 s, NotReady after 15 s, moved 30 s after"),
    "fast": ({"probeIntervalSeconds": 2, "notReadyGraceSeconds": 6, "tolerationSeconds": 0, **FAILOVER_UNHELD}, "fast",
             "probed every 2 s, NotReady after 6 s, moved at once, even with most or every member NotReady"),
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- processes -----------------------------------------------------------------------------------


def proc_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


class Child:
    """A ``drods`` child process (the fleet, the agents) with its log; stopped with SIGTERM."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self._log = open(log, "wb")  # noqa: SIM115 - lives as long as the child
        self.proc = subprocess.Popen([*drods_command(), *args], stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env or dict(os.environ))
        self.log = log

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@contextmanager
def fleet(root: Path, clusters: int, nodes: int, max_pods: int = 1000) -> Iterator[tuple[Child, list[dict[str, Any]]]]:
    out = root / "fleet"
    child = Child("fleet", ["sim", "fleet", "--clusters", str(clusters), "--nodes-per-cluster", str(nodes),
                            "--max-pods", str(max_pods), "--out", str(out), "--fresh"], root / "fleet.log")
    try:
        def ready() -> bool:
            child.check()
            return (out / "fleet.yaml").exists()

        wait_until(ready, 60 + clusters * 2.0, "the fleet to serve", interval=0.2)
        yield child, yaml.safe_load((out / "fleet.yaml").read_text())["members"]
    finally:
        child.stop()


@contextmanager
def store_url(kind: str, root: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite://{root / 'server' / 'drods.db'}"
        return
    from tests.etcd_server import EtcdCluster

    with EtcdCluster(1, base_dir=str(root / "etcd")) as etcd:
        yield f"etcd://{etcd.endpoints[0].removeprefix('http://')}"


def join(server: ServerProcess, root: Path, pull: bool, url: str) -> Child | None:
    """``drods cluster join --from`` (and for pull mode ``drods agent --from``), as a user runs them."""
    env = {**server.environ(), "DRODS_TOKEN": server.token("admin")}
    args = [*drods_command(), "cluster", "join", "--from", str(root / "fleet"), "--server", server.url, "-o", "json"]
    if pull:
        args += ["--pull", "--data-dir", str(server.data_dir), "--store", url]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"join failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    if not pull:
        return None
    return Child("agents", ["agent", "--from", str(root / "fleet"), "--state-dir", str(root / "agents"),
                            "--interval", "10", "--log-level", "warning"], root / "agents.log",
                 {**server.environ(), "DRODS_TOKEN": ""})


# ---- what the members hold -----------------------------------------------------------------------


class MemberWatch:
    """Every member's Deployments (list, then watch; relist after a broken watch): when each
    (name, version mark) was first seen, and how many copies there are."""

    def __init__(self, members: list[dict[str, Any]]) -> None:
        self.seen: dict[str, dict[int, float]] = {}  # name -> {mark: first seen}
        self.present: dict[tuple[str, str], str] = {}  # (member, name) -> mark
        self.cond = threading.Condition()
        self.stop = threading.Event()
        for m in members:
            threading.Thread(target=self._run, args=(m,), daemon=True).start()

    def _note(self, member: str, obj: dict[str, Any], now: float, deleted: bool = False) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        if deleted:
            self.present.pop((member, name), None)
            return
        mark = (meta.get("annotations") or {}).get(MARK, "")
        self.present[(member, name)] = mark
        self.seen.setdefault(name, {}).setdefault(int(mark or 0), now)

    def _run(self, member: dict[str, Any]) -> None:
        api = k8s_config.new_client_from_config(member["kubeconfig"], persist_config=False)
        apps = k8s.AppsV1Api(api)
        while not self.stop.is_set():
            try:
                # Plain JSON, not the client's typed models: building those for every event costs the
                # bench more CPU than the control plane spends on it, and a bench short of CPU sees
                # arrivals late (its figures would include its own lag).
                resp = apps.list_namespaced_deployment("default", label_selector=SELECTOR,
                                                       _request_timeout=(5, 120), _preload_content=False)
                listed = json.loads(resp.data)
                with self.cond:
                    now = time.time()
                    for key in [k for k in self.present if k[0] == member["name"]]:
                        del self.present[key]
                    for d in listed.get("items") or []:
                        self._note(member["name"], d, now)
                    self.cond.notify_all()
                for ev in k8s_watch.Watch().stream(apps.list_namespaced_deployment, "default",
                                                   label_selector=SELECTOR, timeout_seconds=300,
                                                   resource_version=listed["metadata"]["resourceVersion"],
                                                   _request_timeout=(5, 330), deserialize=False):
                    with self.cond:
                        self._note(member["name"], ev["object"], time.time(), ev["type"] == "DELETED")
                        self.cond.notify_all()
            except Exception:  # noqa: BLE001 - a member down breaks its watch: list and watch again
                time.sleep(0.5)

    def wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not cond():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
        return True

    def copies(self) -> int:
        return len(self.present)


# ---- workloads -----------------------------------------------------------------------------------


def workload(i: int, mark: str = "0") -> list[dict[str, Any]]:
    """A Deployment and the ConfigMap its pod template names (a dependent that follows it)."""
    name = f"app-{i:06d}"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", "namespace": "default"},
          "data": {"LOG_LEVEL": "info"}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "default", "annotations": {MARK: mark}},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                        "name": "c", "image": "app:1", "envFrom": [{"configMapRef": {"name": f"{name}-config"}}],
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
    return [cm, dep]


POLICY = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "scale"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default"}],
                   "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}}}


async def _seed(url: str, data_dir: Path, workloads: int, first: int = 0) -> None:
    """Objects written straight into the stopped control plane's store, as a restore would leave them
    (the workloads numbered from ``first``)."""
    from drods.model.kinds import by_kind
    from drods.registry.objects import ObjectRegistry
    from drods.registry.secrets import SecretBox, load_or_create_key
    from drods.store import open_store

    store = open_store(url)
    try:
        registry = ObjectRegistry(store, SecretBox(load_or_create_key(data_dir / "encryption.key")))
        objs = [POLICY, *(o for i in range(first, first + workloads) for o in workload(i))]
        items = [(by_kind(o["apiVersion"], o["kind"]), o) for o in objs]
        for i in range(0, len(items), 2000):
            await registry.batch_upsert(items[i:i + 2000], results=False)
    finally:
        await store.close()


def post_batch(http: httpx.Client, objects: list[dict[str, Any]]) -> None:
    for i in range(0, len(objects), 1000):
        http.post("/api/v1/sync/batch", json={"objects": objects[i:i + 1000]}, timeout=300).raise_for_status()


def list_all(http: httpx.Client, path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        r = http.get(path, params={"limit": 5000, **({"continue": cont} if cont else {})}, timeout=300)
        r.raise_for_status()
        doc = r.json()
        items += doc.get("items") or []
        cont = (doc.get("metadata") or {}).get("continue") or ""
        if not cont:
            return items


def works_applied(http: httpx.Client) -> tuple[int, int]:
    works = list_all(http, WORKS)
    ok = sum(1 for w in works if (w.get("status") or {}).get("applied")
             and (w.get("status") or {}).get("observedHash") == (w.get("spec") or {}).get("hash"))
    return len(works), ok


def reached(marks: dict[int, float] | None, mark: str) -> float | None:
    """When ``mark`` or a later one was first seen: two updates of one workload close together may
    reach a member as one (the later), as level-triggered controllers do."""
    at = [t for m, t in (marks or {}).items() if m >= int(mark)]
    return min(at) if at else None


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))], 1)


# ---- scenarios -----------------------------------------------------------------------------------


class ControlPlane:
    """The control plane under test: one ``drods serve`` (``--processes one``), or ``drods apiserver``,
    ``drods scheduler`` and ``drods controllers`` apart over the same store and data dir (``split``:
    each with its own event loop and GIL, as a deployment that gives them a core each runs them)."""

    def __init__(self, data: Path, url: str, split: bool) -> None:
        self.split = split
        store = ["--store", url]
        if not split:
            self.api = ServerProcess(data, args=store, start_timeout=600)
            self.procs = {"drods serve": self.api}
            return
        self.api = ServerProcess(data, command="apiserver", args=store, start_timeout=600)
        self.procs = {"drods apiserver": self.api,
                      **{f"drods {c}": ServerProcess(data, command=c, args=[*store, "--lease-ttl", "5"],
                                                     start_timeout=600) for c in ("scheduler", "controllers")}}

    @property
    def running(self) -> bool:
        return all(p.proc is not None for p in self.procs.values())

    @property
    def deciding(self) -> str:
        """The process whose memory and CPU the storm and sync scenarios follow: the one that decides
        and writes the Works."""
        return "drods controllers" if self.split else "drods serve"

    def start(self) -> None:
        """The API server first (it makes the data dir's keys on a first start), then the others at once."""
        self.api.start()
        others = [p for p in self.procs.values() if p is not self.api]
        with ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
            list(pool.map(ServerProcess.start, others))  # raises what a start raised

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            if p.proc is not None:
                p.stop(check=False)

    def pids(self) -> dict[str, int]:
        assert self.running, "the control plane is not running"
        return {name: p.proc.pid for name, p in self.procs.items() if p.proc is not None}


class Bench:
    """The fleet, the control plane and the member watch one scenario runs over."""

    def __init__(self, args: argparse.Namespace, stack: ExitStack) -> None:
        self.args = args
        self.synced = 0  # workloads the sync scenario seeded so far
        self.root = scratch_dir("bench-scale-")
        self.fleet, self.members = stack.enter_context(
            fleet(self.root, args.clusters, args.nodes_per_cluster, args.max_pods))
        self.url = stack.enter_context(store_url(args.store, self.root))
        data = self.root / "server"
        data.mkdir(exist_ok=True)
        write_configuration(data, members=FAILURE_DETECTION[args.failure_detection][0])
        self.plane = ControlPlane(data, self.url, args.processes == "split")
        stack.callback(self.plane.stop)
        self.plane.start()
        self.server = self.plane.api
        self.agents = join(self.server, self.root, args.mode == "pull", self.url)
        if self.agents is not None:
            stack.callback(self.agents.stop)
        self.watch = MemberWatch(self.members)
        stack.callback(self.watch.stop.set)
        self.http = httpx.Client(base_url=self.server.url, verify=self.server.verify, timeout=120,
                                 limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
                                 headers={"Authorization": f"Bearer {self.server.token('admin')}"})
        stack.callback(self.http.close)
        wait_until(self.all_ready, 120, "every member Ready", interval=0.5)

    def all_ready(self) -> bool:
        items = self.http.get("/api/v1/clusters").json().get("items") or []
        return len(items) == len(self.members) and all(
            any(c.get("type") == "Ready" and c.get("status") == "True" for c in (x.get("status") or {}).get(
                "conditions") or []) for x in items)

    def pids(self) -> dict[str, int]:
        out = {**self.plane.pids(), "sim fleet": self.fleet.proc.pid}
        if self.agents is not None:
            out["agents"] = self.agents.proc.pid
        return out

    def steady(self, n: int) -> None:
        """``n`` workloads placed and in their members (through the API, not timed)."""
        post_batch(self.http, [POLICY, *(o for i in range(n) for o in workload(i))])
        if not self.watch.wait(lambda: self.watch.copies() >= n, 120 + n * 0.05):
            raise TimeoutError(f"only {self.watch.copies()} of {n} workloads reached the members")


async def _bind_only(url: str, data_dir: Path, n: int, within: float) -> float:
    """Every stored workload bound and scheduled with no member controller running — Karmada's way of
    measuring the binding → Work rate (its binding controller stopped while the ResourceBindings are
    made): the resource detector and the scheduler alone over the store, until ``n`` more Bindings
    carry a placement. Returns the seconds it took."""
    from drods.assembly import Component, assemble, encrypted_store
    from drods.cli.config import component_settings
    from drods.store import open_store

    plane = assemble(open_store(url), data_dir, {Component.DETECTOR, Component.SCHEDULER},
                     settings=component_settings(None, data_dir))
    reader = encrypted_store(open_store(url), data_dir)
    before, _ = await _placed(reader)
    t0, last = time.monotonic(), before
    try:
        async with plane.running():
            while True:
                # the count decodes every Binding in this loop, which the scheduler shares: not too often
                await asyncio.sleep(max(1.0, n / 5000))
                placed, unschedulable = await _placed(reader)
                if placed >= n + before:
                    return time.monotonic() - t0
                if unschedulable and placed == last:  # none placed since the last count, and no room for some
                    raise RuntimeError(f"{unschedulable} Bindings Unschedulable ({placed - before} of {n} placed): "
                                       "the members hold fewer workloads; add members or --nodes-per-cluster")
                if time.monotonic() - t0 > within:
                    raise TimeoutError(f"only {placed - before} of {n} Bindings scheduled")
                last = placed
    finally:
        await reader.close()


async def _placed(reader: Any) -> tuple[int, int]:
    """Bindings with a placement, and Bindings the scheduler found no room for."""
    from drods.model import jsondoc
    from drods.model.kinds import BINDING

    kvs, _ = await reader.range(BINDING.key_prefix())
    placed = unschedulable = 0
    for kv in kvs:
        status = jsondoc.loads(kv.value).get("status") or {}
        placed += bool(status.get("placement"))
        unschedulable += status.get("phase") == "Unschedulable"
    return placed, unschedulable


class WorkCount:
    """Works in the store, counted every ``interval`` from another process's connection (SQLite: a
    read-only count of the keys; etcd: a range read): when the count first reached each value."""

    def __init__(self, url: str, interval: float = 0.25) -> None:
        from drods.model.kinds import WORK

        self.url, self.prefix, self.interval = url, WORK.key_prefix(), interval
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        count = self._sqlite() if self.url.startswith("sqlite://") else self._etcd()
        while not self.stop.is_set():
            try:
                n = count()
            except Exception:  # noqa: BLE001 - a locked or restarting store: the next sample counts
                n = None
            if n is not None:
                self.samples.append((time.time(), n))
            self.stop.wait(self.interval)

    def _sqlite(self) -> Callable[[], int]:
        import sqlite3

        from drods.store.sqlite import _range_bounds

        path = self.url.removeprefix("sqlite://")
        start, end = _range_bounds(self.prefix)

        def count() -> int:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
                return int(db.execute("SELECT count(*) FROM kv WHERE key >= ? AND key < ?", (start, end))
                           .fetchone()[0])
        return count

    def _etcd(self) -> Callable[[], int]:
        from drods.store import open_store

        def count() -> int:
            async def once() -> int:
                store = open_store(self.url)
                try:
                    return len((await store.range(self.prefix))[0])
                finally:
                    await store.close()
            return asyncio.run(once())
        return count

    def first_at(self, n: int) -> float | None:
        return next((t for t, c in self.samples if c >= n), None)

    def wait(self, n: int, timeout: float) -> bool:
        try:
            wait_until(lambda: self.first_at(n) is not None, timeout, f"{n} Works", interval=self.interval)
        except TimeoutError:
            return False
        return True


SYNC_FIRST = 500_000  # sync's workloads are numbered apart: new Bindings whatever ran before it


def sync(b: Bench) -> dict[str, Any]:
    """Binding → Work, as Karmada's binding-to-Work throughput is measured (karmada issue 7062): the
    control plane stopped, ``--workloads`` Deployments + ConfigMaps written into its store and bound
    and scheduled with no member controller running, then the whole control plane started: how fast
    the binding controller writes their Works (``works_per_s``: from the first to the last). The Works
    are applied to the members at the same time, as they would be: by the execution controller in the
    same process (push) or by the agents (pull)."""
    n, args = b.args.workloads, b.args
    assert b.plane.running
    b.plane.stop()
    # a later run over the same fleet seeds new workloads, and restarts over the Works of the earlier ones
    asyncio.run(_seed(b.url, b.server.data_dir, n, SYNC_FIRST + b.synced))
    b.synced += n
    bind_s = asyncio.run(_bind_only(b.url, b.server.data_dir, n, args.timeout))
    counter = WorkCount(b.url)
    try:
        wait_until(lambda: bool(counter.samples), 30, "the first count of the Works", interval=0.1)
        before = counter.samples[-1][1]
        t0 = time.time()
        b.plane.start()
        start_s = time.time() - t0
        done = counter.wait(before + n, args.timeout)
        pid = b.pids()[b.plane.deciding]
        cpu, peak = cpu_seconds(pid), proc_kb(pid, "VmHWM") / 1024  # the process's own, from its start
    finally:
        counter.stop.set()
    first, last = counter.first_at(before + 1), counter.first_at(before + n)
    # the rate once it runs (first Work to last), and over the middle 80 % (no start, no tail)
    p10, p90 = counter.first_at(before + max(1, n // 10)), counter.first_at(before + n - n // 10)
    rate = round((n - 1) / (last - first), 1) if done and last and first and last > first else None
    middle = round((n - n // 10 - max(1, n // 10)) / (p90 - p10), 1) if n >= 20 and p10 and p90 and p90 > p10 \
        else None
    return {"bind_s": round(bind_s, 1), "start_s": round(start_s, 1), "works": counter.samples[-1][1] - before,
            "first_work_s": round(first - t0, 2) if first else None,
            "works_written_s": round(last - t0, 2) if done and last else None,
            "works_per_s": rate, "works_per_s_middle": middle, "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(peak, 1)}


def cold_start(b: Bench) -> dict[str, Any]:
    n = b.args.workloads
    assert b.plane.running
    b.plane.stop()
    asyncio.run(_seed(b.url, b.server.data_dir, n))
    t0 = time.time()
    b.plane.start()
    start_s = time.time() - t0
    # the control plane's CPU from its start; the others' from now
    cpu0 = {k: cpu_seconds(pid) for k, pid in b.pids().items() if k not in b.plane.procs}
    reached = b.watch.wait(lambda: b.watch.copies() >= n, b.args.timeout)
    ready_s = time.time() - t0
    cpu = {k: round(cpu_seconds(pid) - cpu0.get(k, 0.0), 1) for k, pid in b.pids().items()}
    peak = {k: round(proc_kb(pid, "VmHWM") / 1024, 1) for k, pid in b.pids().items()}
    # a Work's status says applied a moment after its copy appears in the member: read once they agree
    deadline = time.time() + 30.0
    works, applied = works_applied(b.http)
    while reached and applied < works and time.time() < deadline:
        time.sleep(0.5)
        works, applied = works_applied(b.http)
    return {"ready_s": round(ready_s, 1) if reached else None, "start_s": round(start_s, 1),
            "copies": b.watch.copies(), "works": works,
            "works_applied": applied, "works_per_s": round(works / ready_s, 1) if reached else None,
            "peak_rss_mb": peak, "cpu_s": cpu}


class StoreWatch:
    """The control plane's side of each operation, from its API's watch streams: when each workload's
    Binding was created and first scheduled, and when its Work first carried (written) and applied
    (applied) each version mark. What ``--stages`` splits the latency by."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.times: dict[tuple[str, str], dict[int, float]] = {}  # (stage, workload) -> {mark: first seen}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        for path, note in ((BINDINGS, self._binding), (WORKS, self._work)):
            threading.Thread(target=self._run, args=(path, note), daemon=True).start()

    def _first(self, stage: str, name: str, mark: str, now: float) -> None:
        with self.lock:
            self.times.setdefault((stage, name), {}).setdefault(int(mark or 0), now)

    def _binding(self, obj: dict[str, Any], now: float) -> None:
        name = ((obj.get("spec") or {}).get("resource") or {}).get("name") or ""
        self._first("bound", name, "0", now)
        if (obj.get("status") or {}).get("scheduledTime"):
            self._first("scheduled", name, "0", now)

    def _work(self, obj: dict[str, Any], now: float) -> None:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        for m in spec.get("manifests") or []:
            if m.get("kind") == "Deployment":
                name = (m.get("metadata") or {}).get("name") or ""
                mark = ((m.get("metadata") or {}).get("annotations") or {}).get(MARK, "")
                self._first("written", name, mark, now)
                if status.get("applied") and status.get("observedHash") == spec.get("hash"):
                    self._first("applied", name, mark, now)

    def _run(self, path: str, note: Callable[[dict[str, Any], float], None]) -> None:
        while not self.stop.is_set():
            try:
                rv = (self.http.get(path, params={"limit": 1}).json().get("metadata") or {}).get("resourceVersion")
                with self.http.stream("GET", path, params={"watch": "true", "resourceVersion": rv or "0"},
                                      timeout=httpx.Timeout(10, read=None)) as r:
                    for line in r.iter_lines():
                        if line.strip():
                            note(json.loads(line).get("object") or {}, time.time())
            except Exception:  # noqa: BLE001 - a broken watch starts again from a fresh list
                time.sleep(0.5)

    def stages(self, ops: list[tuple[str, str, float]],
               seen: dict[str, dict[int, float]]) -> tuple[dict[str, Any], int]:
        """p50/p99 ms of each step an operation took: sent → its Binding → scheduled → its Work written →
        in the member → the Work's status applied (an update has no Binding steps: its Work follows the
        template). Each time is when the bench saw the step; the API's watch streams fall behind the
        members' when the control plane is saturated, so a step seen after the next one was counts as
        reached when the next one was (``stages_late`` says how many operations had one)."""
        with self.lock:
            times = {k: dict(v) for k, v in self.times.items()}
        reached_at: list[list[tuple[str, float]]] = []
        for name, mark, sent in ops:
            path = (["bound", "scheduled"] if mark == "0" else []) + ["written", "member", "applied"]
            row: list[tuple[str, float]] = []
            for stage in path:
                at = reached(seen.get(name) if stage == "member" else times.get((stage, name)),
                             "0" if stage in ("bound", "scheduled") else mark)
                if at is None:
                    break
                row.append((stage, at))
            reached_at.append([("sent", sent), *row])
        return split_stages(reached_at)


def split_stages(rows: list[list[tuple[str, float]]]) -> tuple[dict[str, Any], int]:
    """Per stage, the p50/p99 ms from the step before it and how many operations were seen reaching it
    (a broken watch misses some); each row is one operation's steps in order
    (the first: when it was sent), as seen. A step seen later than a step after it is taken as
    reached then (it cannot have come after it), so no step is negative; with the figures, the
    number of operations that had such a step."""
    steps: dict[str, list[float]] = {}
    late = 0
    for row in rows:
        at = [t for _, t in row]
        for i in range(len(at) - 2, 0, -1):
            at[i] = min(at[i], at[i + 1])
        late += any(a < t for a, (_, t) in zip(at, row, strict=True))
        for i in range(1, len(at)):
            steps.setdefault(row[i][0], []).append((at[i] - max(at[: i])) * 1000)
    return {stage: {"p50_ms": pct(xs, 50), "p99_ms": pct(xs, 99), "n": len(xs)} for stage, xs in steps.items()}, late


def distribution(b: Bench) -> dict[str, Any]:
    """An open stream: each operation starts at its time on the clock, whether or not the ones before
    it were answered (a few in flight at once), as users' requests arrive."""
    args = b.args
    b.steady(args.workloads)
    wait_until(lambda: _converged(b), 120, "the steady state", interval=1.0)
    store = StoreWatch(b.http) if args.stages else None
    if store is not None:
        time.sleep(1.0)  # its watches open before the first operation
    ops: list[tuple[str, str, float]] = []  # (name, mark, sent)
    lock = threading.Lock()

    def send(i: int) -> None:
        if i % 2 == 0:  # a new workload
            cm, dep = workload(args.workloads + i // 2)
            sent = time.time()
            b.http.post("/api/v1/namespaces/default/configmaps", json=cm).raise_for_status()
            b.http.post("/apis/apps/v1/namespaces/default/deployments", json=dep).raise_for_status()
            name, mark = dep["metadata"]["name"], "0"
        else:  # an update of a steady one
            name, mark = f"app-{(i // 2) % args.workloads:06d}", str(i)
            sent = time.time()
            b.http.patch(f"/apis/apps/v1/namespaces/default/deployments/{name}",
                         json={"metadata": {"annotations": {MARK: mark}}},
                         headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
        with lock:
            ops.append((name, mark, sent))

    pids = {**b.pids(), "bench": os.getpid()}  # the bench's own share: its watches compete for the CPU
    print(f"# stream: {args.rate:g} operations/s for {args.seconds:g} s; pids {pids}", file=sys.stderr, flush=True)
    cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
    interval, started, i = 1.0 / args.rate, time.monotonic(), 0
    started_wall = time.time()
    t_end = started + args.seconds
    with ThreadPoolExecutor(max_workers=32) as pool:
        futures = []
        while (at := started + i * interval) < t_end:
            time.sleep(max(0.0, at - time.monotonic()))
            futures.append(pool.submit(send, i))
            i += 1
        for f in futures:
            f.result()
    # the rate achieved: below --rate only when more than the pool's operations wait for answers at once
    achieved = round(len(ops) / max(time.monotonic() - started, 1e-9), 1)
    def arrival(name: str, mark: str) -> float | None:
        return reached(b.watch.seen.get(name), mark)

    b.watch.wait(lambda: all(arrival(n, m) is not None for n, m, _ in ops), args.timeout)
    elapsed = time.monotonic() - started
    cores = {k: round((cpu_seconds(pid) - cpu0[k]) / elapsed, 3) for k, pid in pids.items()}
    with b.watch.cond:
        arrived = [(m, (at - sent) * 1000) for n, m, sent in ops if (at := arrival(n, m)) is not None]
        seen = {n: dict(m) for n, m in b.watch.seen.items()}
    lat = [ms for _, ms in arrived]
    # a create (mark "0") goes through the detector and the scheduler; an update of a placed one does not
    creates = [ms for m, ms in arrived if m == "0"]
    updates = [ms for m, ms in arrived if m != "0"]
    out = {"operations": len(ops), "arrived": len(lat), "rate": args.rate, "achieved_rate": achieved,
           "p50_ms": pct(lat, 50),
           "p99_ms": pct(lat, 99), "max_ms": round(max(lat), 1) if lat else None,
           "p99_create_ms": pct(creates, 99), "p99_update_ms": pct(updates, 99), "cores": cores}
    if store is not None:
        store.stop.set()
        out["stages"], out["stages_late"] = store.stages(ops, seen)
    if args.trace is not None:
        with b.watch.cond:
            rows = [{"at_s": round(sent - started_wall, 3), "op": "create" if m == "0" else "update", "name": n,
                     "ms": None if (at := arrival(n, m)) is None else round((at - sent) * 1000, 1)}
                    for n, m, sent in sorted(ops, key=lambda o: o[2])]
        args.trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _faults(b: Bench, mode: str) -> None:
    """What ``drods sim fault NAME MODE --state-dir DIR`` sends, for every member."""
    from drods.sim.control import send_command

    for m in b.members:
        send_command(b.root / "fleet", m["name"], {"action": "fault", "mode": mode, "ms": 0})


def _decided(b: Bench) -> tuple[dict[str, str], dict[str, int]]:
    """Each Binding's last decision time, and Bindings per phase."""
    bindings = list_all(b.http, BINDINGS)
    phases: dict[str, int] = {}
    for x in bindings:
        phase = str((x.get("status") or {}).get("phase") or "")
        phases[phase] = phases.get(phase, 0) + 1
    return {x["metadata"]["name"]: str((x.get("status") or {}).get("scheduledTime") or "") for x in bindings}, phases


def _decided_after_all_down(b: Bench, decided: dict[str, str]) -> bool:
    """Every member NotReady, and each Binding's last decision (``scheduledTime``) at or after the last of
    them turned so."""
    last = 0.0
    for x in b.http.get("/api/v1/clusters").json().get("items") or []:
        ready = next((c for c in (x.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") == "True" or not ready.get("lastTransitionTime"):
            return False
        last = max(last, datetime.fromisoformat(str(ready["lastTransitionTime"])).timestamp())
    return all(t and datetime.fromisoformat(t).timestamp() >= last - 0.001 for t in decided.values())


def _converged(b: Bench) -> bool:
    if not b.all_ready():
        return False
    bindings = list_all(b.http, BINDINGS)
    if not all((x.get("status") or {}).get("phase") in ("Scheduled", "Running") and (x.get("status") or {})
               .get("placement") for x in bindings):
        return False
    works, applied = works_applied(b.http)
    return works > 0 and works == applied


def storm(b: Bench) -> dict[str, Any]:
    args = b.args
    b.steady(args.workloads)
    wait_until(lambda: _converged(b), 120, "the steady state", interval=1.0)
    before, _ = _decided(b)
    pid = b.pids()[b.plane.deciding]
    rss: list[int] = []
    _faults(b, "down")
    t0 = time.monotonic()
    all_redecided_s: float | None = None
    while True:
        rss.append(proc_kb(pid, "VmRSS") // 1024)
        time.sleep(1.0)
        after, phases = _decided(b)
        redecided = sum(1 for k, v in after.items() if v != before.get(k))
        down_s = time.monotonic() - t0
        if all_redecided_s is None and redecided == len(after):
            all_redecided_s = round(down_s, 1)
        # every member is down: the storm is over once each binding's latest decision came after the last member
        # turned NotReady (a binding first moved to a member not yet NotReady is decided again when that one
        # goes); within the not-ready toleration a decision keeps the replicas where they are, after it (the
        # failover controller's eviction) nothing can run: Unschedulable
        settled = all_redecided_s is not None and _decided_after_all_down(b, after)
        if down_s >= args.down_seconds and (settled or down_s >= args.timeout):
            break
    _faults(b, "up")
    t1 = time.monotonic()
    try:
        wait_until(lambda: _converged(b), args.timeout, "convergence after the members return", interval=1.0)
        converged: float | None = round(time.monotonic() - t1, 1)
    except TimeoutError:
        converged = None
    window = rss[-int(args.flat_window):] if rss else []
    growth = round((window[-1] - window[0]) * 100 / window[0], 1) if len(window) > 1 and window[0] else None
    return {"redecisions": redecided, "redecisions_per_s": round(redecided / down_s, 1),
            "down_s": round(down_s, 1), "all_redecided_s": all_redecided_s, "phases_down": phases,
            "rss_mb": rss, "rss_growth_last_pct": growth, "converged_s": converged,
            "peak_rss_mb": round(proc_kb(pid, "VmHWM") / 1024, 1)}


def idle(b: Bench) -> dict[str, Any]:
    """What watching the fleet costs with nothing to do: every member Ready, ``--workloads`` placed,
    then the CPU each process uses over ``--seconds`` (health probes, resource summaries, network
    probes, work-status polls)."""
    wait_until(b.all_ready, b.args.timeout, "every member Ready", interval=1.0)
    if b.args.workloads and b.watch.copies() < b.args.workloads:
        b.steady(b.args.workloads)
    time.sleep(min(10.0, b.args.seconds))  # what the arrivals set off settles
    pids = b.pids()
    cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
    t0 = time.monotonic()
    time.sleep(b.args.seconds)
    elapsed = time.monotonic() - t0
    cpu = {k: round(cpu_seconds(pid) - cpu0[k], 1) for k, pid in pids.items()}
    return {"seconds": round(elapsed, 1), "cpu_s": cpu,
            "cores": {k: round(v / elapsed, 3) for k, v in cpu.items()},
            "rss_mb": {k: round(proc_kb(pid, "VmRSS") / 1024, 1) for k, pid in pids.items()}}


SCENARIOS: dict[str, Callable[[Bench], dict[str, Any]]] = {
    "cold-start": cold_start, "distribution": distribution, "storm": storm, "idle": idle, "sync": sync}


def scenarios(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    if "cold-start" in names[1:]:
        raise argparse.ArgumentTypeError("cold-start fills the store before the control plane starts: it comes first")
    return names


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written, and each option's default."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=_Help)
    ap.add_argument("--scenario", required=True, type=scenarios,
                    help=f"one of {', '.join(SCENARIOS)}, or several comma-separated, run in turn over one "
                         "fleet and control plane (one JSON line each)")
    ap.add_argument("--clusters", type=positive_int, default=3, help="simulated members (one `drods sim fleet`)")
    ap.add_argument("--nodes-per-cluster", type=positive_int, default=3)
    ap.add_argument("--max-pods", type=positive_int, default=1000, help="pods a simulated node holds")
    ap.add_argument("--workloads", type=positive_int, default=20, help="Deployments, each with a ConfigMap dependent")
    ap.add_argument("--store", choices=["sqlite", "etcd"], default="sqlite")
    ap.add_argument("--mode", choices=["push", "pull"], default="push")
    ap.add_argument("--processes", choices=["one", "split"], default="one",
                    help="the control plane as one `drods serve`, or `drods apiserver`, `drods scheduler` and "
                         "`drods controllers` apart over the same store")
    ap.add_argument("--rate", type=positive_float, default=5.0, help="distribution: creates + updates per second")
    ap.add_argument("--seconds", type=positive_float, default=5.0, help="distribution: how long the stream runs; "
                                                               "idle: how long CPU is measured")
    ap.add_argument("--stages", action="store_true", help="distribution: also the p50/p99 of each step (Binding, "
                    "scheduled, Work written, applied, in the member), from the control plane's watch streams")
    ap.add_argument("--trace", type=Path, default=None, help="distribution: one JSON line per operation "
                    "(at_s, op, name, ms) written to this file")
    ap.add_argument("--down-seconds", type=positive_float, default=20.0, help="storm: how long every member is down")
    ap.add_argument("--flat-window", type=positive_float, default=120.0, help="storm: RSS growth over this last window")
    ap.add_argument("--timeout", type=positive_float, default=600.0,
                    help="seconds a phase may take before it is reported as not reached (null figures)")
    ap.add_argument("--failure-detection", choices=list(FAILURE_DETECTION), default=None,
                    help="how soon a silent member is NotReady and its bindings moved: " + "; ".join(
                        f"`{name}`, {timings}" for name, (_, _, timings) in FAILURE_DETECTION.items())
                    + " (default: fast when storm is run, else default)")
    args = ap.parse_args(argv)
    if args.failure_detection is None:
        args.failure_detection = "fast" if "storm" in args.scenario else "default"
    print(f"# conditions: scenario {','.join(args.scenario)}, {args.clusters} members x {args.nodes_per_cluster} nodes "
          f"(one drods sim fleet), {args.workloads} Deployments + {args.workloads} ConfigMaps, "
          f"{'drods serve' if args.processes == 'one' else 'drods apiserver, scheduler and controllers apart'} on "
          f"{args.store}, {args.mode} mode, python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, failure detection "
          "{1}: {2}".format(*FAILURE_DETECTION[args.failure_detection]), flush=True)
    with ExitStack() as stack:
        bench = Bench(args, stack)
        for name in args.scenario:
            figures = SCENARIOS[name](bench)
            print(json.dumps({"scenario": name, "clusters": args.clusters, "workloads": args.workloads,
                              "store": args.store, "mode": args.mode, "processes": args.processes,
                              **figures}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
