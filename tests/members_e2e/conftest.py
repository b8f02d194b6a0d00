"""A real ``drods serve`` and three ``drods sim`` members (separate processes), joined with
``drods cluster join``; controller timings are shortened through ``members.yaml`` so failover
tests take seconds, not minutes. Shared by the module's tests, which use distinct names."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from drods.sim.harness import SimProcess
from tests.kubectl.conftest import Kubectl, kubectl_binary
from tests.server_process import ServerProcess

T = TypeVar("T")

SIMS: dict[str, list[str]] = {
    "aws-dfw": ["--region", "us-east", "--zone", "us-east-1a", "--provider", "aws", "--city", "DFW"],
    "azure-lhr": ["--region", "eu-west", "--zone", "westeurope-1", "--provider", "azure", "--city", "LHR",
                  "--preload", "0.5"],
    "gcp-sin": ["--region", "ap-south", "--zone", "asia-southeast1-a", "--provider", "gcp", "--city", "SIN",
                "--gpus", "2", "--gpu-model", "A100"],
}
FAST = """probeIntervalSeconds: 0.5
summaryIntervalSeconds: 2
notReadyGraceSeconds: 2
tolerationSeconds: 1
statusPollSeconds: 0.5
heartbeatWriteSeconds: 5
cleanupIntervalSeconds: 1
connectTimeoutSeconds: 1
readTimeoutSeconds: 1.5
retries: 0
"""
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"
# Spread by water level even on an idle fleet (the default packs small workloads while the fleet is quiet).
SPREAD_PROFILE = "name: spread\nadjuster: {packBelow: 0.0, spreadAbove: 0.0}\n"


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1,
             what_else: Callable[[], Any] | None = None) -> T:
    """Poll until ``fn`` returns something truthy; fail with the last value (and ``what_else()``,
    some context) after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    context = f"; context: {what_else()!r}" if what_else is not None else ""
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}{context}")


@dataclass
class Member:
    name: str
    sim: SimProcess
    api: k8s.ApiClient

    def deployment(self, name: str, namespace: str = "default") -> Any:
        """The Deployment in this member (official client), None when absent."""
        try:
            return k8s.AppsV1Api(self.api).read_namespaced_deployment(name, namespace, _request_timeout=3)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def get(self, path: str) -> Any:
        """Any object as JSON (no model validation), None when absent."""
        try:
            resp = DynamicClient(self.api).request("get", path, serialize=False, _request_timeout=3)
            return json.loads(resp.data)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def fault(self, mode: str, ms: int = 0) -> None:
        self.sim.fault(mode, ms)


@dataclass
class Env:
    server: ServerProcess
    http: httpx.Client
    members: dict[str, Member]

    def binding(self, name: str) -> dict[str, Any] | None:
        r = self.http.get(f"{BINDINGS}/{name}")
        return r.json() if r.status_code == 200 else None

    def cluster(self, name: str) -> dict[str, Any]:
        return dict(self.http.get(f"/apis/multicluster.io/v1alpha1/clusters/{name}").json())

    def ready(self, name: str) -> str | None:
        for c in (self.cluster(name).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                return str(c.get("status"))
        return None

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(path, json=obj)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def delete(self, path: str) -> None:
        r = self.http.delete(path)
        assert r.status_code in (200, 202, 404), r.text

    def placed_binding(self, name: str, workload: str, placement: dict[str, int], replicas: int | None = None,
                       namespace: str = "default", extra_spec: dict[str, Any] | None = None) -> dict[str, Any]:
        """A Binding that is already scheduled (as the scheduler would write it), so the scheduler leaves it.

        ``spec.replicas`` defaults to 0: a placement with more replicas than the spec asks for is never
        "partial", so the scheduler does not retry it when the test changes the placement by hand."""
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        body = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding", "metadata": {"name": name},
                "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload,
                                      "namespace": namespace},
                         "replicas": replicas if replicas is not None else 0,
                         **(extra_spec or {})},
                "status": {"phase": "Scheduled", "scheduledGeneration": 1, "scheduledTime": now,
                           "placement": [{"cluster": c, "replicas": n} for c, n in placement.items()]}}
        return self.create(BINDINGS, body)

    def place(self, name: str, placement: dict[str, int]) -> None:
        """Change a placed binding's placement as the scheduler does (status write, phase Scheduled)."""
        for _ in range(20):
            b = self.binding(name)
            assert b is not None
            st = b.setdefault("status", {})
            st["placement"] = [{"cluster": c, "replicas": n} for c, n in placement.items()]
            st["phase"] = "Scheduled"
            st["scheduledTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
            r = self.http.put(f"{BINDINGS}/{name}/status", json=b)
            if r.status_code == 200:
                return
            assert r.status_code == 409, r.text
        raise AssertionError("could not write the placement")

    def scheduler_levels(self) -> dict[str, float]:
        """Each member's water level as the scheduler decides on it (rate-controlled: after a workload
        another test deleted, its load stays there for up to 30 s)."""
        clusters = self.http.get("/api/v1/monitor/realtime").json()["clusters"]
        return {n: float(clusters[n]["schedulerWaterLevel"] or 0.0) for n in self.members if n in clusters}

    def copies(self, workload: str, namespace: str = "default") -> dict[str, int]:
        """Replicas of the workload's copy in each member that has one."""
        out = {}
        for name, m in self.members.items():
            d = m.deployment(workload, namespace)
            if d is not None:
                out[name] = int(d.spec.replicas or 0)
        return out


def karmada_policy(name: str, cluster: str = "aws-dfw") -> str:
    """A Karmada PropagationPolicy (YAML) placing the Deployment ``name`` of ``default`` on ``cluster``."""
    return f"""
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]
  placement: {{clusterAffinity: {{clusterNames: [{cluster}]}}}}
"""


def deployment(name: str, replicas: int, *, namespace: str = "default", cpu: str = "500m", memory: str = "256Mi",
               image: str = "nginx:1.25", **template_spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": image,
                                                           "resources": {"requests": {"cpu": cpu,
                                                                                      "memory": memory}}}],
                                           **template_spec}}}}


def deploy_path(namespace: str = "default", name: str | None = None) -> str:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    return f"{base}/{name}" if name else base


@pytest.fixture(scope="package")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("members-e2e")
    sims = {n: SimProcess(n, root / "sims", args).start() for n, args in SIMS.items()}
    data = root / "server"
    data.mkdir()
    (data / "members.yaml").write_text(FAST)
    (data / "scheduler-profile.yaml").write_text(SPREAD_PROFILE)
    server = ServerProcess(data)
    try:
        server.start()
        for s in sims.values():
            s.wait_ready(60)
        for n, s in sims.items():
            done = server.run_cli("cluster", "join", n, "--kubeconfig", str(s.kubeconfig), "--label", f"site={n}",
                                  "--server", server.url, "--token", server.token("admin"))
            assert done.returncode == 0, done.stderr
            assert f"cluster/{n} joined" in done.stdout
        members = {n: Member(n, s, k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False))
                   for n, s in sims.items()}
        with server.client(timeout=10) as http:
            e = Env(server, http, members)
            wait_for(lambda: all(e.ready(n) == "True" for n in sims), 20, "every member Ready")
            yield e
    finally:
        for s in sims.values():
            with contextlib.suppress(Exception):  # it may be gone already
                s.fault("up")
        server.stop(check=False)
        for s in sims.values():
            s.stop()


@pytest.fixture(scope="module")
def kubectl(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """The real kubectl against the members' control plane (skipped when not installed)."""
    binary = kubectl_binary()
    if binary is None:
        if os.environ.get("DRODS_REQUIRE_KUBECTL") == "1":
            pytest.fail("kubectl not found")
        pytest.skip("kubectl not found (apt-get install kubernetes-client, or set DRODS_KUBECTL)")
    yield Kubectl(binary, env.server, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture
def fresh(env: Env) -> Iterator[Env]:
    """The env with every member healthy again afterwards (fault tests restore what they broke)."""
    yield env
    for m in env.members.values():
        m.fault("up")
    wait_for(lambda: all(env.ready(n) == "True" and not env.cluster(n)["spec"].get("taints") for n in env.members),
             20, "every member Ready and untainted again")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
