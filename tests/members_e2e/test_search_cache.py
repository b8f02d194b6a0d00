"""Karmada's search cache against real members: a ResourceRegistry applied with kubectl caches the
Deployments of the clusters it selects (listed and watched through the official client), served at
Karmada's search and proxy paths with the cluster each object came from; a cluster its selector
excludes is absent, and deleting the registry empties the cache."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for

CACHE = "/apis/search.karmada.io/v1alpha1/search/cache"
PROXY = "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy"
FROM = "resource.karmada.io/cached-from-cluster"
COLUMN = ".metadata.annotations.resource\\.karmada\\.io/cached-from-cluster"  # kubectl's escaped dots
REGISTRY = """
apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata:
  name: deployments-but-sin
spec:
  targetCluster:
    clusterNames: [aws-dfw, azure-lhr, gcp-sin]
    exclude: [gcp-sin]
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      namespace: default
"""


def _cached(env: Env, path: str) -> list[dict[str, Any]]:
    r = env.http.get(f"{CACHE}{path}")
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def _clusters_of(items: list[dict[str, Any]], name: str) -> set[str]:
    return {o["metadata"]["annotations"][FROM] for o in items if o["metadata"]["name"] == name}


def test_a_registry_caches_its_clusters_deployments_until_deleted(env: Env, kubectl: Kubectl) -> None:
    env.create(deploy_path(), {**(d := deployment("searched", 3)), "metadata": {**d["metadata"],
                                                                            "labels": {"app": "searched"}}})
    env.placed_binding("searched", "searched", {"aws-dfw": 1, "azure-lhr": 1, "gcp-sin": 1})
    wait_for(lambda: set(env.copies("searched")) == {"aws-dfw", "azure-lhr", "gcp-sin"}, 15, "the three copies")
    kubectl.run("apply", "-f", "-", input=REGISTRY)

    # found through the cache with the member it came from; the excluded cluster is not cached
    wait_for(lambda: _clusters_of(_cached(env, "/apis/apps/v1/deployments"), "searched") == {"aws-dfw", "azure-lhr"},
             20, "the Deployment cached from aws-dfw and azure-lhr",
             what_else=lambda: env.http.get("/apis/search.karmada.io/v1alpha1/resourceregistries/"
                                            "deployments-but-sin").json().get("status"))
    listed = env.http.get(f"{CACHE}/apis/apps/v1/namespaces/default/deployments?labelSelector=app%3Dsearched").json()
    assert listed["kind"] == "DeploymentList" and listed["apiVersion"] == "apps/v1"
    assert {o["metadata"]["annotations"][FROM] for o in listed["items"]} == {"aws-dfw", "azure-lhr"}
    assert all(o["kind"] == "Deployment" and o["spec"]["replicas"] == 1 for o in listed["items"])
    assert _cached(env, "/apis/apps/v1/deployments?labelSelector=app%3Dnobody") == []
    one = env.http.get(f"{CACHE}/apis/apps/v1/namespaces/default/deployments/searched").json()
    assert one["metadata"]["annotations"][FROM] in ("aws-dfw", "azure-lhr")
    raw = kubectl.run("get", "--raw", f"{CACHE}/apis/apps/v1/namespaces/default/deployments")
    assert '"resource.karmada.io/cached-from-cluster":"aws-dfw"' in raw.stdout.replace(" ", "")
    status = kubectl.run("get", "resourceregistries.v1alpha1.search.karmada.io", "deployments-but-sin",
                         "-o", "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}")
    assert status.stdout == "Ready=True"

    # what a member gets later reaches the cache through the watch, and leaves it when deleted there
    since = env.http.get(f"{CACHE}/apis/apps/v1/deployments").json()["metadata"]["resourceVersion"]
    apps = k8s.AppsV1Api(env.members["aws-dfw"].api)
    local = deployment("local-only", 1)
    local["metadata"]["labels"] = {"app": "local-only"}
    apps.create_namespaced_deployment("default", local, _request_timeout=5)
    wait_for(lambda: _clusters_of(_cached(env, "/apis/apps/v1/deployments"), "local-only") == {"aws-dfw"}, 15,
             "the member's own Deployment cached")
    apps.delete_namespaced_deployment("local-only", "default", _request_timeout=5)
    wait_for(lambda: not _clusters_of(_cached(env, "/apis/apps/v1/deployments"), "local-only"), 15,
             "the deleted Deployment gone from the cache")
    watched = env.http.get(f"{CACHE}/apis/apps/v1/namespaces/default/deployments?watch=true&resourceVersion={since}"
                           "&timeoutSeconds=1&labelSelector=app%3Dlocal-only")
    events = [json.loads(line) for line in watched.text.splitlines()]
    seen = [(e["type"], e["object"]["metadata"]["annotations"][FROM]) for e in events]
    assert seen[0] == ("ADDED", "aws-dfw") and seen[-1] == ("DELETED", "aws-dfw")  # a watch from the list's version

    # kubectl pointed at the proxy path lists the members' Deployments
    proxied = kubectl.run("--server", f"{env.server.url}{PROXY}", "get", "deployments", "-A",
                          "-o", f"custom-columns=NAME:.metadata.name,FROM:{COLUMN}")
    rows = {tuple(line.split()) for line in proxied.stdout.splitlines()[1:]}
    assert {("searched", "aws-dfw"), ("searched", "azure-lhr")} <= rows and ("searched", "gcp-sin") not in rows
    assert env.http.delete(f"{PROXY}/apis/apps/v1/namespaces/default/deployments/searched").status_code == 405

    # the registry deleted: its entries leave the cache
    kubectl.run("delete", "resourceregistries.v1alpha1.search.karmada.io", "deployments-but-sin")
    wait_for(lambda: not _clusters_of(_cached(env, "/apis/apps/v1/deployments"), "searched"), 15,
             "the cache emptied")
    gone = env.http.get(f"{CACHE}/apis/apps/v1/namespaces/default/deployments/searched")
    assert gone.status_code == 404 and gone.json()["kind"] == "Status"


ALL_CONFIGMAPS = """
apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata:
  name: configmaps-everywhere
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: ConfigMap
      namespace: search-down
"""


def _ready(env: Env, registry: str) -> dict[str, Any]:
    got = env.http.get(f"/apis/search.karmada.io/v1alpha1/resourceregistries/{registry}").json()
    return next((c for c in (got.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def test_a_member_going_away_blocks_nobody(fresh: Env, kubectl: Kubectl) -> None:
    env = fresh
    for m in env.members.values():
        k8s.CoreV1Api(m.api).create_namespace({"metadata": {"name": "search-down"}}, _request_timeout=5)
    kubectl.run("apply", "-f", "-", input=ALL_CONFIGMAPS)
    wait_for(lambda: _ready(env, "configmaps-everywhere").get("status") == "True", 20, "the registry Ready")
    env.members["azure-lhr"].fault("down")
    core = k8s.CoreV1Api(env.members["aws-dfw"].api)
    core.create_namespaced_config_map("search-down", {"metadata": {"name": "while-lhr-is-down"}}, _request_timeout=5)
    # the reachable members are still followed; the registry names the one it cannot reach
    wait_for(lambda: _clusters_of(_cached(env, "/api/v1/namespaces/search-down/configmaps"), "while-lhr-is-down")
             == {"aws-dfw"}, 15, "a reachable member's new ConfigMap cached while another is down")
    cond = wait_for(lambda: (c := _ready(env, "configmaps-everywhere")).get("status") == "False" and c, 20,
                    "the registry NotCached", what_else=lambda: _ready(env, "configmaps-everywhere"))
    assert cond["reason"] == "NotCached" and "azure-lhr: the cluster is unreachable" in cond["message"]
    env.members["azure-lhr"].fault("up")
    wait_for(lambda: _ready(env, "configmaps-everywhere").get("status") == "True", 20, "Ready again")
    kubectl.run("delete", "resourceregistries.v1alpha1.search.karmada.io", "configmaps-everywhere")
