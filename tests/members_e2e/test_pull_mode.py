"""M2: a pull-mode member receives its workloads through its own agent (Karmada's karmada-agent),
and keeps them — and its last desired state — while the control plane is away.

Real processes: ``drods serve``, one ``drods sim`` registered with ``"syncMode": "Pull"`` (the
control plane has no way in), and ``drods agent`` for it. The control plane is stopped and started
again on the same port and data dir in the middle of the test."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient

from drods.sim.harness import SimProcess
from tests.members_e2e.conftest import FAST, Member, deploy_path, deployment, repo_root, wait_for
from tests.members_e2e.test_fullpath import RPP, binding_of, policy
from tests.server_process import ServerProcess, drods_command

EDGE = "edge-hel"
MERGE = {"Content-Type": "application/merge-patch+json"}
COP = "/apis/multicluster.io/v1alpha1/clusteroverridepolicies"
_EXAMPLES = repo_root() / "examples" / "resources"
CRD_EXAMPLE = (_EXAMPLES / "trainingrun-crd.yaml").read_text()
RIC_EXAMPLE = (_EXAMPLES / "trainingrun-interpreter.yaml").read_text()
RPP_EXAMPLE = (_EXAMPLES / "policy.yaml").read_text()


def run_example(count: int) -> str:
    return (_EXAMPLES / "trainingrun.yaml").read_text().replace("count: 6", f"count: {count}")


@dataclass
class Pull:
    root: Path
    server: ServerProcess
    member: Member
    agent: subprocess.Popen[str] | None = None

    def http(self) -> httpx.Client:
        return self.server.client(timeout=10)

    def start_agent(self) -> None:
        log = open(self.root / "agent.log", "a")  # noqa: SIM115 - owned by the child process
        try:
            self.agent = subprocess.Popen(
                [*drods_command(), "agent", "--cluster", EDGE, "--kubeconfig", str(self.member.sim.kubeconfig),
                 "--server", self.server.url, "--token", self.server.token("cluster-agent", cluster=EDGE),
                 "--interval", "2", "--state-dir", str(self.root / "agent-state")],
                stdout=log, stderr=subprocess.STDOUT, text=True, env=self.server.environ())
        finally:
            log.close()

    def stop_agent(self) -> int:
        assert self.agent is not None
        self.agent.send_signal(signal.SIGTERM)
        code = self.agent.wait(timeout=20)
        self.agent = None
        return code

    def agent_log(self) -> str:
        return (self.root / "agent.log").read_text(errors="replace")

    def replicas(self, name: str) -> int | None:
        d = self.member.deployment(name)
        return None if d is None else int(d.spec.replicas or 0)


@pytest.fixture(scope="module")
def pull(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pull]:
    root = tmp_path_factory.mktemp("pull-mode")
    sim = SimProcess(EDGE, root / "sims", ["--region", "eu-north", "--zone", "eu-north-1a", "--provider", "onprem",
                                           "--city", "HEL"]).start()
    data = root / "server"
    data.mkdir()
    (data / "members.yaml").write_text(FAST)
    server = ServerProcess(data)
    env: Pull | None = None
    try:
        server.start()
        sim.wait_ready(60)
        api = k8s_config.new_client_from_config(str(sim.kubeconfig), persist_config=False)
        env = Pull(root, server, Member(EDGE, sim, api))
        with env.http() as http:
            r = http.post("/api/v1/clusters", json={"name": EDGE, "syncMode": "Pull", "labels": {"site": "edge"}})
            assert r.status_code == 201, r.text
        env.start_agent()
        yield env
    finally:
        if env is not None and env.agent is not None:
            with contextlib.suppress(Exception):
                env.stop_agent()
        server.stop(check=False)
        sim.stop()


def _entry(http: httpx.Client, workload: str) -> dict[str, Any] | None:
    r = http.get(f"/apis/multicluster.io/v1alpha1/bindings/{binding_of(workload)}")
    if r.status_code != 200:
        return None
    entries = (r.json().get("status") or {}).get("clusters") or []
    return entries[0] if entries else None


def test_pull_mode_member_follows_its_works_and_survives_the_control_plane(pull: Pull) -> None:
    with pull.http() as http:
        wait_for(lambda: any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in (http.get(f"/api/v1/clusters/{EDGE}").json().get("status") or {})
                             .get("conditions") or []), 20, "the agent's first report makes the cluster Ready")
        assert http.post(RPP, json=policy("pw", "pw", [EDGE])).status_code == 201
        assert http.post(deploy_path(), json=deployment("pw", 2)).status_code == 201
        # applied by the agent; the Binding and the workload show the member's status, read back by the agent
        wait_for(lambda: pull.replicas("pw") == 2, 20, "the Deployment in the pull-mode member",
                 what_else=lambda: (_entry(http, "pw"), pull.agent_log()[-2000:]))
        e = wait_for(lambda: (x := _entry(http, "pw")) and x.get("applied") and x.get("readyReplicas") == 2 and x,
                     15, "the binding shows the copy applied and ready", what_else=lambda: _entry(http, "pw"))
        assert e["cluster"] == EDGE and e["replicas"] == 2
        wait_for(lambda: http.get(deploy_path(name="pw")).json()["status"].get("readyReplicas") == 2, 10,
                 "the workload's aggregated status")
        works = http.get("/apis/multicluster.io/v1alpha1/works").json()["items"]
        assert [(w["spec"]["cluster"], w["spec"]["binding"], w["metadata"]["labels"]["multicluster.io/cluster"])
                for w in works] == [(EDGE, binding_of("pw"), EDGE)]
        assert works[0]["status"]["observedHash"] == works[0]["spec"]["hash"]
        labels = pull.member.deployment("pw").metadata.labels
        assert labels["multicluster.io/managed-by"] == "drods"
        # scale through the template, then an override for this cluster
        http.patch(deploy_path(name="pw"), json={"spec": {"replicas": 3}}, headers=MERGE)
        wait_for(lambda: pull.replicas("pw") == 3, 20, "scaled to 3 in the member")
        cop = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ClusterOverridePolicy",
               "metadata": {"name": "pw-edge"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "pw"}],
                        "overrides": [{"clusterSelector": {"names": [EDGE]},
                                       "imageOverrider": [{"component": "Registry", "operator": "replace",
                                                           "value": "mirror.hel.example"}]}]}}
        assert http.post(COP, json=cop).status_code == 201

        def image() -> str | None:
            d = pull.member.deployment("pw")
            return None if d is None else str(d.spec.template.spec.containers[0].image)

        wait_for(lambda: image() == "mirror.hel.example/nginx:1.25", 20, "the override in the member",
                 what_else=image)
        # changed in the member behind the agent's back (kubectl scale / set image there): put back
        member_apps = k8s.AppsV1Api(pull.member.api)
        member_apps.patch_namespaced_deployment_scale("pw", "default", {"spec": {"replicas": 6}})
        member_apps.patch_namespaced_deployment("pw", "default", {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "evil:1"}]}}}})
        wait_for(lambda: pull.replicas("pw") == 3 and image() == "mirror.hel.example/nginx:1.25", 20,
                 "the copy changed in the member put back by the agent",
                 what_else=lambda: (pull.replicas("pw"), image(), pull.agent_log()[-1500:]))

    # the control plane goes away: the agent keeps running, deletes nothing, keeps the last desired state
    pull.server.stop()
    wait_for(lambda: "cannot follow the Works" in pull.agent_log(), 15, "the agent noticing the outage")
    apps = k8s.AppsV1Api(pull.member.api)
    apps.delete_namespaced_deployment("pw", "default")  # behind its back: restored from what it holds
    wait_for(lambda: pull.replicas("pw") == 3, 15, "the copy restored without the control plane")
    assert pull.agent is not None and pull.agent.poll() is None
    # an agent restart without the control plane still knows the desired state (its state dir)
    assert pull.stop_agent() == 0
    apps.delete_namespaced_deployment("pw", "default")
    pull.start_agent()
    wait_for(lambda: pull.replicas("pw") == 3 and image() == "mirror.hel.example/nginx:1.25", 20,
             "restored by a restarted agent from its cached state")

    # the control plane returns: the member follows the next change, and a deletion cascades
    pull.server.start()
    with pull.http() as http:
        http.patch(deploy_path(name="pw"), json={"spec": {"replicas": 1}}, headers=MERGE)
        wait_for(lambda: pull.replicas("pw") == 1, 25, "the member follows after the reconnection",
                 what_else=lambda: (_entry(http, "pw"), pull.agent_log()[-2000:]))
        wait_for(lambda: (x := _entry(http, "pw")) and x.get("applied") and x.get("readyReplicas") == 1, 15,
                 "the binding shows the new status")
        assert http.delete(deploy_path(name="pw")).status_code in (200, 202)
        wait_for(lambda: pull.member.deployment("pw") is None, 20, "the copy removed from the member",
                 what_else=lambda: pull.agent_log()[-2000:])
        wait_for(lambda: http.get("/apis/multicluster.io/v1alpha1/works").json()["items"] == [], 10,
                 "the Work deleted")
    assert pull.agent is not None and pull.agent.poll() is None


def test_a_custom_resource_reaches_a_pull_mode_member_with_its_definition_and_its_status_returns(
        pull: Pull) -> None:
    """The agent applies the definition before the resource and reports the copy's status, which
    the control plane aggregates by the interpreter customization (examples/resources)."""
    runs = "/apis/ml.example.org/v1/namespaces/ml/trainingruns"
    yaml_body = {"Content-Type": "application/yaml"}
    with pull.http() as http:
        for path, doc in (("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD_EXAMPLE),
                          ("/apis/multicluster.io/v1alpha1/resourceinterpretercustomizations", RIC_EXAMPLE),
                          (runs, run_example(3)), (RPP, RPP_EXAMPLE)):
            r = http.post(path, content=doc.encode(), headers=yaml_body)
            assert r.status_code == 201, r.text
        wait_for(lambda: (pull.member.get(f"{runs}/resnet") or {}).get("spec", {}).get("workers", {}).get("count")
                 == 3, 20, "the run in the pull-mode member", what_else=lambda: pull.agent_log()[-2000:])
        DynamicClient(pull.member.api).request(
            "patch", f"{runs}/resnet/status", content_type="application/merge-patch+json",
            body={"status": {"progress": {"readyWorkers": 3, "steps": 7}}})
        wait_for(lambda: ((http.get(f"{runs}/resnet").json().get("status") or {}).get("progress") or {})
                 .get("readyWorkers") == 3, 15, "the member's status aggregated on the control plane")
        assert http.delete(f"{runs}/resnet").status_code in (200, 202)
        wait_for(lambda: pull.member.get(f"{runs}/resnet") is None, 20, "the run removed from the member")
        assert http.delete(f"{RPP}/resnet").status_code in (200, 202)


def _ready(http: httpx.Client) -> dict[str, Any]:
    conds = (http.get(f"/api/v1/clusters/{EDGE}").json().get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Ready"), {})


def test_a_pull_member_whose_api_stops_answering_turns_not_ready_at_its_agents_word(pull: Pull) -> None:
    """The agent says so at once (``ClusterNotReachable``) instead of falling silent: NotReady within a
    few report intervals (2 s here), not after ``pullGraceSeconds`` (180 s, the default here)."""
    with pull.http() as http:
        wait_for(lambda: _ready(http).get("status") == "True", 20, "the cluster Ready from its reports")
        pull.member.fault("down")
        try:
            cond = wait_for(lambda: (c := _ready(http)).get("status") == "False" and c, 30,
                            "NotReady on the agent's word, long before the grace",
                            what_else=lambda: (_ready(http), pull.agent_log()[-1500:]))
            assert cond["reason"] == "ClusterNotReachable", cond
            assert "cannot reach the member's API" in cond["message"], cond
            taints = http.get(f"/apis/multicluster.io/v1alpha1/clusters/{EDGE}").json()["spec"].get("taints") or []
            assert any(t.get("key") == "cluster.multicluster.io/not-ready" for t in taints), taints
        finally:
            pull.member.fault("up")
        wait_for(lambda: _ready(http).get("status") == "True", 30, "Ready again once the member answers",
                 what_else=lambda: (_ready(http), pull.agent_log()[-1500:]))
