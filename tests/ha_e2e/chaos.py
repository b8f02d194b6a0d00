"""A kill campaign (A6, SEC4): SIGKILL one process at a random instant, round after round, while
workloads are created, scaled and deleted through two API servers; after each round check that
nothing acknowledged was lost and that the members converge to exactly what the Works say.

The fleet: a 3-member etcd, ``drods apiserver`` ×2, ``drods scheduler``, ``drods controllers`` (one of
each single-active component, so every kill of one is a real outage and a restart under the same
``--id``) and three ``drods sim`` members joined in push mode. Process kinds killed: ``apiserver``
(either of the two), ``scheduler``, ``controllers`` and ``etcd`` (any member, raft leader included).

One round:

1. a writer thread keeps creating Deployments (1–4 replicas), scaling them (merge patch) and deleting
   them, each request to either API server at random; a 2xx is an acknowledged write and recorded;
   a request that got no answer (connection refused or reset, timeout) or a 5xx is *uncertain*;
2. at a random instant the victim is SIGKILLed, restarted after a random pause, and waited for;
3. the writer stops; the round's checks poll until everything holds or ``converge_timeout``:
   * every acknowledged write is what the API serves now (a created or scaled Deployment has the
     acknowledged replica count, a deleted one is gone or going) — else a *lost write*;
   * every live Deployment has exactly one Binding whose placement adds up to its replicas;
   * each (binding, cluster) of a placement has exactly one Work, no Work exists without its
     placement (an *orphan*), no two Works or Bindings for one pair or workload (a *duplicate*);
   * every member holds exactly the managed Deployments its Works name, with the Works' replicas
     (a copy without a Work is an orphan too).
   The time from the writer's stop until all of it holds is the round's convergence time.

Uncertain writes are not counted either way: the API's answer after the round is their truth. The
campaign is seeded (victims, instants, operations); process timing on a shared machine is not.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drods.registry.secrets import load_or_create_key
from drods.security.envelope import KEYRING_FILE, Keyring
from drods.sim.harness import SimProcess
from tests.etcd_server import EtcdCluster
from tests.server_process import ServerProcess

KINDS = ("apiserver", "scheduler", "controllers", "etcd")
SIMS = {
    "chaos-dfw": ["--region", "us-east", "--provider", "aws", "--city", "DFW"],
    "chaos-lhr": ["--region", "eu-west", "--provider", "azure", "--city", "LHR"],
    "chaos-sin": ["--region", "ap-south", "--provider", "gcp", "--city", "SIN"],
}
FAST_MEMBERS = {"probeIntervalSeconds": 0.5, "summaryIntervalSeconds": 2, "notReadyGraceSeconds": 30,
                "tolerationSeconds": 300, "statusPollSeconds": 0.5, "heartbeatWriteSeconds": 5,
                "cleanupIntervalSeconds": 1, "connectTimeoutSeconds": 1, "readTimeoutSeconds": 1.5, "retries": 0}
SPREAD_PROFILE = {"name": "spread", "adjuster": {"packBelow": 0.0, "spreadAbove": 0.0}}
GROUP = "/apis/multicluster.io/v1alpha1"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
PREFIX = "chaos-"
MANAGED = "multicluster.io/managed-by=drods"
BINDING_LABEL = "multicluster.io/binding"
START_TIMEOUT = 90.0  # a (re)start under the load of a shared machine: the import alone can take 30 s


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.25",
                                                           "resources": {"requests": {"cpu": "50m",
                                                                                      "memory": "32Mi"}}}]}}}}


POLICY = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "chaos-all"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                   "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                       "replicaDivisionPreference": "Weighted"}}}}


@dataclass
class Fleet:
    etcd: EtcdCluster
    procs: dict[str, ServerProcess]
    sims: dict[str, SimProcess]
    members: dict[str, k8s.ApiClient] = field(default_factory=dict)

    def victims(self, kind: str) -> list[str]:
        if kind == "etcd":
            return [m.name for m in self.etcd.members]
        return [n for n, p in self.procs.items() if p.command == kind]

    def kill(self, kind: str, name: str) -> None:
        if kind == "etcd":
            next(m for m in self.etcd.members if m.name == name).kill()
        else:
            self.procs[name].kill()

    def restart(self, kind: str, name: str, timeout: float = 60.0) -> None:
        if kind == "etcd":
            member = next(m for m in self.etcd.members if m.name == name)
            initial = ",".join(f"{m.name}={m.peer_url}" for m in self.etcd.members)
            member.start(self.etcd.binary, initial, self.etcd.token)
            deadline = time.monotonic() + timeout
            while not member.healthy():
                if time.monotonic() > deadline or not member.alive():
                    raise RuntimeError(f"etcd {name} did not come back:\n{member.log_tail()}")
                time.sleep(0.05)
        else:
            self.procs[name].start()

    def api_names(self) -> list[str]:
        return self.victims("apiserver")


def _data_dir(seed: Path, to: Path) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    for name in ("jwt.key", "encryption.key", KEYRING_FILE):
        shutil.copy2(seed / name, to / name)
    config = {"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration",
              "members": FAST_MEMBERS, "scheduler": {"profile": SPREAD_PROFILE}}
    (to / "drods.yaml").write_text(yaml.safe_dump(config))
    return to


@contextlib.contextmanager
def fleet(root: Path, lease_ttl: int = 3) -> Iterator[Fleet]:
    """Start everything, join the sims, create the PropagationPolicy; stop everything at the end."""
    with EtcdCluster(3, base_dir=str(root / "etcd")) as etcd:
        store = ["--store", "etcd://" + ",".join(etcd.endpoints)]
        seed = root / "seed"
        seed.mkdir(parents=True, exist_ok=True)
        ServerProcess(seed).run_cli("token", "create", "--role", "admin", "--data-dir", str(seed))  # the JWT key
        load_or_create_key(seed / "encryption.key")
        Keyring.load(seed)
        sims = {n: SimProcess(n, root / "sims", args).start() for n, args in SIMS.items()}
        ttl = ["--lease-ttl", str(lease_ttl)]
        procs = {name: ServerProcess(_data_dir(seed, root / name), command=command, args=[*store, *extra],
                                   start_timeout=START_TIMEOUT)
                 for name, command, extra in (("api-a", "apiserver", []), ("api-b", "apiserver", []),
                                              ("sched", "scheduler", ["--id", "sched", *ttl]),
                                              ("ctrl", "controllers", ["--id", "ctrl", *ttl]))}
        try:
            for p in procs.values():
                p.start()
            for s in sims.values():
                s.wait_ready(60)
            api = procs["api-a"]
            for n, s in sims.items():
                done = api.run_cli("cluster", "join", n, "--kubeconfig", str(s.kubeconfig), "--server", api.url,
                                   "--token", api.token("admin"))
                if done.returncode != 0:
                    raise RuntimeError(done.stderr)
            f = Fleet(etcd, procs, sims,
                      {n: k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False)
                       for n, s in sims.items()})
            with api.client(timeout=10) as http:
                def ready() -> bool:
                    for n in sims:
                        st = http.get(f"{GROUP}/clusters/{n}").json().get("status") or {}
                        if not any(c.get("type") == "Ready" and c.get("status") == "True"
                                   for c in st.get("conditions") or []):
                            return False
                    return True

                _wait(ready, 60, "every member Ready")
                r = http.post(f"{GROUP}/propagationpolicies", json=POLICY)
                if r.status_code != 201:
                    raise RuntimeError(r.text)
            yield f
        finally:
            for p in procs.values():
                p.kill()
            for s in sims.values():
                s.stop()


def _wait(fn: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.2)


class Writer:
    """Creates, scales and deletes Deployments through the API servers; records what was acknowledged."""

    def __init__(self, fl: Fleet, rng: random.Random, live_target: int = 8) -> None:
        self.fl = fl
        self.rng = rng
        self.live_target = live_target
        self.expected: dict[str, int | None] = {}  # acknowledged: replicas, or None = deleted
        self.uncertain: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.next_id = 0
        self.clients: dict[str, httpx.Client] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def client(self, name: str) -> httpx.Client:
        proc = self.fl.procs[name]
        if name not in self.clients or self.clients[name].base_url != httpx.URL(proc.url):
            self.clients[name] = proc.client(timeout=5)  # (a restart may have moved it to another port)
        return self.clients[name]

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(0.05)

    def live(self) -> list[str]:
        return sorted(n for n, r in self.expected.items() if r is not None and n not in self.uncertain)

    def step(self) -> None:
        rng = self.rng
        live = self.live()
        roll = rng.random()
        if not live or (len(live) < self.live_target and roll < 0.5):
            name, replicas = f"{PREFIX}{self.next_id}", rng.randint(1, 4)
            self.next_id += 1
            self._send("create", name, replicas, "POST", DEPLOYMENTS, json=_deployment(name, replicas))
        elif roll < 0.8:
            name, replicas = rng.choice(live), rng.randint(1, 5)
            self._send("scale", name, replicas, "PATCH", f"{DEPLOYMENTS}/{name}",
                       content=json.dumps({"spec": {"replicas": replicas}}).encode(),
                       headers={"Content-Type": "application/merge-patch+json"})
        else:
            name = rng.choice(live)
            self._send("delete", name, None, "DELETE", f"{DEPLOYMENTS}/{name}")

    def _send(self, op: str, name: str, value: int | None, method: str, path: str, **kw: Any) -> None:
        api = self.rng.choice(self.fl.api_names())
        try:
            r = self.client(api).request(method, path, **kw)
        except httpx.HTTPError:
            self.counts["no_answer"] += 1
            self.uncertain.add(name)
            return
        self.counts[f"{op}_{r.status_code}"] += 1
        if r.status_code >= 500:
            self.counts["status_5xx"] += 1
            self.uncertain.add(name)
        elif r.status_code < 300:
            self.counts["acknowledged"] += 1
            self.expected[name] = value
        # a refusal (4xx) changes nothing: the expectation stays as it was

    def resolve(self, http: httpx.Client) -> None:
        """Uncertain writes: whatever the API serves is their outcome."""
        for name in sorted(self.uncertain):
            r = http.get(f"{DEPLOYMENTS}/{name}")
            if r.status_code == 404:
                self.expected[name] = None
            elif r.status_code == 200:
                obj = r.json()
                deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
                self.expected[name] = None if deleting else int(obj["spec"].get("replicas", 1))
            else:
                continue  # still unknown: ask again next round
            self.uncertain.discard(name)

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # not converged yet (binding, works, member copies)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.orphans or self.duplicates or self.pending)


def _list(http: httpx.Client, path: str) -> list[dict[str, Any]]:
    r = http.get(path)
    r.raise_for_status()
    return list(r.json().get("items") or [])


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def check(fl: Fleet, writer: Writer, http: httpx.Client) -> Verdict:
    """One look at the API and the members (see the module docstring for what each list means)."""
    v = Verdict()
    deployments = {d["metadata"]["name"]: d for d in _list(http, DEPLOYMENTS)
                   if d["metadata"]["name"].startswith(PREFIX)}
    live = {n: _replicas(d) for n, d in deployments.items() if not d["metadata"].get("deletionTimestamp")}
    for name, want in writer.expected.items():
        if name in writer.uncertain:
            continue
        if want is None and name in live:
            v.lost.append(f"{name}: deleted (acknowledged) but served with {live[name]} replicas")
        elif want is not None and live.get(name) != want:
            v.lost.append(f"{name}: {want} replicas acknowledged, served: {live.get(name)}")
    bindings = [b for b in _list(http, f"{GROUP}/bindings")
                if ((b.get("spec") or {}).get("resource") or {}).get("name", "").startswith(PREFIX)]
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for b in bindings:
        by_workload.setdefault(b["spec"]["resource"]["name"], []).append(b)
    wanted: dict[tuple[str, str], int] = {}  # (binding, cluster) -> replicas
    for name, bs in by_workload.items():
        if len(bs) > 1:
            v.duplicates.append(f"{name}: {len(bs)} Bindings")
    for name, replicas in live.items():
        bs = by_workload.get(name) or []
        if not bs:
            v.pending.append(f"{name}: no Binding")
            continue
        b = bs[0]
        st = b.get("status") or {}
        placed = {p["cluster"]: int(p.get("replicas") or 0) for p in st.get("placement") or []}
        placed = {c: n for c, n in placed.items() if n}
        if sum(placed.values()) != replicas or _replicas(b) != replicas:
            v.pending.append(f"{name}: placement {placed} for {replicas} replicas (Binding: spec.replicas "
                             f"{_replicas(b)}, generation {b['metadata'].get('generation')}, phase "
                             f"{st.get('phase')}, scheduledGeneration {st.get('scheduledGeneration')}, message "
                             f"{st.get('message')!r})")
        for c, n in placed.items():
            wanted[(b["metadata"]["name"], c)] = n
    works = [w for w in _list(http, f"{GROUP}/works")
             if ((w.get("metadata") or {}).get("labels") or {}).get(BINDING_LABEL, "").startswith("deployment-default-"
                                                                                                    + PREFIX)]
    pairs = Counter((w["spec"]["binding"], w["spec"]["cluster"]) for w in works
                    if not w["metadata"].get("deletionTimestamp"))
    work_replicas: dict[tuple[str, str], int] = {}
    for w in works:
        key = (w["spec"]["binding"], w["spec"]["cluster"])
        if w["metadata"].get("deletionTimestamp"):
            if key in wanted:
                v.pending.append(f"Work {key} is being deleted but placed")
            else:
                v.pending.append(f"Work {key} still being deleted")
            continue
        if key not in wanted:
            v.orphans.append(f"Work {key} without its placement")
            continue
        deps = [m for m in w["spec"].get("manifests") or [] if m.get("kind") == "Deployment"]
        work_replicas[key] = _replicas(deps[0]) if deps else -1
        if work_replicas[key] != wanted[key]:
            v.pending.append(f"Work {key}: {work_replicas[key]} replicas, placement {wanted[key]}")
    v.duplicates += [f"{n} Works for {key}" for key, n in pairs.items() if n > 1]
    v.pending += [f"no Work for {key}" for key in wanted if key not in pairs]
    for cluster, api in fl.members.items():
        held = {d.metadata.name: int(d.spec.replicas or 0)
                for d in k8s.AppsV1Api(api).list_namespaced_deployment(
                    "default", label_selector=MANAGED, _request_timeout=5).items}
        for name, n in held.items():
            key = (f"deployment-default-{name}", cluster)
            if key not in work_replicas:
                v.orphans.append(f"{cluster} holds {name} ({n}) without a Work")
            elif work_replicas[key] != n:
                v.pending.append(f"{cluster} holds {name} with {n} replicas, its Work says {work_replicas[key]}")
        for (binding, c), n in work_replicas.items():
            if c == cluster and binding.removeprefix("deployment-default-") not in held:
                v.pending.append(f"{cluster} lacks {binding} ({n}) its Work names")
    return v


@dataclass
class Result:
    kills: Counter[str] = field(default_factory=Counter)
    converge_s: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unconverged: list[str] = field(default_factory=list)
    restart_s: dict[str, list[float]] = field(default_factory=dict)
    rounds: int = 0

    def summary(self, writer: Writer, elapsed: float) -> dict[str, Any]:
        cs = sorted(self.converge_s)

        def pct(p: float) -> float | None:
            return round(cs[min(len(cs) - 1, int(p * len(cs)))], 2) if cs else None

        return {"kills": sum(self.kills.values()), "kills_by_kind": dict(sorted(self.kills.items())),
                "rounds": self.rounds, "lost_writes": len(self.lost), "orphans": len(self.orphans),
                "duplicates": len(self.duplicates), "unconverged_rounds": len(self.unconverged),
                "converge_s_p50": pct(0.5), "converge_s_p99": pct(0.99), "converge_s_max": cs[-1] if cs else None,
                "converge_s_mean": round(statistics.fmean(cs), 2) if cs else None,
                "restart_s_p50": {k: round(statistics.median(v), 2) for k, v in sorted(self.restart_s.items())},
                "acknowledged_writes": writer.counts["acknowledged"], "uncertain_writes": writer.counts["no_answer"]
                + writer.counts["status_5xx"], "status_5xx": writer.counts["status_5xx"],
                "workloads_created": writer.next_id, "elapsed_s": round(elapsed, 1)}


def campaign(fl: Fleet, *, kills_per_kind: int, seed: int, time_limit: float, converge_timeout: float = 90.0,
             kinds: tuple[str, ...] = KINDS, log: Callable[[str], None] = print) -> tuple[Result, Writer]:
    """Run the rounds (one kill each, kinds shuffled) until done or ``time_limit`` seconds have passed."""
    rng = random.Random(seed)
    schedule = [k for k in kinds for _ in range(kills_per_kind)]
    rng.shuffle(schedule)
    writer = Writer(fl, random.Random(seed + 1))
    res = Result()
    started = time.monotonic()
    checker = fl.procs["api-a"].client(timeout=10)
    try:
        for i, kind in enumerate(schedule):
            if time.monotonic() - started > time_limit:
                log(f"time limit reached after {i} rounds")
                break
            victim = rng.choice(fl.victims(kind))
            writer.start()
            time.sleep(rng.uniform(0.2, 2.5))  # the random instant: writes are in flight
            fl.kill(kind, victim)
            res.kills[kind] += 1
            time.sleep(rng.uniform(0.0, 1.5))
            t0 = time.monotonic()
            fl.restart(kind, victim)
            res.restart_s.setdefault(kind, []).append(time.monotonic() - t0)
            time.sleep(rng.uniform(0.0, 1.0))
            writer.stop()
            res.rounds += 1
            quiet = time.monotonic()
            checker = _checker(fl, checker)
            verdict = Verdict(pending=["not looked yet"])
            while time.monotonic() - quiet < converge_timeout:
                try:
                    writer.resolve(checker)
                    verdict = check(fl, writer, checker)
                except (httpx.HTTPError, k8s.exceptions.ApiException, OSError) as e:
                    verdict = Verdict(pending=[f"check failed: {e}"])
                if verdict.ok:
                    break
                time.sleep(0.25)
            took = time.monotonic() - quiet
            if verdict.ok:
                res.converge_s.append(took)
            else:
                res.unconverged.append(f"round {i}: {verdict.pending[:3]}")
                res.lost += verdict.lost
                res.orphans += verdict.orphans
                res.duplicates += verdict.duplicates
            log(f"round {i + 1}/{len(schedule)}: killed {kind} {victim}; "
                + (f"converged in {took:.1f}s" if verdict.ok else
                   f"NOT converged in {took:.0f}s: lost {verdict.lost[:3]} orphans {verdict.orphans[:3]} "
                   f"duplicates {verdict.duplicates[:3]} pending {verdict.pending[:3]}")
                + f" (live {len(writer.live())}, acknowledged so far {writer.counts['acknowledged']})")
    finally:
        writer.stop()
        writer.close()
        checker.close()
    return res, writer


def _checker(fl: Fleet, current: httpx.Client) -> httpx.Client:
    """A client of an API server that answers (either may have been restarted on a new port)."""
    for name in fl.api_names():
        with contextlib.suppress(httpx.HTTPError):
            if current.base_url == httpx.URL(fl.procs[name].url) and current.get("/readyz").status_code == 200:
                return current
    current.close()
    return fl.procs["api-a"].client(timeout=10)
