"""A6 end to end: every single-active component survives losing its leader, on a 3-member etcd.

Two ``drods apiserver``, two ``drods scheduler`` and two ``drods controllers`` over one 3-member
etcd, three ``drods sim`` members. While workloads are applied through one API server, the leader
of each single-active component is SIGKILLed in turn — and started again under the same ``--id``,
whose old fence must not pass — and the other API server is killed too. Then:

* a standby took every lease over within 15 s;
* every workload is Scheduled and Running in the members with its full replica count;
* every Work records the leadership generation that wrote it, and every write of a Work happened
  while that generation held the lease (none by a deposed leader: the store refused them);
* no member holds a duplicate or an orphaned copy;
* the surviving API server answered every request of the stream without a 5xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drods.assembly import encrypted_store
from drods.model.annotations import LEADER_GENERATION
from drods.model.keys import lease_key
from drods.model.kinds import WORK
from drods.registry.secrets import load_or_create_key
from drods.security.envelope import KEYRING_FILE, Keyring
from drods.sim.harness import SimProcess
from drods.store.etcd import EtcdStore
from tests.etcd_server import EtcdCluster, etcd_binary
from tests.members_e2e.conftest import FAST, SPREAD_PROFILE, deploy_path, deployment, wait_for
from tests.server_process import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(420)]

SIMS = {
    "ha-dfw": ["--region", "us-east", "--provider", "aws", "--city", "DFW"],
    "ha-lhr": ["--region", "eu-west", "--provider", "azure", "--city", "LHR"],
    "ha-sin": ["--region", "ap-south", "--provider", "gcp", "--city", "SIN"],
}
MAX_WORKLOADS = 40
REPLICAS = 3
LEASE_TTL = "3"
SINGLE_ACTIVE = ("scheduler", "member-controllers", "resource-detector", "descheduler", "monitor-collectors",
                 "autoscaler", "steering", "service-directory", "migration", "cache-planner")


def _copy_keys(seed: Path, to: Path) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    for name in ("jwt.key", "encryption.key", KEYRING_FILE):
        shutil.copy2(seed / name, to / name)
    config = {"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration",
              "members": yaml.safe_load(FAST), "scheduler": {"profile": yaml.safe_load(SPREAD_PROFILE)}}
    (to / "drods.yaml").write_text(yaml.safe_dump(config))
    return to


@contextlib.contextmanager
def _fleet(root: Path) -> Iterator[dict[str, Any]]:
    if etcd_binary() is None:
        pytest.skip("etcd binary not found")
    with EtcdCluster(3, base_dir=str(root / "etcd")) as etcd:
        store = ["--store", "etcd://" + ",".join(etcd.endpoints)]
        seed = root / "seed"
        seed.mkdir()
        ServerProcess(seed).run_cli("token", "create", "--role", "admin", "--data-dir", str(seed))  # the JWT key
        load_or_create_key(seed / "encryption.key")  # every replica shares the keys and the keyring
        Keyring.load(seed)
        sims = {n: SimProcess(n, root / "sims", args).start() for n, args in SIMS.items()}
        procs: dict[str, ServerProcess] = {}
        for name, command, extra in (("api-a", "apiserver", []), ("api-b", "apiserver", []),
                                     ("sched-1", "scheduler", ["--id", "sched-1", "--lease-ttl", LEASE_TTL]),
                                     ("sched-2", "scheduler", ["--id", "sched-2", "--lease-ttl", LEASE_TTL]),
                                     ("ctrl-1", "controllers", ["--id", "ctrl-1", "--lease-ttl", LEASE_TTL]),
                                     ("ctrl-2", "controllers", ["--id", "ctrl-2", "--lease-ttl", LEASE_TTL])):
            procs[name] = ServerProcess(_copy_keys(seed, root / name), command=command, args=[*store, *extra])
        try:
            for p in procs.values():
                p.start()
            for s in sims.values():
                s.wait_ready(60)
            yield {"etcd": etcd, "procs": procs, "sims": sims}
        finally:
            for p in procs.values():
                p.kill()
            for s in sims.values():
                s.stop()


def _holder(etcd: EtcdCluster, lease: str) -> tuple[str | None, int]:
    async def read() -> tuple[str | None, int]:
        store = EtcdStore(etcd.endpoints)
        try:
            kv = await store.get(lease_key(lease))
            return (kv.value.decode(), kv.mod_revision) if kv is not None else (None, 0)
        finally:
            await store.close()

    return asyncio.run(read())


def _history(etcd: EtcdCluster, lease: str, keys: Path) -> tuple[dict[int, float], list[tuple[int, int | None]]]:
    """From the store's whole history (a marker written now bounds it):

    * every generation of ``lease`` (the revision it was won at) → the revision it ended at;
    * (revision, generation annotation) of every write of a Work's spec or metadata (status writes of
      the execution and work-status controllers leave the writer's stamp as it was)."""
    async def replay() -> tuple[dict[int, float], list[tuple[int, int | None]]]:
        store = encrypted_store(EtcdStore(etcd.endpoints), keys)  # Works are encrypted at rest
        try:
            tenures: dict[int, float] = {}
            current = 0
            writes: list[tuple[int, int | None]] = []
            last: dict[str, Any] = {}
            await store.put("/ha-test/marker", b"end")
            async for ev in store.watch("/", start_revision=1):
                key = ev.kv.key
                if key == "/ha-test/marker":
                    break
                if key == lease_key(lease):
                    if ev.type.value == "PUT" and ev.kv.mod_revision != current and ev.kv.create_revision == \
                            ev.kv.mod_revision:
                        if current:
                            tenures[current] = ev.kv.mod_revision
                        current = ev.kv.mod_revision
                        tenures[current] = float("inf")
                    elif ev.type.value == "DELETE" and current:
                        tenures[current] = ev.kv.mod_revision
                        current = 0
                if ev.type.value != "PUT" or not key.startswith(WORK.key_prefix()):
                    continue
                obj = json.loads(ev.kv.value)
                meta = obj.get("metadata") or {}
                written = (obj.get("spec"), meta.get("annotations"), meta.get("labels"))
                if last.get(key) == written:
                    continue
                last[key] = written
                gen = (meta.get("annotations") or {}).get(LEADER_GENERATION)
                writes.append((ev.kv.mod_revision, int(gen) if gen is not None else None))
            return tenures, writes
        finally:
            await store.close()

    return asyncio.run(replay())


def test_leaders_die_and_nothing_is_lost(tmp_path: Path) -> None:
    with _fleet(tmp_path) as fleet:
        etcd: EtcdCluster = fleet["etcd"]
        procs: dict[str, ServerProcess] = fleet["procs"]
        sims: dict[str, SimProcess] = fleet["sims"]
        api_a, api_b = procs["api-a"], procs["api-b"]
        for n, s in sims.items():
            done = api_a.run_cli("cluster", "join", n, "--kubeconfig", str(s.kubeconfig), "--server", api_a.url,
                                 "--token", api_a.token("admin"))
            assert done.returncode == 0, done.stderr
        for lease in SINGLE_ACTIVE:
            wait_for(lambda lease=lease: _holder(etcd, lease)[0], 30, f"a leader of {lease}")  # type: ignore[misc]

        statuses: list[int] = []
        stop = threading.Event()
        with api_b.client(timeout=10) as http:
            def ready(name: str) -> bool:
                body = http.get(f"/apis/multicluster.io/v1alpha1/clusters/{name}").json()
                return any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (body.get("status") or {}).get("conditions") or [])

            wait_for(lambda: all(ready(n) for n in sims), 30, "every member Ready")
            policy = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy",
                      "metadata": {"name": "ha-all"},
                      "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                               "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                   "replicaDivisionPreference": "Weighted"}}}}
            r = http.post("/apis/multicluster.io/v1alpha1/propagationpolicies", json=policy)
            assert r.status_code == 201, r.text

            created: list[int] = []

            def stream() -> None:
                """Apply workloads one by one through the surviving API server, reading between."""
                for i in range(MAX_WORKLOADS):
                    if stop.is_set():
                        return
                    r = http.post(deploy_path(), json=deployment(f"ha-{i}", REPLICAS, cpu="100m", memory="64Mi"))
                    statuses.append(r.status_code)
                    if r.status_code == 201:
                        created.append(i)
                    statuses.append(http.get("/apis/multicluster.io/v1alpha1/bindings").status_code)
                    time.sleep(0.5)

            writer = threading.Thread(target=stream)
            writer.start()
            takeovers: dict[str, float] = {}
            try:
                for lease in SINGLE_ACTIVE:
                    leader, _ = _holder(etcd, lease)
                    assert leader in procs, (lease, leader)
                    victim = procs[leader]
                    killed_at = time.monotonic()
                    victim.kill()
                    wait_for(lambda lease=lease, leader=leader: _holder(etcd, lease)[0] not in (None, leader),
                             15, f"a standby to take {lease} over")
                    takeovers[lease] = time.monotonic() - killed_at
                    victim.start()  # the same --id again: a new term, a new fence
                api_a.kill()  # clients of the surviving API server must not notice
            finally:
                stop.set()
                writer.join(timeout=60)
            assert all(t <= 15 for t in takeovers.values()), takeovers
            assert len(created) >= 5, created

            # Every workload ends Scheduled with its full count and Running in the members.
            members = {n: k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False)
                       for n, s in sims.items()}

            def copies(i: int) -> dict[str, int]:
                out: dict[str, int] = {}
                for n, api in members.items():
                    with contextlib.suppress(k8s.exceptions.ApiException):
                        d = k8s.AppsV1Api(api).read_namespaced_deployment(f"ha-{i}", "default", _request_timeout=3)
                        if (d.status.ready_replicas or 0) == d.spec.replicas:
                            out[n] = int(d.spec.replicas)
                return out

            def settled() -> bool:
                for i in created:
                    b = http.get(f"/apis/multicluster.io/v1alpha1/bindings/deployment-default-ha-{i}")
                    if b.status_code != 200:
                        return False
                    st = b.json().get("status") or {}
                    placed = {p["cluster"]: p["replicas"] for p in st.get("placement") or [] if p["replicas"]}
                    if st.get("phase") != "Running" or sum(placed.values()) != REPLICAS or copies(i) != placed:
                        return False
                return True

            wait_for(settled, 120, "every workload Scheduled and Running with its full count")
            assert statuses and not [s for s in statuses if s >= 500], statuses

            # No duplicate or orphan in any member: each managed copy is one a placement asks for.
            for n, api in members.items():
                for d in k8s.AppsV1Api(api).list_namespaced_deployment("default").items:
                    assert d.metadata.name.startswith("ha-"), d.metadata.name
                    i = int(d.metadata.name.split("-")[1])
                    b = http.get(f"/apis/multicluster.io/v1alpha1/bindings/deployment-default-ha-{i}").json()
                    assert n in {p["cluster"] for p in b["status"]["placement"] if p["replicas"]}, (n, d.metadata.name)

        # Fencing: each Work write carries a generation that held the lease at that revision.
        tenures, writes = _history(etcd, "member-controllers", tmp_path / "seed")
        assert len(tenures) >= 2, tenures  # the leader changed at least once
        assert writes
        for rev, gen in writes:
            assert gen is not None and gen in tenures, (rev, gen, tenures)
            assert gen <= rev < tenures[gen], f"Work written at {rev} by generation {gen} after it ended"
