"""`drods sim` as a subprocess, driven only by the official Kubernetes client and kubectl."""

from __future__ import annotations

import contextlib
import shutil
import signal
import ssl
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from drods.model.quantity import cores, gib
from drods.sim.harness import SimProcess
from tests.free_port import free_port
from tests.sim.util import api_client, apps_api, batch_api, core_api, custom_api, running_sims, wait_until

pytestmark = pytest.mark.timeout(120)

SIM_A = ["--nodes", "3", "--node-cpu", "4", "--node-memory", "8Gi", "--gpus", "1", "--gpu-model", "T4",
         "--region", "eu-west-1", "--zone", "eu-west-1b", "--provider", "aws", "--city", "LHR",
         "--job-seconds", "0.5"]


@pytest.fixture(scope="module")
def fault_port() -> int:
    """A port for the fault sim, picked just before it starts (a port picked when the module is
    collected may be taken by another test's server by the time this module runs)."""
    return free_port()


@pytest.fixture(scope="module")
def control_port() -> int:
    """The fault sim's loopback control port, chosen as its API port is."""
    return free_port()


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory, fault_port: int,
         control_port: int) -> Iterator[dict[str, SimProcess]]:
    state = tmp_path_factory.mktemp("sims")
    with running_sims(state, {
        "sim-a": SIM_A,  # the others take any free port (--port 0, the default)
        "sim-busy": ["--nodes", "2", "--node-cpu", "8", "--node-memory", "16Gi", "--preload", "0.7"],
        "sim-fault": ["--nodes", "1", "--port", str(fault_port), "--control-port", str(control_port)],
    }) as s:
        yield s


@pytest.fixture(scope="module")
def a(sims: dict[str, SimProcess]) -> client.ApiClient:
    return api_client(sims["sim-a"])


def deployment(name: str, replicas: int, cpu: str = "500m", memory: str = "256Mi", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, **extra},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                                       "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
    }


def pods_of(api: client.ApiClient, app: str, ns: str = "default") -> list[Any]:
    return list(core_api(api).list_namespaced_pod(ns, label_selector=f"app={app}").items)


# ---- nodes -------------------------------------------------------------------------------------


def test_nodes_have_capacity_labels_and_ready(a: client.ApiClient) -> None:
    nodes = core_api(a).list_node().items
    assert sorted(n.metadata.name for n in nodes) == ["sim-a-node-0", "sim-a-node-1", "sim-a-node-2"]
    for n in nodes:
        assert cores(n.status.capacity["cpu"]) == 4
        assert gib(n.status.allocatable["memory"]) == 8
        assert n.status.capacity["nvidia.com/gpu"] == "1"
        labels = n.metadata.labels
        assert labels["topology.kubernetes.io/region"] == "eu-west-1"
        assert labels["topology.kubernetes.io/zone"] == "eu-west-1b"
        assert labels["multicluster.io/provider"] == "aws"
        assert labels["multicluster.io/city"] == "LHR"
        assert labels["nvidia.com/gpu.product"] == "T4"
        assert labels["node.kubernetes.io/instance-type"]
        assert [c.status for c in n.status.conditions if c.type == "Ready"] == ["True"]
    names = {ns.metadata.name for ns in core_api(a).list_namespace().items}
    assert {"default", "kube-system"} <= names
    assert client.VersionApi(a).get_code().git_version.startswith("v1.")


# ---- workloads ---------------------------------------------------------------------------------


def test_deployment_runs_scales_and_cascades(a: client.ApiClient) -> None:
    apps = apps_api(a)
    apps.create_namespaced_deployment("default", deployment("web", 3))
    dep = wait_until(lambda: (d := apps.read_namespaced_deployment("web", "default")).status.ready_replicas == 3
                     and d, what="3 ready replicas")
    assert dep.status.replicas == 3 and dep.status.available_replicas == 3 and dep.status.updated_replicas == 3
    assert dep.status.observed_generation == dep.metadata.generation
    pods = pods_of(a, "web")
    assert len(pods) == 3 and all(p.status.phase == "Running" and p.spec.node_name for p in pods)
    assert all(p.metadata.owner_references[0].uid == dep.metadata.uid for p in pods)

    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_until(lambda: len(pods_of(a, "web")) == 1, what="scale down to 1 pod")
    wait_until(lambda: apps.read_namespaced_deployment("web", "default").status.replicas == 1, what="status")

    apps.delete_namespaced_deployment("web", "default")
    wait_until(lambda: not pods_of(a, "web"), what="pods deleted with their deployment")


def test_what_does_not_fit_stays_pending_with_a_reason(a: client.ApiClient) -> None:
    apps = apps_api(a)
    apps.create_namespaced_deployment("default", deployment("huge", 2, cpu="5"))

    def pending() -> list[Any]:
        pods = pods_of(a, "huge")
        ok = len(pods) == 2 and all(p.status.phase == "Pending" and p.status.conditions for p in pods)
        return pods if ok else []

    pods = wait_until(pending, what="2 pending pods with conditions")
    cond = pods[0].status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")
    assert "Insufficient cpu" in cond.message
    dep = apps.read_namespaced_deployment("huge", "default")
    assert not dep.status.ready_replicas and dep.status.unavailable_replicas == 2
    apps.delete_namespaced_deployment("huge", "default")
    wait_until(lambda: not pods_of(a, "huge"), what="pending pods deleted")


def bound_pods(a: client.ApiClient, app: str, n: int) -> list[Any]:
    """``app``'s pods once there are ``n`` of them, each bound to a node."""
    def bound() -> list[Any]:
        pods = pods_of(a, app)
        return pods if len(pods) == n and all(p.spec.node_name for p in pods) else []

    pods: list[Any] = wait_until(bound, what=f"{n} bound pods of {app}")
    return pods


def test_first_fit_by_requests(a: client.ApiClient) -> None:
    """Three 1.5-core pods on 4-core nodes: two fit on the first node, the third goes to the next."""
    apps = apps_api(a)
    apps.create_namespaced_deployment("default", deployment("ff", 3, cpu="1500m"))
    pods = bound_pods(a, "ff", 3)
    assert sorted(p.spec.node_name for p in pods) == ["sim-a-node-0", "sim-a-node-0", "sim-a-node-1"]
    apps.delete_namespaced_deployment("ff", "default")
    wait_until(lambda: not pods_of(a, "ff"), what="cleanup")


def test_pods_bound_in_an_earlier_pass_still_take_their_room(a: client.ApiClient) -> None:
    """Two 1.5-core pods bound, then one more: a later pass subtracts what the first two requested
    (kept from the pass that bound them) and binds the third on the next node."""
    apps = apps_api(a)
    apps.create_namespaced_deployment("default", deployment("later", 2, cpu="1500m"))
    bound_pods(a, "later", 2)
    apps.patch_namespaced_deployment("later", "default", {"spec": {"replicas": 3}})
    pods = bound_pods(a, "later", 3)
    assert sorted(p.spec.node_name for p in pods) == ["sim-a-node-0", "sim-a-node-0", "sim-a-node-1"]
    apps.delete_namespaced_deployment("later", "default")
    wait_until(lambda: not pods_of(a, "later"), what="cleanup")


def test_statefulset_and_job_status_move(a: client.ApiClient) -> None:
    apps, batch = apps_api(a), batch_api(a)
    sts = deployment("db", 2)
    sts.update(kind="StatefulSet")
    sts["spec"]["serviceName"] = "db"
    apps.create_namespaced_stateful_set("default", sts)
    wait_until(lambda: apps.read_namespaced_stateful_set("db", "default").status.ready_replicas == 2, what="sts ready")
    assert sorted(p.metadata.name for p in pods_of(a, "db")) == ["db-0", "db-1"]

    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"completions": 2, "parallelism": 1, "template": {"metadata": {"labels": {"app": "once"}}, "spec": {
               "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}
    batch.create_namespaced_job("default", job)
    done = wait_until(lambda: (j := batch.read_namespaced_job("once", "default")).status.succeeded == 2 and j,
                      what="job complete")
    assert any(c.type == "Complete" and c.status == "True" for c in done.status.conditions)
    assert all(p.status.phase == "Succeeded" for p in pods_of(a, "once"))
    apps.delete_namespaced_stateful_set("db", "default")
    batch.delete_namespaced_job("once", "default")
    wait_until(lambda: not pods_of(a, "db") and not pods_of(a, "once"), what="cleanup")


def test_namespaces_must_exist_and_deletion_cascades(a: client.ApiClient) -> None:
    core, apps = core_api(a), apps_api(a)
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("team-x", deployment("w", 1))
    assert err.value.status == 404
    core.create_namespace({"metadata": {"name": "team-x"}})
    apps.create_namespaced_deployment("team-x", deployment("w", 2))
    core.create_namespaced_config_map("team-x", {"metadata": {"name": "cfg"}, "data": {"k": "v"}})
    wait_until(lambda: len(pods_of(a, "w", "team-x")) == 2, what="pods in team-x")
    core.delete_namespace("team-x")
    wait_until(lambda: "team-x" not in {n.metadata.name for n in core.list_namespace().items}, what="namespace gone")
    assert not pods_of(a, "w", "team-x")
    assert not core.list_namespaced_config_map("team-x").items


def test_server_side_apply_creates_then_merges(a: client.ApiClient) -> None:
    body = deployment("ssa", 1)
    path = "/apis/apps/v1/namespaces/default/deployments/ssa"
    for replicas in (1, 2):
        body["spec"]["replicas"] = replicas
        a.call_api(*a.param_serialize("PATCH", path, body=body, query_params=[("fieldManager", "test")],
                                      header_params={"Content-Type": "application/apply-patch+yaml"},
                                      auth_settings=["BearerToken"])).read()
    wait_until(lambda: len(pods_of(a, "ssa")) == 2, what="applied replicas")
    apps_api(a).delete_namespaced_deployment("ssa", "default")


def test_rbac_objects_a_policy_propagates_are_served(a: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(a)
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    rbac.create_cluster_role({"metadata": {"name": "pod-reader"}, "rules": [rule]})
    rbac.create_namespaced_role("default", {"metadata": {"name": "cm-reader"}, "rules": [rule]})
    rbac.create_namespaced_role_binding("default", {
        "metadata": {"name": "cm-reader"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                       "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]})
    assert rbac.read_cluster_role("pod-reader").rules[0].verbs == ["get", "list"]
    assert [r.metadata.name for r in rbac.list_namespaced_role_binding("default").items] == ["cm-reader"]
    rbac.delete_cluster_role("pod-reader")
    with pytest.raises(ApiException) as gone:
        rbac.read_cluster_role("pod-reader")
    assert gone.value.status == 404


# ---- usage and metrics --------------------------------------------------------------------------


def test_metrics_api_reports_usage(a: client.ApiClient) -> None:
    apps = apps_api(a)
    apps.create_namespaced_deployment("default", deployment("busy", 2, cpu="1", memory="1Gi"))
    wait_until(lambda: apps.read_namespaced_deployment("busy", "default").status.ready_replicas == 2, what="ready")
    custom = custom_api(a)
    nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")["items"]
    assert len(nodes) == 3
    total = sum(cores(n["usage"]["cpu"]) for n in nodes)
    assert total == pytest.approx(2 * 1 * 0.5, abs=0.01)  # default usage: half the CPU request
    pods = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default", "pods",
                                                label_selector="app=busy")["items"]
    assert len(pods) == 2
    assert gib(pods[0]["containers"][0]["usage"]["memory"]) == pytest.approx(0.6, abs=0.01)
    apps.delete_namespaced_deployment("busy", "default")


def test_prometheus_metrics(sims: dict[str, SimProcess]) -> None:
    sim = sims["sim-a"]
    cfg = client.Configuration()
    config.load_kube_config(str(sim.kubeconfig), client_configuration=cfg)
    auth = cfg.get_api_key_with_prefix("BearerToken", alias="authorization") or ""
    text = httpx.get(f"{sim.server}/metrics", headers={"Authorization": auth},
                     verify=ssl.create_default_context(cafile=cfg.ssl_ca_cert), timeout=5).text
    assert 'kube_node_status_allocatable{cluster="sim-a",node="sim-a-node-0",resource="cpu",unit="core"} 4.0' in text
    assert "node_memory_MemAvailable_bytes{" in text and 'node_cpu_seconds_total{cluster="sim-a"' in text
    assert 'drods_sim_fault{cluster="sim-a",mode="up"} 1.0' in text


def test_preload_fills_nodes_with_another_tenant(sims: dict[str, SimProcess]) -> None:
    api = api_client(sims["sim-busy"])
    nodes = custom_api(api).list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")["items"]
    assert [cores(n["usage"]["cpu"]) for n in nodes] == [pytest.approx(5.6, abs=0.01)] * 2
    assert [gib(n["usage"]["memory"]) for n in nodes] == [pytest.approx(16 * 0.7, abs=0.01)] * 2
    tenant = core_api(api).list_namespaced_pod("other-tenant").items
    assert len(tenant) == 2 and all(p.status.phase == "Running" for p in tenant)
    # 2.4 cores are left per node, so a 3-core pod fits nowhere
    apps_api(api).create_namespaced_deployment("default", deployment("big", 1, cpu="3"))
    wait_until(lambda: (ps := pods_of(api, "big")) and ps[0].status.conditions
               and ps[0].status.conditions[0].reason == "Unschedulable", what="pending")


# ---- kubectl -------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_get_apply_top(sims: dict[str, SimProcess], tmp_path: Path) -> None:
    kc = str(sims["sim-a"].kubeconfig)

    def kubectl(*args: str) -> str:
        out = subprocess.run(["kubectl", "--kubeconfig", kc, "--request-timeout=10s", *args], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert kubectl("get", "nodes", "-o", "name").split() == [f"node/sim-a-node-{i}" for i in range(3)]
    manifest = tmp_path / "dep.yaml"
    import yaml

    manifest.write_text(yaml.safe_dump(deployment("kc", 2)))
    assert "created" in kubectl("apply", "-f", str(manifest))
    assert "unchanged" in kubectl("apply", "-f", str(manifest))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifest))
    wait_until(lambda: kubectl("get", "deploy", "kc", "-o", "jsonpath={.status.readyReplicas}") == "2",
               what="kubectl sees 2 ready")
    kubectl("scale", "deploy/kc", "--replicas=1")
    wait_until(lambda: kubectl("get", "deploy", "kc", "-o", "jsonpath={.status.replicas}") == "1", what="scaled")
    top = kubectl("top", "nodes")
    assert "sim-a-node-0" in top and "CPU" in top
    kubectl("describe", "node", "sim-a-node-0")
    kubectl("delete", "-f", str(manifest))
    def gone() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", kc, "get", "deploy", "kc"], capture_output=True, text=True,
                              timeout=30)

    wait_until(lambda: gone().returncode == 1, what="the Deployment gone")
    assert 'deployments.apps "kc" not found' in gone().stderr  # in kube-apiserver's words, as a member's


# ---- faults ------------------------------------------------------------------------------------


def _fault_client(sim: SimProcess) -> Any:
    cfg = client.Configuration()
    config.load_kube_config(str(sim.kubeconfig), client_configuration=cfg)
    cfg.retries = False  # measure one attempt, not urllib3's retries
    return core_api(client.ApiClient(cfg))


def _timed(fn: Any) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test inspects it
        return time.monotonic() - started, e
    return time.monotonic() - started, None


def test_faults_down_slow_partition_up(sims: dict[str, SimProcess], fault_port: int, control_port: int) -> None:
    sim = sims["sim-fault"]
    assert sim.server == f"https://127.0.0.1:{fault_port}"
    assert sim.state["controlPort"] == control_port  # every port it listens on, chosen by its operator
    core = _fault_client(sim)
    assert len(core.list_node(_request_timeout=(2, 5)).items) == 1

    sim.fault("down")
    elapsed, err = _timed(lambda: core.list_node(_request_timeout=(2, 5)))
    assert isinstance(err, urllib3.exceptions.HTTPError | OSError), err
    assert elapsed < 1.0, "a down cluster refuses connections at once"

    sim.fault("up")
    assert len(core.list_node(_request_timeout=(2, 5)).items) == 1

    sim.fault("slow", 400)
    elapsed, err = _timed(lambda: core.list_node(_request_timeout=(2, 5)))
    assert err is None and elapsed >= 0.4

    # a watch open when the partition comes hears nothing more, and does not end, until it heals
    resp = core.list_node(watch=True, timeout_seconds=2, _preload_content=False, _request_timeout=(2, 30))
    ended = threading.Event()

    def drain() -> None:
        try:
            for _ in resp.stream(64):
                pass
        except urllib3.exceptions.HTTPError:
            pass  # cut short once the partition heals: it ended all the same
        finally:
            ended.set()

    threading.Thread(target=drain, daemon=True).start()
    sim.fault("partition")
    elapsed, err = _timed(lambda: core.list_node(_request_timeout=(1, 1)))
    assert isinstance(err, urllib3.exceptions.ReadTimeoutError | urllib3.exceptions.TimeoutError), err
    assert 0.9 <= elapsed < 3
    assert not ended.wait(3), "a watch of a partitioned member ended as if it had answered"

    sim.fault("up")
    elapsed, err = _timed(lambda: core.list_node(_request_timeout=(2, 5)))
    assert err is None and elapsed < 1.0
    assert ended.wait(10), "the watch goes on once the partition heals"


def test_a_sim_signalled_again_while_it_stops_still_stops_cleanly(tmp_path: Path) -> None:
    """`drods dev` stopped by a process-group kill: its members get SIGTERM from the kill and again
    from `drods dev` stopping them. A signal during the stop must not cut it short."""
    sim = SimProcess("sim-twice", tmp_path, ["--nodes", "1"]).start().wait_ready(60)
    assert sim.proc is not None
    state_file = tmp_path / "sim-twice.json"
    deadline = time.monotonic() + 30
    while state_file.exists() and time.monotonic() < deadline:  # removed first thing when it stops
        sim.proc.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    assert not state_file.exists(), "state file left behind"
    # and signalled on until it has exited: a signal while the interpreter exits must not kill it
    while sim.proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            sim.proc.send_signal(signal.SIGTERM)
        time.sleep(0.001)
    assert sim.stop() == 0, sim.log_tail()


def test_a_sims_store_and_keys_are_its_owners_alone(sims: dict[str, SimProcess]) -> None:
    """Its store holds what was applied to it, Secrets included: 0700 / 0600 as the control plane's."""
    data = sims["sim-a"].state_dir / "sim-a"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = [p for p in data.iterdir() if p.is_file() and p.suffix != ".crt"]  # certificates are public
    assert {"sim.db", "jwt.key", "ca.key"} <= {p.name for p in files}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), [(p.name, oct(p.stat().st_mode)) for p in files]
