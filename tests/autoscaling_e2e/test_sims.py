"""Federated autoscaling against ``drods sim`` members, as a user runs it (F5, M2).

Real processes: ``drods serve`` (sync every 0.5 s), a push-mode sim joined with ``drods cluster
join``, a pull-mode sim reached only by its ``drods agent`` — through a loopback link the test can
cut (the control plane keeps running: a network partition). Load is the sims' own emulation
(``drods sim load``: a CPU demand shared by a workload's running pods), read back through
metrics.k8s.io, the member summary and monitoring — nothing is fed by hand.

* A CPU FederatedHPA on the push member scales out to the count the demand needs, then back in.
* Each FederatedHPA reads its own workload's pods (metrics.k8s.io PodMetrics, both members): of two
  Deployments on the same sims, the busy one scales out, the quiet one beside it does not.
* Regional autonomy: with the agent cut off during a load ramp, it scales its workloads alone
  within their FederatedHPAs' bounds; a workload deleted centrally meanwhile is deleted on return,
  not resurrected; the agent's count is adopted as the desired total, not reverted during the hold,
  journalled; then central decisions resume.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from kubernetes import config as k8s_config

from drods.autoscaling.autonomy import REASON_ADOPTED, REASON_LOCAL
from drods.model.timefmt import parse_rfc3339
from drods.sim.config import ANN_AMPLITUDE, ANN_CPU_UTIL
from drods.sim.harness import SimProcess
from tests.members_e2e.conftest import Member, deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, binding_of, policy
from tests.server_process import ServerProcess, drods_command
from tests.tcp_cut import CuttableLink

PUSH, EDGE = "sim-push", "sim-edge"
FHPAS = "/apis/multicluster.io/v1alpha1/namespaces/default/federatedhpas"
HOLD_S = 4.0
CONFIG = f"""apiVersion: config.drods.io/v1alpha1
kind: DRODSConfiguration
monitoring:
  sustainedSeconds: 60
  rateMinIntervalSeconds: 0
  flushIntervalSeconds: 0.05
  staleCheckIntervalSeconds: 0.5
  realtimeMinIntervalSeconds: 0
members:
  probeIntervalSeconds: 0.5
  summaryIntervalSeconds: 1
  statusPollSeconds: 0.5
  usagePollSeconds: 0.5
  heartbeatWriteSeconds: 5
  cleanupIntervalSeconds: 1
  retries: 0
autoscaling:
  syncSeconds: 0.5
  adoptHoldSeconds: {HOLD_S}
"""


@dataclass
class Fleet:
    root: Path
    server: ServerProcess
    http: httpx.Client
    push: Member
    edge: Member
    link: CuttableLink

    def fhpa(self, name: str) -> dict[str, Any]:
        return dict(self.http.get(f"{FHPAS}/{name}").json())

    def replicas(self, member: Member, name: str) -> int | None:
        d = member.deployment(name)
        return None if d is None else int(d.spec.replicas or 0)

    def agent_log(self) -> str:
        return (self.root / "agent.log").read_text(errors="replace")[-3000:]


def _fhpa(name: str, lo: int, hi: int, up_period: int = 5) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": lo, "maxReplicas": hi,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
                     # up by at most 4 pods per 5 s: the metrics of the new pods arrive before the next step
                     "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "policies": [
                         {"type": "Pods", "value": 4, "periodSeconds": up_period}]},
                                  "scaleDown": {"stabilizationWindowSeconds": 1, "policies": [
                                      {"type": "Percent", "value": 100, "periodSeconds": 1}]}}}}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("autoscaling-sims")
    sims = {PUSH: SimProcess(PUSH, root / "sims", ["--region", "us-east"]).start(),
            EDGE: SimProcess(EDGE, root / "sims", ["--region", "eu-north"]).start()}
    data = root / "server"
    data.mkdir()
    (data / "drods.yaml").write_text(CONFIG)
    server = ServerProcess(data)
    agent: subprocess.Popen[str] | None = None
    link: CuttableLink | None = None
    try:
        server.start()
        for s in sims.values():
            s.wait_ready(60)
        done = server.run_cli("cluster", "join", PUSH, "--kubeconfig", str(sims[PUSH].kubeconfig),
                              "--server", server.url, "--token", server.token("admin"))
        assert done.returncode == 0, done.stderr
        link = CuttableLink(int(urlsplit(server.url).port or 0))
        with server.client(timeout=10) as http:
            r = http.post("/api/v1/clusters", json={"name": EDGE, "syncMode": "Pull"})
            assert r.status_code == 201, r.text
            log = open(root / "agent.log", "a")  # noqa: SIM115 - owned by the child process
            try:
                agent = subprocess.Popen(
                    [*drods_command(), "agent", "--cluster", EDGE, "--kubeconfig", str(sims[EDGE].kubeconfig),
                     "--server", f"https://127.0.0.1:{link.port}", "--token",
                     server.token("cluster-agent", cluster=EDGE), "--interval", "1", "--autoscale-seconds", "0.5",
                     "--usage-seconds", "0.5", "--cutoff-seconds", "1.5", "--state-dir", str(root / "agent-state")],
                    stdout=log, stderr=subprocess.STDOUT, text=True, env=server.environ())
            finally:
                log.close()
            members = {n: Member(n, s, k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False))
                       for n, s in sims.items()}
            yield Fleet(root, server, http, members[PUSH], members[EDGE], link)
    finally:
        for s in sims.values():  # every process told at once, then waited for
            if s.proc is not None and s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        if agent is not None:
            agent.send_signal(signal.SIGTERM)
        if link is not None:
            link.close()
        server.stop(check=False)
        if agent is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(timeout=15)
        for s in sims.values():
            s.stop()


def _workload(f: Fleet, name: str, replicas: int, cluster: str, lo: int, hi: int, up_period: int = 5) -> None:
    assert f.http.post(RPP, json=policy(name, name, [cluster])).status_code == 201
    assert f.http.post(deploy_path(), json=deployment(name, replicas, cpu="500m")).status_code == 201
    r = f.http.post(FHPAS, json=_fhpa(name, lo, hi, up_period))
    assert r.status_code == 201, r.text


def test_cpu_fhpa_against_a_sim_scales_out_then_in(fleet: Fleet) -> None:
    f = fleet
    _workload(f, "cpu", 2, PUSH, 2, 10)
    wait_for(lambda: f.replicas(f.push, "cpu") == 2, 30, "the Deployment in the push member")
    f.push.sim.load("Deployment/default/cpu", 1.5)  # 1.5 cores over 2 × 500m requested: 150 %
    seen: list[int] = []

    def desired() -> int | None:
        v = f.fhpa("cpu").get("status", {}).get("desiredReplicas")
        seen.append(v or 0)
        return v if isinstance(v, int) else None

    def utilisation() -> float:
        metrics = f.fhpa("cpu").get("status", {}).get("currentMetrics") or [{}]
        return float(metrics[0].get("resource", {}).get("current", {}).get("averageUtilization", -1))

    # ceil(2 × 150 / 50) = 6, and then 1.5 / (6 × 0.5) = 50 %: the target, it stays
    wait_for(lambda: desired() == 6 and f.replicas(f.push, "cpu") == 6 and utilisation() == 50.0, 30,
             "scaled out to 6, at the target", what_else=lambda: f.fhpa("cpu").get("status"))
    # `kubectl get deploy`: READY against the autoscaler's 6, not the template's own 2 (it read 6/2)
    wait_for(lambda: _table_row(f, "cpu")["Ready"] == "6/6", 20, "READY 6/6", what_else=lambda: _table_row(f, "cpu"))
    # as a user emulates load: 10 %, ceil(6 × 10 / 50) = 2, the minimum
    done = subprocess.run([*drods_command(), "sim", "load", PUSH, "Deployment/default/cpu", "--cpu", "0.3",
                           "--state-dir", str(f.push.sim.state_dir)], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0 and json.loads(done.stdout) == [
        {"namespace": "default", "kind": "Deployment", "name": "cpu", "cpu": 0.3}], done.stderr
    wait_for(lambda: desired() == 2 and f.replicas(f.push, "cpu") == 2, 30, "scaled back in to 2",
             what_else=lambda: f.fhpa("cpu").get("status"))
    assert max(seen) < 10, seen  # no run to the maximum: utilisation is the use, not the requests


def _table_row(f: Fleet, name: str) -> dict[str, Any]:
    """The Deployment's row as `kubectl get deploy -o wide` asks for it and shows it."""
    table = f.http.get(deploy_path(name=name), headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


def _annotated(name: str, replicas: int, cpu_fraction: str) -> dict[str, Any]:
    d = deployment(name, replicas, cpu="200m")
    d["spec"]["template"]["metadata"]["annotations"] = {ANN_CPU_UTIL: cpu_fraction, ANN_AMPLITUDE: "0"}
    return d


def test_only_the_busy_workload_scales_out(fleet: Fleet) -> None:
    f = fleet
    for name, fraction in (("busy", "0.95"), ("quiet", "0.10")):
        even = {"replicaSchedulingType": "Divided", "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in (PUSH, EDGE)]}}
        assert f.http.post(RPP, json=policy(name, name, [PUSH, EDGE], replicaScheduling=even)).status_code == 201
        assert f.http.post(deploy_path(), json=_annotated(name, 4, fraction)).status_code == 201
        fhpa = _fhpa(name, 4, 8)
        assert f.http.post(FHPAS, json=fhpa).status_code == 201

    def metric(name: str) -> float | None:
        got = (f.fhpa(name).get("status") or {}).get("currentMetrics") or [{}]
        value = got[0].get("resource", {}).get("current", {}).get("averageUtilization")
        return float(value) if isinstance(value, int | float) else None

    def usage(name: str) -> dict[str, Any] | None:
        """The Binding's status once both members report the workload's 4 pods ready (each member's
        pods start at its own pace: a reading taken before holds fewer)."""
        st = f.http.get(f"/apis/multicluster.io/v1alpha1/bindings/{binding_of(name)}").json().get("status") or {}
        per = {e["cluster"]: e.get("usage") for e in st.get("clusters") or []}
        ready = (st.get("usage") or {}).get("readyPods")
        return st if set(per) == {PUSH, EDGE} and all(per.values()) and ready == 4 else None

    st = wait_for(lambda: usage("quiet"), 30, "the quiet workload's 4 ready pods' usage from both members",
                  what_else=lambda: f.http.get(f"/apis/multicluster.io/v1alpha1/bindings/{binding_of('quiet')}").json())
    # 4 pods × 200m requested, 10 % each, summed over both members (Kubernetes quantities)
    assert st["usage"]["cpu"] == {"used": "80m", "requested": "800m"} and st["usage"]["readyPods"] == 4, st["usage"]
    assert sum(e["usage"]["pods"] for e in st["clusters"]) == 4
    wait_for(lambda: (f.fhpa("busy").get("status") or {}).get("desiredReplicas", 4) > 4, 30,
             "the busy workload scaling out", what_else=lambda: f.fhpa("busy").get("status"))
    assert abs((metric("busy") or 0) - 95.0) < 1.0
    def quiet_read() -> dict[str, Any] | None:
        st = f.fhpa("quiet").get("status") or {}
        measured = not [c for c in st.get("conditions") or [] if c["type"] == "MetricsUnavailable"]
        return st if measured and abs((metric("quiet") or 0) - 10.0) < 1.0 else None

    quiet = wait_for(quiet_read, 10, "the quiet workload read from both members",
                     what_else=lambda: f.fhpa("quiet").get("status"))
    assert quiet["desiredReplicas"] == 4 and quiet["scaleEvents"] == [], quiet
    template = f.http.get(deploy_path(name="quiet")).json()["status"]
    assert "usage" not in template  # DeploymentStatus' own fields: the measured use is the Binding's
    row = _table_row(f, "quiet")  # the wide columns read the Binding
    assert row["CPU(used/req)"] == "80m/800m" and row["Pods(ready)"] == "4/4", row
    top = f.server.run_cli("top", "workloads", "-n", "default", "--server", f.server.url,
                           "--token", f.server.token("admin"))
    lines = [line.split() for line in top.stdout.splitlines()]
    assert top.returncode == 0 and ["default", "Deployment/quiet", PUSH, "40m/400m"] in [x[:4] for x in lines], \
        top.stdout + top.stderr
    for name in ("busy", "quiet"):
        f.http.delete(f"{FHPAS}/{name}")
        f.http.delete(deploy_path(name=name))
        f.http.delete(f"{RPP}/{name}")


def test_cut_off_agent_scales_alone_and_reconciles_on_return(fleet: Fleet) -> None:
    f = fleet
    _workload(f, "auto", 2, EDGE, 2, 5, up_period=1)
    _workload(f, "gone", 1, EDGE, 1, 3, up_period=1)
    f.edge.sim.load("Deployment/default/auto", 0.4)
    f.edge.sim.load("Deployment/default/gone", 0.2)  # 0.6 / 1.5 cores: 40 %, both stay
    wait_for(lambda: f.replicas(f.edge, "auto") == 2 and f.replicas(f.edge, "gone") == 1, 30,
             "both workloads in the pull member", what_else=f.agent_log)
    state = f.root / "agent-state" / "autonomy.json"

    def cached() -> bool:  # these two: the state may still hold the previous test's autoscalers
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return {a["workload"]["name"] for a in json.loads(state.read_text())["autoscalers"]} == {"auto", "gone"}
        return False

    wait_for(cached, 20, "the agent caching both autoscalers' bounds", what_else=f.agent_log)
    assert f.fhpa("auto")["status"]["desiredReplicas"] == 2

    f.link.cut()  # the agent can no longer reach the control plane, which keeps running
    f.edge.sim.load("Deployment/default/auto", 3.0)  # 3 / 1 core requested: 300 % — a load ramp
    f.edge.sim.load("Deployment/default/gone", 1.0)  # 1 / 0.5: 200 %
    assert f.http.delete(deploy_path(name="gone")).status_code in (200, 202)  # deleted centrally meanwhile
    peak = {"auto": 0, "gone": 0}

    def scaled() -> bool:
        for n in peak:
            peak[n] = max(peak[n], f.replicas(f.edge, n) or 0)
        return f.replicas(f.edge, "auto") == 5 and f.replicas(f.edge, "gone") == 3

    # each on its own pods: ceil(2 × 300 / 50) = 12 bounded by max 5; ceil(1 × 200 / 50) = 4 bounded by max 3
    wait_for(scaled, 60, "local scaling within the bounds while cut off", what_else=f.agent_log)
    assert f.fhpa("auto")["status"]["desiredReplicas"] == 2  # the control plane did not know
    assert f.replicas(f.edge, "gone") == 3  # the delete has not reached the member
    f.link.restore()

    def adopted() -> dict[str, Any] | None:
        st = f.fhpa("auto").get("status") or {}
        return st if (st.get("autonomy") or {}).get("adoptedReplicas") == 5 else None

    st = wait_for(adopted, 30, "the agent's count adopted", what_else=f.agent_log)
    assert st["desiredReplicas"] == 5 and st["autonomy"]["cluster"] == EDGE
    wait_for(lambda: f.replicas(f.edge, "gone") is None, 20, "the centrally deleted workload pruned",
             what_else=f.agent_log)
    wait_for(lambda: ((f.http.get(f"/apis/multicluster.io/v1alpha1/bindings/{binding_of('auto')}").json()
                       .get("spec") or {}).get("replicas")) == 5, 10, "the adopted total on the Binding")
    # no fight: the count stands through the hold, and the deleted workload stays deleted
    until = (parse_rfc3339(st["autonomy"]["adoptedAt"]) or 0.0) + HOLD_S
    while time.time() < until:
        assert f.fhpa("auto")["status"]["desiredReplicas"] == 5
        assert f.replicas(f.edge, "auto") == 5 and f.replicas(f.edge, "gone") is None
        time.sleep(0.2)
    assert peak["auto"] <= 5 and peak["gone"] <= 3
    hist = f.http.get("/api/v1/autoscaling/history", params={"workload": "Deployment/default/auto"}).json()["items"]
    reasons = [e["reason"] for e in hist]
    assert reasons.count(REASON_ADOPTED) == 1 and REASON_LOCAL in reasons, reasons
    local = [e for e in hist if e["reason"] == REASON_LOCAL]
    assert all(e["cluster"] == EDGE and e["to"] <= 5 for e in local) and local[0]["to"] == 5
    bad = f.http.get("/api/v1/autoscaling/history", params={"workload": "garbage"})  # not KIND/NAMESPACE/NAME
    assert bad.status_code == 422 and bad.json()["code"] == "VALIDATION_FAILED", bad.text
    gone = f.http.get("/api/v1/autoscaling/history", params={"workload": "Deployment/default/gone"}).json()["items"]
    assert REASON_ADOPTED not in [e["reason"] for e in gone]

    # central decisions resume: the load drops, the control plane scales in
    f.edge.sim.load("Deployment/default/auto", 0.2)
    wait_for(lambda: (f.fhpa("auto")["status"]["desiredReplicas"] <= 2 and f.replicas(f.edge, "auto") ==
                      f.fhpa("auto")["status"]["desiredReplicas"]), 30, "central scale-in after the hold",
             what_else=lambda: f.fhpa("auto").get("status"))
    hist = f.http.get("/api/v1/autoscaling/history", params={"workload": "Deployment/default/auto"}).json()["items"]
    assert hist[0]["reason"] not in (REASON_LOCAL, REASON_ADOPTED) and hist[0]["from"] == 5
