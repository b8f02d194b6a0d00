"""F3 end to end: MigrationPlans moving a StatefulSet between two ``drods sim`` members, with the
control plane as three processes over one etcd — ``drods apiserver``, ``drods scheduler`` and
``drods controllers`` (which runs the migration controller) — so the controllers can be SIGKILLed
cheaply while a plan runs.

* drain: ``drods cluster drain`` of the cluster a StatefulSet with a declared hook runs on starts a
  MigrationPlan; the controllers process is SIGKILLed (and started again) as soon as each new phase
  shows, and the plan still ends Succeeded: every phase's condition True, the copy hook run once in
  the target (one Job, one pod), the data moved, the source emptied — and at every poll of the
  members the StatefulSet had ready replicas;
* rollback: ``drods migrate`` of a StatefulSet whose copy hook fails (the sim fails the Job by its
  ``sim.drods.io/exit-code`` annotation) ends RolledBack with the source serving as before and no
  copy left in the target;
* ``kubectl get migrationplans`` prints workload, from, to and phase.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import config as k8s_config

from drods.model.annotations import MIGRATED_FROM, MIGRATION_HOOK, PINNED_PLACEMENT, TRAFFIC_WITHDRAWN
from drods.registry.secrets import load_or_create_key
from drods.security.envelope import KEYRING_FILE, Keyring
from drods.sim.harness import SimProcess
from tests.etcd_server import EtcdCluster, etcd_binary
from tests.members_e2e.conftest import FAST, Member, wait_for
from tests.server_process import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(240)]

SIMS = {"mig-dfw": ["--region", "us-east", "--provider", "aws", "--city", "DFW"],
        "mig-lhr": ["--region", "eu-west", "--provider", "azure", "--city", "LHR"],
        "mig-sin": ["--region", "ap-southeast", "--provider", "gcp", "--city", "SIN"]}
NS = "shop"
PLANS = f"/apis/multicluster.io/v1alpha1/namespaces/{NS}/migrationplans"
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"
START = 90.0  # seconds a process may take to come up on a loaded machine
FORWARD = ("PrepareTarget", "CopyData", "CatchUp", "SwitchTraffic", "RetireSource")
BANDWIDTH_MBPS = 80  # the sims' volume copy: 10 MB/s


def _copy_keys(seed: Path, to: Path) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    for name in ("jwt.key", "encryption.key", KEYRING_FILE):
        shutil.copy2(seed / name, to / name)
    config = {"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration", "members": yaml.safe_load(FAST),
              "datasets": {"intervalSeconds": 1}}  # the cache planner looks at approved plans every second
    (to / "drods.yaml").write_text(yaml.safe_dump(config))
    return to


@dataclass
class Fleet:
    api: ServerProcess
    controllers: ServerProcess
    http: httpx.Client
    members: dict[str, Member]
    kubeconfig: Path

    def plan(self, name: str) -> dict[str, Any]:
        return dict(self.http.get(f"{PLANS}/{name}").json())

    def binding(self, name: str) -> dict[str, Any]:
        r = self.http.get(f"{BINDINGS}/{name}")
        return dict(r.json()) if r.status_code == 200 else {}

    def ready_in_members(self, sts: str) -> dict[str, int]:
        out = {}
        for n, m in self.members.items():
            obj = m.get(f"/apis/apps/v1/namespaces/{NS}/statefulsets/{sts}")
            if obj is not None:
                out[n] = int((obj.get("status") or {}).get("readyReplicas") or 0)
        return out

    def restart_controllers(self) -> None:
        self.controllers.kill()  # SIGKILL
        self.controllers.start()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if etcd_binary() is None:
        pytest.skip("etcd binary not found")
    root = tmp_path_factory.mktemp("migration-e2e")
    with EtcdCluster(1, base_dir=str(root / "etcd")) as etcd:
        store = ["--store", "etcd://" + ",".join(etcd.endpoints)]
        seed = root / "seed"
        seed.mkdir()
        ServerProcess(seed).run_cli("token", "create", "--role", "admin", "--data-dir", str(seed))
        load_or_create_key(seed / "encryption.key")
        Keyring.load(seed)
        sim_args = ["--job-seconds", "1", "--volume-bandwidth-mbps", str(BANDWIDTH_MBPS)]
        sims = {n: SimProcess(n, root / "sims", [*args, *sim_args]).start() for n, args in SIMS.items()}
        api = ServerProcess(_copy_keys(seed, root / "api"), command="apiserver", args=store, start_timeout=START)
        procs = [api, ServerProcess(_copy_keys(seed, root / "sched"), command="scheduler",
                                    args=[*store, "--id", "sched", "--lease-ttl", "2"], start_timeout=START),
                 ServerProcess(_copy_keys(seed, root / "ctrl"), command="controllers",
                               args=[*store, "--id", "ctrl", "--lease-ttl", "2"], start_timeout=START)]
        try:
            with ThreadPoolExecutor(len(procs) + len(sims)) as pool:  # start everything at once
                started = [pool.submit(p.start) for p in procs] + [pool.submit(s.wait_ready, START)
                                                                   for s in sims.values()]
                for fut in started:
                    fut.result()
                joins = [pool.submit(api.run_cli, "cluster", "join", n, "--kubeconfig", str(s.kubeconfig),
                                     "--server", api.url, "--token", api.token("admin")) for n, s in sims.items()]
                for fut in joins:
                    assert fut.result().returncode == 0, fut.result().stderr
            members = {n: Member(n, s, k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False))
                       for n, s in sims.items()}
            with api.client(timeout=10) as http:
                f = Fleet(api, procs[2], http, members, api.kubeconfig(root / "kubeconfig"))

                def all_ready() -> bool:
                    for n in sims:
                        conds = (http.get(f"/apis/multicluster.io/v1alpha1/clusters/{n}").json().get("status")
                                 or {}).get("conditions") or []
                        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                            return False
                    return True

                wait_for(all_ready, 30, "the members Ready")
                r = http.post("/apis/multicluster.io/v1alpha1/propagationpolicies", json={
                    "apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy",
                    "metadata": {"name": "stateful"},
                    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": NS}],
                             "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                 "replicaDivisionPreference": "Aggregated"}}}})
                assert r.status_code == 201, r.text
                yield f
        finally:
            for p in procs:
                p.kill()
            for s in sims.values():
                s.stop()


@pytest.fixture(autouse=True)
def schedulable(fleet: Fleet) -> Iterator[None]:
    """Each test starts with every member schedulable, whatever a drain before it left behind."""
    yield
    for name in fleet.members:
        fleet.http.patch(f"/apis/multicluster.io/v1alpha1/clusters/{name}", json={"spec": {"unschedulable": False}},
                         headers={"content-type": "application/merge-patch+json"})


def statefulset(name: str, replicas: int, hook: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if hook is not None:
        meta["annotations"] = {MIGRATION_HOOK: json.dumps(hook)}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "db", "image": "postgres:16",
                                                           "resources": {"requests": {"cpu": "100m",
                                                                                      "memory": "128Mi"}}}]}},
                     **extra}}


def hook(exit_code: int = 0) -> dict[str, Any]:
    """A copy Job (jobTemplate form); the sim runs its pod for 1 s and exits with ``exit_code``."""
    return {"runOn": "Target", "catchUp": "Wait", "catchUpWaitSeconds": 1,
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {
        "metadata": {"annotations": {"sim.drods.io/run-seconds": "1", "sim.drods.io/exit-code": str(exit_code)}},
        "spec": {"containers": [{"name": "copy", "image": "postgres:16",
                                 "command": ["sh", "-c", "pg_basebackup -h $MIGRATION_SOURCE_CLUSTER"]}]}}}}}


def deploy(fleet: Fleet, name: str, replicas: int, h: dict[str, Any] | None,
           body: dict[str, Any] | None = None) -> tuple[str, str]:
    r = fleet.http.post(f"/apis/apps/v1/namespaces/{NS}/statefulsets", json=body or statefulset(name, replicas, h))
    assert r.status_code == 201, r.text
    bname = f"statefulset-{NS}-{name}"

    def running() -> str | None:
        r = fleet.http.get(f"{BINDINGS}/{bname}")
        st = r.json().get("status") or {} if r.status_code == 200 else {}
        placed = [t["cluster"] for t in st.get("placement") or []]
        return placed[0] if st.get("phase") == "Running" and len(placed) == 1 else None

    source = wait_for(running, 30, f"{name} Running on one cluster")
    target = next(n for n in fleet.members if n != source)
    assert fleet.ready_in_members(name) == {source: replicas}
    return source, target


def _kill_on_each_phase(fleet: Fleet, plan: str, seen: list[str], stop: threading.Event) -> None:
    """Watch the plan; the moment a new phase is recorded, SIGKILL the controllers and start them again
    (the phase before it is then over and this one has just begun: the kill falls between the two)."""
    with fleet.api.client(timeout=httpx.Timeout(10, read=None)) as http:
        while not stop.is_set():
            try:
                with http.stream("GET", f"{PLANS}?watch=true&fieldSelector=metadata.name%3D{plan}") as resp:
                    for line in resp.iter_lines():
                        if stop.is_set():
                            return
                        if not line.strip():
                            continue
                        obj = json.loads(line).get("object") or {}
                        phase = str((obj.get("status") or {}).get("phase") or "")
                        if phase in FORWARD and phase not in seen:
                            seen.append(phase)
                            if phase != "PrepareTarget":
                                fleet.restart_controllers()
                        if phase in ("Succeeded", "RolledBack", "Failed"):
                            return
            except httpx.HTTPError:
                time.sleep(0.1)


def test_drain_migrates_with_a_kill_between_every_phase(fleet: Fleet) -> None:
    source, _ = deploy(fleet, "orders", 2, hook())
    done = fleet.api.run_cli("cluster", "drain", source, "--server", fleet.api.url, "--token", fleet.api.token())
    assert done.returncode == 0, done.stderr
    assert "1 migration plan(s) started" in done.stdout, done.stdout
    plan_name = done.stdout.strip().rsplit(f"{NS}/", 1)[1].strip()
    seen: list[str] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_on_each_phase, args=(fleet, plan_name, seen, stop), daemon=True)
    killer.start()
    job_uids: set[str] = set()
    polls = 0
    deadline = time.monotonic() + 150
    phase = ""
    try:
        while phase not in ("Succeeded", "RolledBack", "Failed"):
            assert time.monotonic() < deadline, f"plan stuck in {phase}: {fleet.plan(plan_name).get('status')}"
            ready = fleet.ready_in_members("orders")
            polls += 1
            assert sum(ready.values()) > 0, f"no ready replica at poll {polls} in phase {phase}: {ready}"
            for m in fleet.members.values():  # the scheduler picks the target among the two others
                pods = m.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=job-name")
                job_uids |= {p["metadata"]["labels"].get("controller-uid", "") for p in (pods or {}).get("items") or []}
            phase = str((fleet.plan(plan_name).get("status") or {}).get("phase") or "Pending")
            time.sleep(0.1)
    finally:
        stop.set()
        killer.join(30)
    plan = fleet.plan(plan_name)
    st = plan["status"]
    assert st["phase"] == "Succeeded", st
    assert plan["spec"]["trigger"] == "Drain" and "targetCluster" not in plan["spec"]
    target = st["targetCluster"]
    assert target != source and "where the scheduler would place it" in st["targetChoice"]
    # every phase after the first was seen, so the controllers were killed 4 times (PrepareTarget, which
    # no kill follows, may be over before the watch opens on a loaded machine)
    assert [p for p in seen if p != "PrepareTarget"] == list(FORWARD[1:]), seen
    conds = {c["type"]: c for c in st["conditions"]}
    for t in ("TargetPrepared", "DataCopied", "CaughtUp", "TrafficSwitched", "SourceRetired"):
        assert conds[t]["status"] == "True", conds[t]
        assert conds[t]["startTime"] <= conds[t]["lastTransitionTime"]
    assert len(job_uids) == 1, f"the copy hook ran as {len(job_uids)} Jobs"  # never started twice
    assert fleet.ready_in_members("orders") == {target: 2}
    b = fleet.binding(f"statefulset-{NS}-orders")
    assert [(t["cluster"], t["replicas"]) for t in b["status"]["placement"]] == [(target, 2)]
    # the status says Succeeded first (a crash after it redoes the rest); the pin goes right after
    wait_for(lambda: PINNED_PLACEMENT not in (fleet.binding(f"statefulset-{NS}-orders")["metadata"].get(
        "annotations") or {}), 20, "the plan's pin removed")
    # moved with its data on purpose: no fleet change (the source uncordoned) brings it back there
    assert fleet.binding(f"statefulset-{NS}-orders")["metadata"]["annotations"][MIGRATED_FROM] == source
    # the hook Job and its Binding are gone
    wait_for(lambda: not fleet.http.get(f"/apis/batch/v1/namespaces/{NS}/jobs").json().get("items"), 20,
             "the hook Job removed")


def test_failed_hook_rolls_back_with_the_source_serving(fleet: Fleet) -> None:
    source, target = deploy(fleet, "ledger", 2, hook(exit_code=1))
    done = fleet.api.run_cli("migrate", f"statefulset/{NS}/ledger", "--to", target, "--server", fleet.api.url,
                             "--token", fleet.api.token(), "-o", "json")
    assert done.returncode == 0, done.stderr
    plan_name = json.loads(done.stdout)["metadata"]["name"]
    deadline = time.monotonic() + 90
    phase = ""
    while phase not in ("Succeeded", "RolledBack", "Failed"):
        assert time.monotonic() < deadline, f"plan stuck: {fleet.plan(plan_name).get('status')}"
        ready = fleet.ready_in_members("ledger")
        assert ready.get(source, 0) == 2, f"the source stopped serving in {phase}: {ready}"
        phase = str((fleet.plan(plan_name).get("status") or {}).get("phase") or "Pending")
        time.sleep(0.2)
    st = fleet.plan(plan_name)["status"]
    assert st["phase"] == "RolledBack", st
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["RolledBack"]["status"] == "True" and conds["RolledBack"]["reason"] == "HookFailed"
    assert conds["DataCopied"]["status"] == "False" and "backoff limit" in conds["DataCopied"]["message"]
    assert conds["TargetPrepared"]["status"] == "True"
    assert fleet.ready_in_members("ledger") == {source: 2}
    b = fleet.binding(f"statefulset-{NS}-ledger")
    assert [(t["cluster"], t["replicas"]) for t in b["status"]["placement"]] == [(source, 2)]
    assert PINNED_PLACEMENT not in (b["metadata"].get("annotations") or {})
    assert MIGRATED_FROM not in (b["metadata"].get("annotations") or {})  # it never left the source
    # a finished plan does not block a new one; a second plan while one runs is refused (409)
    body = {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan", "metadata": {"namespace": NS},
            "spec": {"workloadRef": {"name": "ledger"}, "sourceCluster": source, "targetCluster": target}}
    first = fleet.http.post(PLANS, json={**body, "metadata": {**body["metadata"], "name": "ledger-again"}})
    assert first.status_code == 201, first.text
    second = fleet.http.post(PLANS, json={**body, "metadata": {**body["metadata"], "name": "ledger-twice"}})
    assert second.status_code == 409, second.text
    assert "already being moved by MigrationPlan 'ledger-again'" in second.json()["message"]
    assert fleet.http.get(f"{PLANS}/ledger-twice").status_code == 404
    # deleting a running plan (here waiting in SwitchTraffic, traffic already off the source) rolls it back
    # first; the finalizer keeps it until the source serves alone again
    fleet.http.patch(f"{PLANS}/ledger-again", json={"spec": {"trafficDrainSeconds": 120}},
                     headers={"content-type": "application/merge-patch+json"})
    wait_for(lambda: (fleet.plan("ledger-again").get("status") or {}).get("phase") == "SwitchTraffic", 60,
             "ledger-again switching traffic")
    # the phase is written first, the Binding's withdrawal just after (a crash redoes it)
    wait_for(lambda: (fleet.binding(f"statefulset-{NS}-ledger")["metadata"].get("annotations") or {})
             .get(TRAFFIC_WITHDRAWN) == source, 30, "the source withdrawn on the Binding")
    assert fleet.http.delete(f"{PLANS}/ledger-again").status_code in (200, 202)
    wait_for(lambda: fleet.http.get(f"{PLANS}/ledger-again").status_code == 404, 60, "the deleted plan gone")
    b = fleet.binding(f"statefulset-{NS}-ledger")
    annotations = b["metadata"].get("annotations") or {}
    assert PINNED_PLACEMENT not in annotations and TRAFFIC_WITHDRAWN not in annotations
    assert [(t["cluster"], t["replicas"]) for t in b["status"]["placement"]] == [(source, 2)]
    assert fleet.ready_in_members("ledger") == {source: 2}


def test_a_given_target_the_scheduler_turns_away_fails_the_plan_before_anything_moves(fleet: Fleet) -> None:
    """A target the workload's placement would not have (here: cordoned) fails the plan at its start with
    the scheduler's reason; a plan there would wait for replicas that never start, or the next decision
    would move the workload back without its data."""
    source, target = deploy(fleet, "pinned", 1, hook())
    cluster = f"/apis/multicluster.io/v1alpha1/clusters/{target}"
    cordon = {"spec": {"unschedulable": True}}
    assert fleet.http.patch(cluster, json=cordon, headers={"content-type": "application/merge-patch+json"}
                            ).status_code == 200
    try:
        r = fleet.http.post(PLANS, json={**plan_body("pinned-away", "pinned", source, target),
                                         "metadata": {"name": "pinned-away", "namespace": NS}})
        assert r.status_code == 201, r.text
        st = wait_for(lambda: (s := fleet.plan("pinned-away").get("status") or {}).get("phase") == "Failed" and s,
                      30, "the plan failed at its start")
        failed = {c["type"]: c for c in st["conditions"]}["Failed"]
        assert failed["reason"] == "TargetNotAllowed" and target in failed["message"], failed
        assert fleet.ready_in_members("pinned") == {source: 1}
        b = fleet.binding(f"statefulset-{NS}-pinned")
        assert PINNED_PLACEMENT not in (b["metadata"].get("annotations") or {})
    finally:
        fleet.http.patch(cluster, json={"spec": {"unschedulable": False}},
                         headers={"content-type": "application/merge-patch+json"})


def test_kubectl_lists_and_applies_migration_plans(fleet: Fleet, tmp_path: Path) -> None:
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(fleet.kubeconfig), *args], capture_output=True,
                              text=True, timeout=30, check=False)

    example = Path(__file__).resolve().parents[2] / "examples" / "migration" / "migrationplan.yaml"
    applied = kubectl("apply", "--dry-run=server", "-f", str(example))
    assert applied.returncode == 0 and "created (server dry run)" in applied.stdout, applied.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(example.read_text().replace("targetCluster: gcp-sin", "targetCluster: aws-dfw"))
    refused = kubectl("apply", "-f", str(bad))
    assert refused.returncode != 0 and "spec.targetCluster: must differ from sourceCluster" in refused.stderr, \
        refused.stderr  # said at the field, in the validator's words (no "Value error,")
    assert "Value error" not in refused.stderr
    out = kubectl("get", "migrationplans", "-n", NS)
    assert out.returncode == 0, out.stderr
    header = out.stdout.splitlines()[0].split()
    assert header[:5] == ["NAME", "WORKLOAD", "FROM", "TO", "PHASE"], out.stdout
    rows = {line.split()[1]: line.split() for line in out.stdout.splitlines()[1:]}
    assert rows["StatefulSet/orders"][4] == "Succeeded"
    assert any(r[1] == "StatefulSet/ledger" and r[4] == "RolledBack" for r in map(str.split, out.stdout.splitlines()))


# ---- data that moves: VolumeCopy between the sims (issue: stateful moves that keep the data)
MB = 1_000_000
DATA_BYTES = 20 * MB  # per claim: 2 s at BANDWIDTH_MBPS


def writing_statefulset(name: str, used: int, storage: str = "1Gi") -> dict[str, Any]:
    """One replica with two claims (data, wal) of ``used`` bytes each, written 20 times a second."""
    body = statefulset(name, 1, None, volumeClaimTemplates=[
        {"metadata": {"name": t, "annotations": {"sim.drods.io/used-bytes": str(used)}},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}
        for t in ("data", "wal")])
    body["spec"]["template"]["metadata"]["annotations"] = {"sim.drods.io/write-rate": "20"}
    return body


def volume_copy(freeze: float = 20) -> dict[str, Any]:
    return {"data": {"mover": "VolumeCopy", "image": "registry.example/volume-copy-rsync:1",
                     "catchUp": {"maxLagSeconds": 1, "probe": {"image": "busybox", "periodSeconds": 1}}},
            "switch": {"freezeSeconds": freeze}, "trafficDrainSeconds": 0}


def claim(fleet: Fleet, cluster: str, name: str) -> dict[str, Any]:
    obj = fleet.members[cluster].get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}")
    return dict(obj or {})


def writes(c: dict[str, Any]) -> int:
    return int((c.get("metadata") or {}).get("annotations", {}).get("sim.drods.io/writes") or -1)


def plan_body(name: str, workload: str, source: str, target: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan", "metadata": {"name": name},
            "spec": {"workloadRef": {"name": workload}, "sourceCluster": source, "targetCluster": target, **spec}}


def test_volume_copy_moves_two_written_claims_and_loses_no_write(fleet: Fleet) -> None:
    source, target = deploy(fleet, "catalog", 1, None, writing_statefulset("catalog", DATA_BYTES))
    wait_for(lambda: writes(claim(fleet, source, "data-catalog-0")) > 0, 20, "the source's claims written")
    # no data step for a workload with claims: refused, nothing created
    refused = fleet.http.post(PLANS, json=plan_body("catalog-bare", "catalog", source, target))
    assert refused.status_code == 400 and refused.json()["reason"] == "BadRequest", refused.text
    assert "spec.data: None" in refused.json()["message"]
    assert refused.json()["details"]["causes"][0]["field"] == "spec.data"
    assert fleet.http.get(f"{PLANS}/catalog-bare").status_code == 404
    # the operator reported the link's bandwidth (C2): the plan's estimate uses it
    r = fleet.http.put("/api/v1/network/status", json={"measurements": [
        {"from": source, "to": target, "bandwidthMbps": 80}]})
    assert r.status_code == 200, r.text
    r = fleet.http.post(PLANS, json=plan_body("catalog-move", "catalog", source, target, **volume_copy()))
    assert r.status_code == 201, r.text
    records: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 120
    phase = ""
    while phase not in ("Succeeded", "RolledBack", "Failed"):
        assert time.monotonic() < deadline, f"plan stuck: {fleet.plan('catalog-move').get('status')}"
        assert sum(fleet.ready_in_members("catalog").values()) >= 1, f"no ready replica in {phase}"
        pods = fleet.members[target].get(f"/api/v1/namespaces/{NS}/pods?labelSelector=job-name") or {}
        for p in pods.get("items") or []:
            rec = (p["metadata"].get("annotations") or {}).get("sim.drods.io/copy")
            if rec and (p.get("status") or {}).get("phase") == "Succeeded":
                records[p["metadata"]["labels"]["job-name"]] = json.loads(rec)
        phase = str((fleet.plan("catalog-move").get("status") or {}).get("phase") or "Pending")
        time.sleep(0.2)
    st = fleet.plan("catalog-move")["status"]
    assert st["phase"] == "Succeeded", st
    assert [c["name"] for c in st["data"]["claims"]] == ["data-catalog-0", "wal-catalog-0"]
    for c in st["data"]["claims"]:  # each claim's copy reported on its Job: bytes, rate, checksums (verified)
        assert c["bytes"] >= DATA_BYTES and c["checksum"] == c["sourceChecksum"], c
        assert c["bytesPerSecond"] == pytest.approx(BANDWIDTH_MBPS * 1e6 / 8, rel=0.5), c
    assert st["data"]["bytesCopied"] == sum(c["bytes"] for c in st["data"]["claims"])
    bystander = next(n for n in fleet.members if n not in (source, target))  # the third sim holds nothing of it
    assert claim(fleet, bystander, "data-catalog-0") == {} and bystander not in fleet.ready_in_members("catalog")
    est = st["estimate"]  # two 1Gi claims (their capacity: an upper bound) at 80 Mbps
    assert est["bytes"] == 2 * 2**30 and est["bandwidthMbps"] == 80, est
    assert est["copySeconds"] == round(2 * 2**30 * 8 / 80e6, 1) and "unknownClaims" not in est, est
    assert est["bandwidthFrom"] == f"network status {source} → {target}", est
    assert st["data"]["lostWrites"] == 0 and st["data"]["lostWritesMeasuredBy"] == "probe"
    assert 0 < st["freeze"]["downtimeSeconds"] <= 20
    copies = {k: v for k, v in records.items() if "-copy-" in k}
    finals = {k: v for k, v in records.items() if "-final-" in k}
    assert len(copies) == 2 and len(finals) == 2, sorted(records)
    for rec in copies.values():  # copy time ≈ size ÷ bandwidth (the size: the data and the writes made so far)
        expect = rec["total"] / (BANDWIDTH_MBPS * 1e6 / 8)
        # the record's seconds are rounded to the millisecond (2.0090112 s recorded as 2.009)
        assert DATA_BYTES <= rec["total"] == rec["goalUsed"] and expect - 5e-4 <= rec["seconds"] <= expect + 1.5, rec
    for name, rec in finals.items():  # the final sync left the target with exactly the fenced source's content
        claim_name = st["data"]["claims"][int(name.split("-final-")[1].split("-")[0])]["name"]
        src = claim(fleet, source, claim_name)
        assert writes(src) == rec["goalWrites"], (claim_name, writes(src), rec)
        assert src["metadata"]["annotations"]["sim.drods.io/checksum"] == rec["checksum"]
        assert writes(claim(fleet, target, claim_name)) >= rec["goalWrites"]
    assert fleet.ready_in_members("catalog") == {target: 1}
    for c in st["data"]["claims"]:  # promoted for good: the copy takes the workload's writes from now on
        wait_for(lambda c=c: "sim.drods.io/replica-of" not in (got := claim(fleet, target, c["name"]))["metadata"][
            "annotations"] and writes(got) > writes(claim(fleet, source, c["name"])) and got, 30,
            f"{c['name']} written on {target} past the source's last write")


def test_a_failed_volume_copy_rolls_back_with_the_source_untouched(fleet: Fleet) -> None:
    # 3 MB of data in 1 MiB claims: the target's copy fails (no space left on device)
    source, target = deploy(fleet, "ledger2", 1, None, writing_statefulset("ledger2", 3 * MB, storage="1Mi"))
    before = wait_for(lambda: writes(claim(fleet, source, "data-ledger2-0")) if writes(
        claim(fleet, source, "data-ledger2-0")) > 0 else None, 20, "the source written")
    r = fleet.http.post(PLANS, json=plan_body("ledger2-move", "ledger2", source, target, **volume_copy()))
    assert r.status_code == 201, r.text
    st = wait_for(lambda: s if (s := fleet.plan("ledger2-move").get("status") or {}).get("phase") in (
        "RolledBack", "Failed", "Succeeded") else None, 90, "the plan ended")
    assert st["phase"] == "RolledBack" and st["rollbackReason"] == "HookFailed", st
    assert "no space left on device" in st["rollbackMessage"], st  # the cause, not only the backoff limit
    assert fleet.ready_in_members("ledger2") == {source: 1}
    src = claim(fleet, source, "data-ledger2-0")
    assert "sim.drods.io/read-only" not in src["metadata"]["annotations"]  # never fenced
    wait_for(lambda: writes(claim(fleet, source, "data-ledger2-0")) > max(writes(src), before), 10,
             "the source still taking writes")


def test_data_none_moves_without_the_data_as_declared(fleet: Fleet) -> None:
    source, target = deploy(fleet, "cache", 1, None, writing_statefulset("cache", MB))
    r = fleet.http.post(PLANS, json=plan_body("cache-move", "cache", source, target, data="None",
                                               trafficDrainSeconds=0))
    assert r.status_code == 201, r.text
    st = wait_for(lambda: s if (s := fleet.plan("cache-move").get("status") or {}).get("phase") in (
        "RolledBack", "Failed", "Succeeded") else None, 60, "the plan ended")
    assert st["phase"] == "Succeeded" and st["data"]["mover"] == "None" and st["data"]["declaredNone"], st
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["DataCopied"]["reason"] == "DataNoneDeclared"


# ---- a cache plan that moves bytes (F4): the copy lands, then placement prefers the cluster holding it
CACHE_BYTES = 4 * 2**20  # 4 MiB: 0.4 s at BANDWIDTH_MBPS


def test_an_approved_cache_plan_copies_then_placement_prefers_the_copy(fleet: Fleet, tmp_path: Path) -> None:
    api = "/apis/multicluster.io/v1alpha1/namespaces/" + NS
    ds = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "features"},
          "spec": {"sizeGiB": CACHE_BYTES / 2**30, "locations": [{"cluster": "mig-dfw", "kind": "Primary"}]}}
    assert fleet.http.post(f"{api}/datasets", json=ds).status_code == 201
    plan = {"apiVersion": "multicluster.io/v1alpha1", "kind": "CachePlan", "metadata": {"name": "features-sin"},
            "spec": {"dataset": "features", "cluster": "mig-sin", "approved": True}}
    r = fleet.http.post(f"{api}/cacheplans", json=plan)
    assert r.status_code == 201, r.text
    seen: list[str] = []

    def ready() -> dict[str, Any] | None:
        st = fleet.http.get(f"{api}/cacheplans/features-sin").json().get("status") or {}
        locs = [loc["cluster"] for loc in fleet.http.get(f"{api}/datasets/features").json()["spec"]["locations"]]
        if st.get("phase") and (not seen or seen[-1] != st["phase"]):
            seen.append(st["phase"])
        assert st.get("phase") == "Ready" or "mig-sin" not in locs, (st, locs)  # no location before the copy
        assert st.get("phase") != "Failed", st
        return st if st.get("phase") == "Ready" else None

    st = wait_for(ready, 60, "the cache copy Ready")
    assert "Copying" in seen, seen
    records = wait_for(lambda: fleet.http.get("/api/v1/decisions", params={
        "kind": "Dataset", "namespace": NS, "name": "features"}).json()["items"], 10, "the copy's decision record")
    assert all(r["type"] == "CachePlan" for r in records), records
    for r in records:  # the copy's outcome: keeping the reads remote lost (a plan written by hand: as written)
        assert r["runnerUp"]["name"] == "keep reading from mig-dfw", r
        assert "approved as written" in r["runnerUp"]["why"], r
    assert st["copySource"] == "mig-dfw" and st["bytesMoved"] == CACHE_BYTES, st
    assert st["checksum"] == st["sourceChecksum"] and st["bytesPerSecond"] > 0 and st["transferCost"] > 0, st
    wait_for(lambda: {"cluster": "mig-sin", "kind": "Cache"} in fleet.http.get(f"{api}/datasets/features").json()[
        "spec"]["locations"], 10, "the Cache location (added once Ready is recorded)")
    # the copy ran in mig-sin, as a Job of its own, and finished there
    jobs = fleet.members["mig-sin"].get(f"/apis/batch/v1/namespaces/{NS}/jobs") or {}
    assert any(j["metadata"]["name"] == st["copyJob"] and (j.get("status") or {}).get("succeeded") == 1
               for j in jobs.get("items") or []), jobs
    held = claim(fleet, "mig-sin", st["copyJob"])  # the copy lives in a claim of its own, filled by the Job
    assert held["metadata"]["annotations"]["sim.drods.io/used-bytes"] == str(CACHE_BYTES), held
    assert held["metadata"]["annotations"]["sim.drods.io/checksum"] == st["checksum"], held
    out = subprocess.run(["kubectl", "--kubeconfig", str(fleet.kubeconfig), "get", "cacheplans", "-n", NS],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:7] == ["NAME", "DATASET", "CLUSTER", "FROM", "APPROVED", "PHASE", "BYTES"], out.stdout
    assert out.stdout.splitlines()[1].split()[1:7] == ["features", "mig-sin", "mig-dfw", "true", "Ready",
                                                       str(CACHE_BYTES)], out.stdout
    # a reader that may run on mig-lhr or mig-sin goes where the cache now is
    r = fleet.http.post("/apis/multicluster.io/v1alpha1/propagationpolicies", json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "readers"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS}],
                 "datasets": [{"name": "features", "readGiBPerHour": 500}],
                 "placement": {"clusterAffinity": {"clusterNames": ["mig-lhr", "mig-sin"]},
                               "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                     "replicaDivisionPreference": "Aggregated"}}}})
    assert r.status_code == 201, r.text
    body = statefulset("trainer", 1, None)
    body.update(kind="Deployment")
    for k in ("serviceName",):
        body["spec"].pop(k)
    assert fleet.http.post(f"/apis/apps/v1/namespaces/{NS}/deployments", json=body).status_code == 201
    placed = wait_for(lambda: [t["cluster"] for t in (fleet.binding(f"deployment-{NS}-trainer").get("status") or {})
                               .get("placement") or []] or None, 30, "the reader placed")
    assert placed == ["mig-sin"], placed
    # withdrawn: the location goes and the copy Job leaves mig-sin
    fleet.http.patch(f"{api}/cacheplans/features-sin", json={"spec": {"approved": False}},
                     headers={"content-type": "application/merge-patch+json"})
    wait_for(lambda: (fleet.http.get(f"{api}/cacheplans/features-sin").json().get("status") or {}).get("phase")
             == "Withdrawn", 30, "the plan withdrawn")
    assert [loc["cluster"] for loc in fleet.http.get(f"{api}/datasets/features").json()["spec"]["locations"]] == \
        ["mig-dfw"]
    wait_for(lambda: not any(j["metadata"]["name"] == st["copyJob"] for j in (fleet.members["mig-sin"].get(
        f"/apis/batch/v1/namespaces/{NS}/jobs") or {}).get("items") or []), 30, "the copy Job gone from mig-sin")
    wait_for(lambda: claim(fleet, "mig-sin", st["copyJob"]) == {}, 30, "the copy's claim gone from mig-sin")


def test_drain_of_a_workload_with_claims_and_no_hook_copies_its_volumes(fleet: Fleet) -> None:
    """F3: a drain never re-places a StatefulSet with claims without its data. With no data step declared
    it moves by a MigrationPlan with the default VolumeCopy mover and a write freeze: the claims are
    copied and verified, the final sync runs with the source fenced, and the workload ends on the target."""
    for kind in ("statefulsets", "deployments"):  # the earlier tests' workloads: the drain would move them too
        for item in fleet.http.get(f"/apis/apps/v1/namespaces/{NS}/{kind}").json().get("items") or []:
            fleet.http.delete(f"/apis/apps/v1/namespaces/{NS}/{kind}/{item['metadata']['name']}")
    wait_for(lambda: not [b for b in fleet.http.get(BINDINGS).json().get("items") or []
                          if b["spec"]["resource"].get("namespace") == NS
                          and b["spec"]["resource"].get("kind") in ("StatefulSet", "Deployment")], 60,
             "the earlier workloads gone",
             what_else=lambda: [b["metadata"]["name"] for b in fleet.http.get(BINDINGS).json().get("items") or []])
    source, _ = deploy(fleet, "stock", 1, None, writing_statefulset("stock", 2 * MB))
    wait_for(lambda: writes(claim(fleet, source, "data-stock-0")) > 0, 20, "the source's claims written")
    dry = fleet.http.post(f"/api/v1/clusters/{source}/drain?dryRun=All", json={})
    assert dry.status_code == 200 and dry.json()["migrationPlans"] == [f"{NS}/stock"], dry.text
    done = fleet.api.run_cli("cluster", "drain", source, "--server", fleet.api.url, "--token", fleet.api.token())
    assert done.returncode == 0, done.stderr
    assert "1 migration plan(s) started" in done.stdout and "0 binding(s) rescheduled" in done.stdout, done.stdout
    plan_name = done.stdout.strip().rsplit(f"{NS}/", 1)[1].strip()
    try:
        spec = fleet.plan(plan_name)["spec"]
        assert spec["data"]["mover"] == "VolumeCopy" and spec["switch"]["freezeSeconds"] == 60, spec
        assert spec["trigger"] == "Drain"
        st = wait_for(lambda: s if (s := fleet.plan(plan_name).get("status") or {}).get("phase") in (
            "RolledBack", "Failed", "Succeeded") else None, 120, "the drain's plan ended")
        assert st["phase"] == "Succeeded", st
        target = st["targetCluster"]
        assert target != source and [c["name"] for c in st["data"]["claims"]] == ["data-stock-0", "wal-stock-0"]
        for c in st["data"]["claims"]:
            assert c["bytes"] >= 2 * MB and c["checksum"] == c["sourceChecksum"], c
        assert st["freeze"]["stage"] == "done" and 0 < st["freeze"]["downtimeSeconds"] <= 60, st["freeze"]
        assert fleet.ready_in_members("stock") == {target: 1}
        # the target's claims hold every write the fenced source took (the final sync), and more since
        assert writes(claim(fleet, target, "data-stock-0")) > 0
        # X1: the move's decision names the third cluster as runner-up, with why it lost
        third = next(n for n in fleet.members if n not in (source, target))
        records = fleet.http.get("/api/v1/decisions", params={"kind": "StatefulSet", "namespace": NS,
                                                               "name": "stock"}).json()["items"]
        moved = [r for r in records if r["type"] == "Migration" and r["runnerUp"]]
        assert moved and moved[0]["runnerUp"]["name"] == third and moved[0]["runnerUp"]["against"] == target, records
        assert {o["name"] for o in moved[0]["options"]} == {target, third}
        explained = fleet.api.run_cli("explain", "statefulset/stock", "-n", NS, "--server", fleet.api.url,
                                      "--token", fleet.api.token())
        lost = (f"runner-up: {third} scored", f"runner-up: {third} tied with {target}")  # identical sims may tie
        assert explained.returncode == 0 and any(w in explained.stdout for w in lost), explained.stdout
        by_plan = fleet.api.run_cli("explain", f"migrationplan/{plan_name}", "-n", NS, "--server", fleet.api.url,
                                    "--token", fleet.api.token())
        assert by_plan.returncode == 0 and "Subject:    StatefulSet/stock" in by_plan.stdout, by_plan.stdout
        assert any(w in by_plan.stdout for w in lost), by_plan.stdout
    finally:
        fleet.http.patch(f"/apis/multicluster.io/v1alpha1/clusters/{source}", json={"spec": {"unschedulable": False}},
                         headers={"content-type": "application/merge-patch+json"})
