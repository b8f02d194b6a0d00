"""The built-in kinds DRO-DS propagates (docs/resources.md) that a real cluster serves and a sim
must serve too (else a policy selecting them fails with "the cluster does not serve this kind"):
discovery lists each with its scope and short names, the official client creates, reads and
deletes one of each, a ReplicaSet runs its pods, and kubectl prints them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from drods.sim.harness import SimProcess
from tests.sim.util import api_client, apps_api, core_api, running_sims, wait_until

pytestmark = pytest.mark.timeout(120)
Obj = dict[str, Any]
NS = "props"

# (apiVersion, kind, plural, namespaced, short names, an object of the kind as a user writes it)
KINDS: list[tuple[str, str, str, bool, tuple[str, ...], Obj]] = [
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, ("hpa",),
     {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
               "minReplicas": 1, "maxReplicas": 4,
               "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                   "type": "Utilization", "averageUtilization": 70}}}]}}),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",),
     {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, ("netpol",),
     {"spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}}),
    ("v1", "LimitRange", "limitranges", True, ("limits",),
     {"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}),
    ("v1", "PodTemplate", "podtemplates", True, (),
     {"template": {"metadata": {"labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}),
    ("v1", "ReplicationController", "replicationcontrollers", True, ("rc",),
     {"spec": {"replicas": 0, "selector": {"app": "rc"},
               "template": {"metadata": {"labels": {"app": "rc"}},
                            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}),
    ("v1", "Endpoints", "endpoints", True, ("ep",),
     {"subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "csistoragecapacities", True, (),
     {"storageClassName": "fast", "capacity": "100Gi"}),
    ("v1", "PersistentVolume", "persistentvolumes", False, ("pv",),
     {"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", False, ("sc",),
     {"provisioner": "example.com/fast", "reclaimPolicy": "Delete"}),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", False, (), {"spec": {"attachRequired": False}}),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", False, (),
     {"spec": {"controller": "example.com/ingress"}}),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, ("pc",),
     {"value": 1000, "globalDefault": False, "description": "batch"}),
    ("apps/v1", "ReplicaSet", "replicasets", True, ("rs",),
     {"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "rs0"}},
               "template": {"metadata": {"labels": {"app": "rs0"}},
                            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}),
]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sims(tmp_path_factory.mktemp("sims"), {"sim-kinds": ["--nodes", "2"]}) as sims:
        yield sims["sim-kinds"]


@pytest.fixture(scope="module")
def api(sim: SimProcess) -> client.ApiClient:
    api = api_client(sim)
    core_api(api).create_namespace({"metadata": {"name": NS}})
    return api


@pytest.fixture(scope="module")
def discovered(api: client.ApiClient) -> dict[tuple[str, str], Obj]:
    """(groupVersion, kind) -> the resource discovery lists, read as kubectl api-resources reads it:
    /api/v1, then each version /apis names."""
    dyn = DynamicClient(api)
    paths = ["/api/v1", *(f"/apis/{v['groupVersion']}" for g in dyn.request("GET", "/apis").to_dict()["groups"]
                          for v in g["versions"])]
    out: dict[tuple[str, str], Obj] = {}
    for path in paths:
        data = dyn.request("GET", path).to_dict()
        out.update({(data["groupVersion"], r["kind"]): r for r in data["resources"] if "/" not in r["name"]})
    return out


@pytest.mark.parametrize("api_version, kind, plural, namespaced, short_names, body",
                         KINDS, ids=[k[1] for k in KINDS])
def test_discovery_lists_it_with_its_scope_and_short_names(discovered: dict[tuple[str, str], Obj], api_version: str,
                                                           kind: str, plural: str, namespaced: bool,
                                                           short_names: tuple[str, ...], body: Obj) -> None:
    r = discovered.get((api_version, kind))
    assert r is not None, f"{api_version} {kind} not in discovery"
    assert (r["name"], r["namespaced"]) == (plural, namespaced)
    assert tuple(r.get("shortNames") or ()) == short_names
    assert {"create", "get", "list", "delete", "watch"} <= set(r["verbs"])


@pytest.mark.parametrize("api_version, kind, plural, namespaced, short_names, body",
                         KINDS, ids=[k[1] for k in KINDS])
def test_created_read_back_listed_and_deleted(api: client.ApiClient, api_version: str, kind: str, plural: str,
                                              namespaced: bool, short_names: tuple[str, ...], body: Obj) -> None:
    dyn = DynamicClient(api)
    resource = dyn.resources.get(api_version=api_version, kind=kind)
    assert resource.namespaced is namespaced
    name = f"one-{plural}"
    meta: Obj = {"name": name, "labels": {"made-by": "test"}}
    ns = NS if namespaced else None
    created = resource.create(body={"apiVersion": api_version, "kind": kind, "metadata": meta, **body},
                              namespace=ns).to_dict()
    assert created["metadata"]["uid"] and created["metadata"].get("namespace") == ns
    got = resource.get(name=name, namespace=ns).to_dict()
    assert (got["apiVersion"], got["kind"], got["metadata"]["name"]) == (api_version, kind, name)
    for field, value in body.items():  # stored as given (a dict field may gain defaults, never lose one)
        stored = {k: got[field].get(k) for k in value} if isinstance(value, dict) else got[field]
        assert stored == value, (field, got[field])
    listed = resource.get(namespace=ns, label_selector="made-by=test").to_dict()
    assert [o["metadata"]["name"] for o in listed["items"]] == [name]
    resource.delete(name=name, namespace=ns)
    wait_until(lambda: _gone(resource, name, ns), 10, what=f"{kind} {name} deleted")


def _gone(resource: Any, name: str, ns: str | None) -> bool:
    try:
        resource.get(name=name, namespace=ns)
    except NotFoundError:
        return True
    return False


def test_a_replica_set_runs_its_pods_and_reports_them_ready(api: client.ApiClient) -> None:
    apps, core = apps_api(api), core_api(api)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "front"},
          "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "front"}},
                   "template": {"metadata": {"labels": {"app": "front"}},
                                "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}
    made = apps.create_namespaced_replica_set(NS, rs)
    assert made.status.replicas == 0  # what a new one reports before its pods exist
    wait_until(lambda: (apps.read_namespaced_replica_set("front", NS).status.ready_replicas or 0) == 3, 20,
               what="3 ready replicas")
    status = apps.read_namespaced_replica_set("front", NS).status
    assert (status.replicas, status.available_replicas, status.fully_labeled_replicas) == (3, 3, 3)
    pods = core.list_namespaced_pod(NS, label_selector="app=front").items
    assert len(pods) == 3 and all(p.status.phase == "Running" and p.spec.node_name for p in pods)
    assert {(r.kind, r.name, r.controller) for p in pods for r in p.metadata.owner_references} == {
        ("ReplicaSet", "front", True)}
    assert all(p.metadata.name.startswith("front-") for p in pods)

    apps.patch_namespaced_replica_set_scale("front", NS, {"spec": {"replicas": 1}})
    wait_until(lambda: len(core.list_namespaced_pod(NS, label_selector="app=front").items) == 1, 20,
               what="scaled to 1 pod")
    wait_until(lambda: apps.read_namespaced_replica_set("front", NS).status.replicas == 1, 20, what="status 1")
    assert apps.read_namespaced_replica_set_scale("front", NS).status.replicas == 1

    apps.delete_namespaced_replica_set("front", NS)
    wait_until(lambda: not core.list_namespaced_pod(NS, label_selector="app=front").items, 20,
               what="its pods deleted with it")


def test_a_namespace_deletion_takes_the_stored_kinds_with_it(api: client.ApiClient) -> None:
    core, dyn = core_api(api), DynamicClient(api)
    core.create_namespace({"metadata": {"name": "short-lived"}})
    hpa = dyn.resources.get(api_version="autoscaling/v2", kind="HorizontalPodAutoscaler")
    pdb = dyn.resources.get(api_version="policy/v1", kind="PodDisruptionBudget")
    hpa.create(namespace="short-lived", body={"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                                              "metadata": {"name": "h"}, **KINDS[0][5]})
    pdb.create(namespace="short-lived", body={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                              "metadata": {"name": "p"}, **KINDS[1][5]})
    core.delete_namespace("short-lived")
    wait_until(lambda: "short-lived" not in {n.metadata.name for n in core.list_namespace().items}, 30,
               what="the namespace gone")
    assert hpa.get(namespace="short-lived").to_dict()["items"] == []
    assert pdb.get(namespace="short-lived").to_dict()["items"] == []


def test_kubectl_api_resources_and_get_by_short_name(sim: SimProcess, api: client.ApiClient) -> None:
    binary = os.environ.get("DRODS_KUBECTL") or shutil.which("kubectl")
    if binary is None:
        if os.environ.get("DRODS_REQUIRE_KUBECTL") == "1":
            pytest.fail("kubectl not found")
        pytest.skip("kubectl not installed")

    def kubectl(*args: str) -> str:
        done = subprocess.run([binary, "--kubeconfig", str(sim.kubeconfig), *args], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    lines = kubectl("api-resources", "--no-headers").splitlines()
    listed = {line.split()[0] for line in lines}
    assert {k[2] for k in KINDS} <= listed, sorted({k[2] for k in KINDS} - listed)
    dyn = DynamicClient(api)
    dyn.resources.get(api_version="autoscaling/v2", kind="HorizontalPodAutoscaler").create(
        namespace=NS, body={"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                            "metadata": {"name": "web-hpa"}, **KINDS[0][5]})
    dyn.resources.get(api_version="scheduling.k8s.io/v1", kind="PriorityClass").create(
        body={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
              "value": 100})
    out = kubectl("get", "hpa", "-n", NS)
    assert out.split()[:2] == ["NAME", "AGE"] and "web-hpa" in out, out
    assert "high" in kubectl("get", "pc")
    for short in ("pdb", "netpol", "limits", "sc", "rs", "ep", "pv", "rc", "podtemplates", "ingressclasses",
                  "csidrivers", "csistoragecapacities"):
        kubectl("get", short, "-A")  # served: exit 0 ("No resources found" or a table)
