"""Propagation against real members: placements the test writes itself, as the scheduler would."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.members_e2e.conftest import BINDINGS, Env, deploy_path, deployment, karmada_policy, wait_for

WORKS = "/apis/multicluster.io/v1alpha1/works"


def test_a_member_joined_again_under_another_name_is_refused(env: Env) -> None:
    """karmadactl join refuses the same cluster under a second name; joined twice, a divided workload
    counted two shares of which the member ran one."""
    first = env.cluster("aws-dfw")
    assert first["spec"].get("id"), first["spec"]  # read from the member at join: its kube-system UID
    assert len({env.cluster(n)["spec"]["id"] for n in env.members}) == len(env.members)
    done = env.server.run_cli("cluster", "join", "dup-dfw", "--kubeconfig", str(env.members["aws-dfw"].sim.kubeconfig),
                              "--server", env.server.url, "--token", env.server.token("admin"))
    assert done.returncode != 0 and "registered with name 'aws-dfw'" in done.stderr, (done.stdout, done.stderr)
    assert env.http.get("/api/v1/clusters/dup-dfw").status_code == 404


def test_join_reads_the_members_topology_and_health(env: Env) -> None:
    c = env.cluster("gcp-sin")
    assert {k: c["spec"].get(k) for k in ("region", "zone", "provider", "city", "syncMode")} == {
        "region": "ap-south", "zone": "asia-southeast1-a", "provider": "gcp", "city": "SIN", "syncMode": "Push"}
    assert c["spec"]["credentials"]["kubeconfig"] == "***redacted***"  # sealed at rest, never returned (SEC2)
    assert "gpu" in c["spec"]["capabilities"] and c["spec"]["gpuModels"] == ["A100"]
    assert c["metadata"]["labels"] == {"site": "gcp-sin"}
    st = c["status"]
    assert st["nodeSummary"] == {"totalNum": 3, "readyNum": 3} and st["kubernetesVersion"].startswith("v1.")
    ready = next(x for x in st["conditions"] if x["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastHeartbeatTime"]
    # the summary went through monitoring's pipeline as a kubernetes-sourced report
    flat = env.http.get("/api/v1/clusters/azure-lhr").json()
    live = flat["status"]["resources"]
    assert live["source"] == "kubernetes" and live["waterLevel"] >= 0.45  # preloaded to half
    assert env.cluster("azure-lhr")["status"]["resourceSummary"]["waterLevel"] >= 0.45
    table = env.server.run_cli("get", "clusters", "--server", env.server.url, "--token", env.server.token("admin"))
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:11] == ["NAME", "MODE", "REGION", "PROVIDER", "CITY", "READY", "VERSION", "NODES",
                           "CPU(ALLOC/USED)", "WATER", "HEARTBEAT"]
    row = next(line.split() for line in table.stdout.splitlines() if line.startswith("azure-lhr"))
    assert row[1:6] == ["Push", "eu-west", "azure", "LHR", "True"] and row[7] == "3/3"


def test_overrides_apply_only_to_the_named_cluster(env: Env) -> None:
    env.create("/apis/multicluster.io/v1alpha1/clusteroverridepolicies", {
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "ov-web"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "ov"}],
                 "overrides": [
                     {"clusterSelector": {"names": ["gcp-sin"]},
                      "fieldPatches": [{"path": "spec.template.spec.containers[0].resources.limits",
                                        "value": {"nvidia.com/gpu": 1}}]},
                     {"clusterSelector": {"labelSelector": {"matchLabels": {"site": "aws-dfw"}}},
                      "imageOverrider": [{"component": "Registry", "operator": "replace",
                                          "value": "mirror.dfw.example"}],
                      "labelsOverrider": [{"operator": "add", "value": {"tier": "edge"}}]}]}})
    env.create(deploy_path(), deployment("ov", 2))
    env.placed_binding("ov", "ov", {"aws-dfw": 1, "gcp-sin": 1})
    wait_for(lambda: env.copies("ov") == {"aws-dfw": 1, "gcp-sin": 1}, 10, "both copies")
    sin = env.members["gcp-sin"].deployment("ov")
    dfw = env.members["aws-dfw"].deployment("ov")
    assert sin.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
    assert sin.spec.template.spec.containers[0].image == "nginx:1.25"
    assert dfw.spec.template.spec.containers[0].resources.limits is None
    assert dfw.spec.template.spec.containers[0].image == "mirror.dfw.example/nginx:1.25"
    assert dfw.metadata.labels["tier"] == "edge" and "tier" not in (sin.metadata.labels or {})
    assert dfw.metadata.labels["multicluster.io/managed-by"] == "drods"
    assert dfw.metadata.annotations["multicluster.io/applied-overrides"] == "ov-web"
    # a policy change reaches the copies; removing the policy takes the override back
    env.delete("/apis/multicluster.io/v1alpha1/clusteroverridepolicies/ov-web")
    wait_for(lambda: env.members["aws-dfw"].deployment("ov").spec.template.spec.containers[0].image == "nginx:1.25",
             10, "override removed")
    env.delete(f"{BINDINGS}/ov")
    env.delete(deploy_path(name="ov"))
    wait_for(lambda: env.copies("ov") == {}, 10, "copies deleted")


def changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What an unexpected write changed, so a failure names its writer's field."""
    def flat(obj: Any, path: str = "") -> dict[str, Any]:
        if isinstance(obj, dict):
            return {k: v for key, val in obj.items() for k, v in flat(val, f"{path}.{key}").items()}
        if isinstance(obj, list):
            return {k: v for i, val in enumerate(obj) for k, v in flat(val, f"{path}[{i}]").items()}
        return {path: obj}
    old, new = flat(before), flat(after)
    return "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(old.keys() | new.keys())
                     if old.get(k) != new.get(k))


def test_status_aggregation_dependents_and_namespace(env: Env) -> None:
    ns = "shop"
    env.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    env.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                       "metadata": {"name": "cart-cfg", "namespace": ns},
                                                       "data": {"mode": "fast"}})
    env.create(f"/api/v1/namespaces/{ns}/services", {"apiVersion": "v1", "kind": "Service",
                                                     "metadata": {"name": "cart", "namespace": ns},
                                                     "spec": {"selector": {"app": "cart"},
                                                              "ports": [{"port": 80}]}})
    env.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                            "metadata": {"name": "cart-runner", "namespace": ns}})
    env.create(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "cart-data", "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    env.create(f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses", {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "cart", "namespace": ns},
        "spec": {"defaultBackend": {"service": {"name": "cart", "port": {"number": 80}}}}})
    d = deployment("cart", 5, namespace=ns)
    d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cart-cfg"}}]
    d["spec"]["template"]["spec"]["serviceAccountName"] = "cart-runner"
    d["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "cart-data"}}]
    env.create(deploy_path(ns), d)
    env.placed_binding("cart", "cart", {"aws-dfw": 3, "azure-lhr": 2}, namespace=ns)

    def running() -> dict | None:
        b = env.binding("cart")
        return b if b and b["status"].get("phase") == "Running" else None

    b = wait_for(running, 15, "binding Running")
    entries = {e["cluster"]: e for e in b["status"]["clusters"]}
    assert {c: (e["replicas"], e["applied"], e["readyReplicas"]) for c, e in entries.items()} == {
        "aws-dfw": (3, True, 3), "azure-lhr": (2, True, 2)}
    assert "v1/ConfigMap/shop/cart-cfg" in entries["aws-dfw"]["resources"]
    assert any(c["type"] == "Available" for c in entries["aws-dfw"]["conditions"])
    # the namespace was created in the member, and the dependents went along (same namespace)
    dfw = env.members["aws-dfw"]
    assert dfw.get(f"/api/v1/namespaces/{ns}")["metadata"]["labels"]["multicluster.io/managed-by"] == "drods"
    assert dfw.get(f"/api/v1/namespaces/{ns}/configmaps/cart-cfg")["data"] == {"mode": "fast"}
    assert dfw.get(f"/api/v1/namespaces/{ns}/services/cart") is not None
    assert dfw.get(f"/api/v1/namespaces/{ns}/serviceaccounts/cart-runner") is not None
    assert dfw.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/cart-data")["spec"]["accessModes"] == [
        "ReadWriteOnce"]
    assert dfw.get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/cart") is not None
    assert env.members["azure-lhr"].get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/cart") is not None
    assert env.members["gcp-sin"].get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/cart-data") is None
    assert env.members["gcp-sin"].get(f"/api/v1/namespaces/{ns}/configmaps/cart-cfg") is None
    # the template's status is the sum; where each instance runs (city codes, M1) is the Binding's
    tmpl = wait_for(lambda: (t := env.http.get(deploy_path(ns, "cart")).json())["status"].get("readyReplicas") == 5
                    and t, 10, "template status")
    st = tmpl["status"]
    assert (st["replicas"], st["availableReplicas"], st["observedGeneration"]) == (5, 5, 1)
    assert "clusters" not in st and "usage" not in st, st
    rows = (env.binding("cart") or {})["status"]["clusters"]
    assert [(c["cluster"], c["city"], c["replicas"], c["readyReplicas"]) for c in rows] == [
        ("aws-dfw", "DFW", 3, 3), ("azure-lhr", "LHR", 2, 2)]
    # kubectl-style table of the template
    out = env.server.run_cli("get", "deploy", "cart", "-n", ns, "--server", env.server.url,
                             "--token", env.server.token("admin")).stdout
    assert out.splitlines()[1].split()[:5] == ["cart", "5/5", "5", "5", "aws-dfw:3,azure-lhr:2"]
    # idempotent: nothing changes while nothing changes — once the usage read (every usagePollSeconds, 15 s,
    # at a cluster's poll: up to two periods for a new workload) has seen every copy's pods: until then its
    # next reading is a change, and is written
    def pods_counted() -> dict[str, Any] | None:
        b = env.binding("cart") or {}
        return b if all((e.get("usage") or {}).get("pods") == e["replicas"] for e in b["status"]["clusters"]) \
            else None

    before = wait_for(pods_counted, 45, "every copy's pods in the Binding's usage",
                      what_else=lambda: [(e["cluster"], e["replicas"], e.get("usage"))
                                         for e in (env.binding("cart") or {})["status"]["clusters"]])
    gen = dfw.deployment("cart", ns).metadata.generation
    time.sleep(1.5)  # several status polls and probes: none of them may write anything
    after = env.binding("cart") or {}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], changed(before, after)
    assert dfw.deployment("cart", ns).metadata.generation == gen
    # a config change reaches the dependent copy
    env.http.patch(f"/api/v1/namespaces/{ns}/configmaps/cart-cfg", json={"data": {"mode": "safe"}},
                   headers={"Content-Type": "application/merge-patch+json"})
    wait_for(lambda: dfw.get(f"/api/v1/namespaces/{ns}/configmaps/cart-cfg")["data"] == {"mode": "safe"}, 10,
             "ConfigMap updated in the member")
    env.delete(f"{BINDINGS}/cart")
    wait_for(lambda: env.binding("cart") is None, 10, "binding gone (finalizer released)")
    assert env.copies("cart", ns) == {}
    assert dfw.get(f"/api/v1/namespaces/{ns}/configmaps/cart-cfg") is None
    assert dfw.get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/cart") is None
    assert dfw.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/cart-data") is None
    assert dfw.get(f"/api/v1/namespaces/{ns}") is not None  # namespaces are never deleted


def test_scale_and_move_gracefully(env: Env) -> None:
    env.create(deploy_path(), deployment("sc", 4))
    env.placed_binding("sc", "sc", {"aws-dfw": 2, "gcp-sin": 2})
    wait_for(lambda: env.copies("sc") == {"aws-dfw": 2, "gcp-sin": 2}, 10, "first placement")
    env.place("sc", {"aws-dfw": 5, "gcp-sin": 3})  # scale up
    wait_for(lambda: env.copies("sc") == {"aws-dfw": 5, "gcp-sin": 3}, 10, "scaled up")
    env.place("sc", {"aws-dfw": 1, "gcp-sin": 1})  # scale down
    wait_for(lambda: env.copies("sc") == {"aws-dfw": 1, "gcp-sin": 1}, 10, "scaled down")
    # a move: gcp-sin leaves, azure-lhr comes; gcp-sin keeps its copy until azure-lhr's is ready
    env.place("sc", {"aws-dfw": 1, "azure-lhr": 1})
    seen_both = wait_for(lambda: set(env.copies("sc")) == {"aws-dfw", "gcp-sin", "azure-lhr"} or
                         set(env.copies("sc")) == {"aws-dfw", "azure-lhr"}, 10, "new copy")
    assert seen_both
    wait_for(lambda: env.copies("sc") == {"aws-dfw": 1, "azure-lhr": 1}, 10, "old copy removed")
    # the copy is gone from the member before its Work (and the Binding's "removing" entry) is: wait for both
    b = wait_for(lambda: (x := env.binding("sc")) and x["status"]["phase"] == "Running" and
                 [e["cluster"] for e in x["status"]["clusters"]] == ["aws-dfw", "azure-lhr"] and x, 10,
                 "Running on the new placement alone")
    assert not any(e.get("removing") for e in b["status"]["clusters"])
    # a copy deleted in the member behind DRO-DS's back comes back
    from kubernetes import client as k8s

    k8s.AppsV1Api(env.members["aws-dfw"].api).delete_namespaced_deployment("sc", "default")
    wait_for(lambda: env.members["aws-dfw"].deployment("sc") is not None, 10, "copy re-applied")
    # an object of the same name that DRO-DS did not create is left alone and reported — once the
    # member's watch of objects without DRO-DS's label has shown it (what a first apply consults)
    from kubernetes import watch

    from drods.model.annotations import FOREIGN_SELECTOR

    apps = k8s.AppsV1Api(env.members["gcp-sin"].api)
    since = apps.list_namespaced_deployment("default", label_selector=FOREIGN_SELECTOR).metadata.resource_version
    apps.create_namespaced_deployment("default", deployment("sc", 1))  # type: ignore[arg-type] # plain dicts too
    assert any(e["object"].metadata.name == "sc" for e in watch.Watch().stream(
        apps.list_namespaced_deployment, "default", label_selector=FOREIGN_SELECTOR, resource_version=since,
        timeout_seconds=10))
    env.place("sc", {"aws-dfw": 1, "gcp-sin": 1})
    def conflict() -> dict[str, Any] | None:
        x = env.binding("sc")
        return x if x and any("not managed by DRO-DS" in (e.get("lastError") or "") for e in x["status"]["clusters"]) \
            else None

    b = wait_for(conflict, 10, "conflict")
    assert b["status"]["phase"] == "Failed"
    # `kubectl describe deployment sc` tells both: it ran everywhere, then a member refused its copy
    def events(reason: str) -> list[dict[str, Any]]:
        selector = f"involvedObject.name=sc,involvedObject.kind=Deployment,reason={reason}"
        r = env.http.get("/api/v1/namespaces/default/events", params={"fieldSelector": selector})
        return list(r.json()["items"])

    failed = wait_for(lambda: events("SyncFailed"), 10, "a SyncFailed event")
    assert failed[-1]["type"] == "Warning" and "not managed by DRO-DS" in failed[-1]["message"], failed
    assert any(e["type"] == "Normal" and "applied and ready in" in e["message"] for e in events("SyncSucceed"))
    # the other's Deployment of that name runs its replica: none of it is counted as the workload's
    wait_for(lambda: (apps.read_namespaced_deployment("sc", "default").status.ready_replicas or 0) == 1, 10,
             "the other's copy ready in gcp-sin")

    def entries() -> dict[str, Any] | None:
        got = {e["cluster"]: e for e in (env.binding("sc") or {}).get("status", {}).get("clusters") or []}
        return got if got.get("aws-dfw", {}).get("readyReplicas") == 1 else None

    ours = wait_for(entries, 10, "our copy ready in aws-dfw")
    assert not ours["gcp-sin"].get("readyReplicas") and not ours["gcp-sin"].get("observedReplicas"), ours
    assert "not managed by DRO-DS" in next(c for c in b["status"]["conditions"] if c["type"] == "Propagated")["message"]
    env.delete(f"{BINDINGS}/sc")
    wait_for(lambda: env.binding("sc") is None, 10, "binding deleted")
    assert env.members["gcp-sin"].deployment("sc") is not None  # not ours: still there
    k8s.AppsV1Api(env.members["gcp-sin"].api).delete_namespaced_deployment("sc", "default")
    env.delete(deploy_path(name="sc"))


def test_slow_member_never_delays_the_others(fresh: Env) -> None:
    env = fresh
    env.members["gcp-sin"].fault("slow", 2000)
    env.create(deploy_path(), deployment("slow", 3))
    started = time.monotonic()
    env.placed_binding("slow", "slow", {"aws-dfw": 1, "azure-lhr": 1, "gcp-sin": 1})
    fast_members = [env.members["aws-dfw"], env.members["azure-lhr"]]  # reading gcp-sin itself takes 2 s
    fast = wait_for(lambda: all(m.deployment("slow") is not None for m in fast_members)
                    and time.monotonic() - started, 10, "fast members")
    assert fast < 2.0, f"fast members got their copy after {fast:.2f}s"
    env.members["gcp-sin"].fault("up")
    wait_for(lambda: set(env.copies("slow")) == {"aws-dfw", "azure-lhr", "gcp-sin"}, 20, "slow member too")
    env.delete(f"{BINDINGS}/slow")
    env.delete(deploy_path(name="slow"))
    wait_for(lambda: env.copies("slow") == {}, 15, "copies deleted")


def test_deletion_with_a_member_down_cleans_up_when_it_returns(fresh: Env) -> None:
    env = fresh
    env.create(deploy_path(), deployment("gone", 2))
    env.placed_binding("gone", "gone", {"aws-dfw": 1, "azure-lhr": 1})
    wait_for(lambda: env.copies("gone") == {"aws-dfw": 1, "azure-lhr": 1}, 10, "copies")
    env.members["azure-lhr"].fault("down")
    wait_for(lambda: env.ready("azure-lhr") == "False", 10, "azure-lhr NotReady")
    taints = wait_for(lambda: env.cluster("azure-lhr")["spec"].get("taints"), 5, "the not-ready taint")
    assert {"key": "cluster.multicluster.io/not-ready", "effect": "NoExecute"}.items() <= taints[0].items()
    env.delete(deploy_path(name="gone"))
    env.delete(f"{BINDINGS}/gone")
    wait_for(lambda: env.binding("gone") is None, 10, "binding released although a member is down")
    assert env.members["aws-dfw"].deployment("gone") is None
    pending = env.server.run_cli("get", "bindings", "--server", env.server.url, "--token", env.server.token("admin"))
    assert "gone" not in pending.stdout
    env.members["azure-lhr"].fault("up")
    wait_for(lambda: env.ready("azure-lhr") == "True", 10, "azure-lhr Ready again")
    wait_for(lambda: not env.cluster("azure-lhr")["spec"].get("taints"), 5, "taint removed")
    wait_for(lambda: env.members["azure-lhr"].deployment("gone") is None, 10, "copy cleaned up on return")


def test_pull_mode_health_follows_the_reports(env: Env) -> None:
    body = {"name": "edge-pull", "syncMode": "Pull", "region": "us-east", "city": "JFK"}
    r = env.http.post("/api/v1/clusters", json=body)
    assert r.status_code == 201, r.text
    # a short grace for this cluster only, by annotation
    r = env.http.patch("/apis/multicluster.io/v1alpha1/clusters/edge-pull",
                       json={"metadata": {"annotations": {"multicluster.io/not-ready-grace-seconds": "2"}}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: env.ready("edge-pull") in ("Unknown", "False"), 5, "no report yet")

    def report() -> None:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        r = env.http.put("/api/v1/metrics", json={"cluster": "edge-pull", "timestamp": ts, "cpuCapacity": 16,
                                                  "cpuUsage": 20.0, "memoryCapacity": 64, "memoryAvailable": 40})
        assert r.status_code in (200, 202), r.text

    report()
    wait_for(lambda: env.ready("edge-pull") == "True", 5, "Ready after a report")
    assert not (env.cluster("edge-pull")["spec"].get("taints"))
    # what `kubectl get clusters` shows of it comes from the report: 24 of 64 GiB used is the water level
    summary = env.cluster("edge-pull")["status"]["resourceSummary"]
    assert summary["waterLevel"] == 0.38 and summary["cpu"] == {"allocatable": 16.0, "used": 3.2}
    # silence: NotReady after the cluster's own grace, tainted
    wait_for(lambda: env.ready("edge-pull") == "False", 8, "NotReady after 2 s without reports")
    wait_for(lambda: env.cluster("edge-pull")["spec"].get("taints"), 5, "tainted")
    report()
    wait_for(lambda: env.ready("edge-pull") == "True" and not env.cluster("edge-pull")["spec"].get("taints"), 5,
             "Ready and untainted again")
    env.delete("/api/v1/clusters/edge-pull")


def test_every_member_gets_a_stored_work_with_its_status(env: Env) -> None:
    """Push members get stored Works like pull members: the final manifests, the leadership generation
    of the member controllers that wrote them, and the member's status recorded on them."""
    env.create(deploy_path(), deployment("wk", 3))
    env.placed_binding("wk", "wk", {"aws-dfw": 2, "gcp-sin": 1})
    wait_for(lambda: env.copies("wk") == {"aws-dfw": 2, "gcp-sin": 1}, 10, "both copies")

    def works() -> dict[str, Any] | None:
        items = env.http.get("/apis/multicluster.io/v1alpha1/works",
                             params={"labelSelector": "multicluster.io/binding=wk"}).json()["items"]
        by_cluster = {w["spec"]["cluster"]: w for w in items}
        ready = all(w.get("status", {}).get("applied") and any(
            (m.get("status") or {}).get("readyReplicas") == w["spec"]["manifests"][-1]["spec"]["replicas"]
            for m in w["status"].get("manifests") or []) for w in by_cluster.values())
        return by_cluster if set(by_cluster) == {"aws-dfw", "gcp-sin"} and ready else None

    got = wait_for(works, 15, "both Works applied with the members' ready status")
    for cluster, w in got.items():
        assert w["spec"]["binding"] == "wk" and w["status"]["observedHash"] == w["spec"]["hash"]
        assert int(w["metadata"]["annotations"]["multicluster.io/leader-generation"]) > 0
        assert w["metadata"]["finalizers"] == ["multicluster.io/execution"]  # push: emptied before it goes
        main = w["spec"]["manifests"][-1]
        assert main["kind"] == "Deployment" and main["metadata"]["annotations"]["multicluster.io/cluster"] == cluster
    # kubectl-style table of Works through the CLI
    table = env.server.run_cli("get", "works", "--server", env.server.url, "--token", env.server.token("admin"))
    assert table.returncode == 0, table.stderr
    assert sum(1 for line in table.stdout.splitlines() if ".aws-dfw-" in line or ".gcp-sin-" in line) >= 2
    # scale-in to one cluster: the other's Work goes (after the member was emptied), then its copy
    env.place("wk", {"aws-dfw": 3})
    wait_for(lambda: env.copies("wk") == {"aws-dfw": 3}, 15, "copy left gcp-sin")
    wait_for(lambda: work_clusters(env, "wk") == {"aws-dfw"}, 15, "gcp-sin's Work deleted")
    env.delete(f"{BINDINGS}/wk")
    env.delete(deploy_path(name="wk"))
    wait_for(lambda: env.copies("wk") == {} and not work_clusters(env, "wk"), 15, "copies and Works deleted")


def work_clusters(env: Env, binding: str) -> set[str]:
    items = env.http.get("/apis/multicluster.io/v1alpha1/works",
                         params={"labelSelector": f"multicluster.io/binding={binding}"}).json()["items"]
    return {w["spec"]["cluster"] for w in items}


def test_a_kind_without_replicas_goes_whole_to_every_selected_cluster(env: Env) -> None:
    ing = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
    env.create(ing, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "edge"},
                     "spec": {"defaultBackend": {"service": {"name": "edge", "port": {"number": 80}}}}})
    env.create("/apis/multicluster.io/v1alpha1/propagationpolicies", {
        "apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "edge-pp"},
        "spec": {"resourceSelectors": [{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "edge"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["aws-dfw", "gcp-sin"]},
                               "replicaScheduling": {"replicaSchedulingType": "Divided"}}}})

    def landed() -> set[str]:
        return {n for n, m in env.members.items() if m.get(f"{ing}/edge") is not None}

    wait_for(lambda: landed() == {"aws-dfw", "gcp-sin"}, 20, "the Ingress on both selected clusters")
    b = env.binding("ingress-default-edge")
    assert b is not None
    assert b["spec"]["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Duplicated"}
    assert env.members["aws-dfw"].get(f"{ing}/edge")["spec"]["defaultBackend"]["service"]["name"] == "edge"
    env.delete("/apis/multicluster.io/v1alpha1/propagationpolicies/edge-pp")
    wait_for(lambda: landed() == set(), 20, "the copies leave with the policy")
    env.delete(f"{ing}/edge")


KARMADA_POLICIES = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: everything-to-sin
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: kweb
  placement:
    clusterAffinity:
      clusterNames: [gcp-sin]
  priority: 100
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: kweb
  namespace: team
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: kweb
  propagateDeps: true
  placement:
    clusterAffinity:
      clusterNames: [aws-dfw, azure-lhr]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster: {clusterNames: [aws-dfw]}
            weight: 2
          - targetCluster: {clusterNames: [azure-lhr]}
            weight: 1
"""


def test_karmada_policies_applied_unchanged_namespaced_wins_overrides_apply(env: Env) -> None:
    for doc in KARMADA_POLICIES.split("---"):
        meta = doc.split("kind: ")[1].split()[0]
        path = ("/apis/policy.karmada.io/v1alpha1/namespaces/team/propagationpolicies" if meta == "PropagationPolicy"
                else "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies")
        r = env.http.post(path, content=doc.encode(), headers={"Content-Type": "application/yaml"})
        assert r.status_code == 201, r.text
    env.create(deploy_path("team"), deployment("kweb", 6, namespace="team", cpu="100m", memory="64Mi"))
    wait_for(lambda: env.copies("kweb", "team") == {"aws-dfw": 4, "azure-lhr": 2}, 30,
             "divided 2:1 over the namespaced policy's clusters")
    op = """
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: kweb-lhr, namespace: team}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: kweb}]
  overrideRules:
    - targetCluster: {clusterNames: [azure-lhr]}
      overriders:
        imageOverrider: [{component: Tag, operator: replace, value: "1.27"}]
        labelsOverrider: [{operator: add, value: {site: london}}]
"""
    r = env.http.post("/apis/policy.karmada.io/v1alpha1/namespaces/team/overridepolicies", content=op.encode(),
                      headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    lhr = wait_for(lambda: (d := env.members["azure-lhr"].deployment("kweb", "team")) is not None
                   and d.spec.template.spec.containers[0].image == "nginx:1.27" and d, 20, "override on azure-lhr")
    assert lhr.metadata.labels["site"] == "london"
    assert env.members["aws-dfw"].deployment("kweb", "team").spec.template.spec.containers[0].image == "nginx:1.25"
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/team/overridepolicies/kweb-lhr")
    b = env.binding("deployment-team-kweb")
    assert b is not None and b["spec"]["policyRef"] == {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "name": "kweb", "namespace": "team"}
    # without the namespaced policy the cluster-wide one takes over
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/team/propagationpolicies/kweb")
    wait_for(lambda: env.copies("kweb", "team") == {"gcp-sin": 6}, 30, "moved to the cluster-wide policy's cluster")
    kept = env.binding("deployment-team-kweb")
    assert kept is not None
    # the last Karmada policy deleted: as in Karmada, its Binding and the copies stay (karmada#601) until
    # another policy claims the workload — the same Binding, moved, not one made again
    env.delete("/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/everything-to-sin")
    own = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
           "metadata": {"name": "kweb-own"},
           "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kweb",
                                         "namespace": "team"},
                    "targetClusters": [{"selectorType": "name", "values": ["aws-dfw"]}],
                    "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}}}
    env.create("/apis/multicluster.io/v1alpha1/resourceplacementpolicies", own)
    wait_for(lambda: env.copies("kweb", "team") == {"aws-dfw": 6}, 30, "claimed by DRO-DS's policy and moved")
    claimed = env.binding("deployment-team-kweb")
    assert claimed is not None and claimed["metadata"]["uid"] == kept["metadata"]["uid"], \
        "the Binding of the deleted Karmada policy was deleted and made again, not kept"
    # DRO-DS's own policy deleted: its Binding and the copies go
    env.delete("/apis/multicluster.io/v1alpha1/resourceplacementpolicies/kweb-own")
    wait_for(lambda: env.copies("kweb", "team") == {}, 20, "copies deleted with the last policy")
    # no longer placed: the template no longer shows the copies that are gone
    st = wait_for(lambda: (s := env.http.get(deploy_path("team", "kweb")).json().get("status") or {})
                  .get("readyReplicas", 0) == 0 and s, 20, "the template's status without the copies")
    assert not st.get("clusters") and st.get("replicas", 0) == 0, st
    env.delete(deploy_path("team", "kweb"))


def test_while_no_policy_holds_a_workload_its_changes_are_not_propagated(env: Env) -> None:
    """A Karmada policy deleted keeps the copies as they were (karmada#601), and a change to the workload
    is not propagated (docs/karmada.md); it was, all but the replicas. A workload still held, changed
    after it, is the barrier: once its change is in the member, the other's would have been too."""
    for name in ("loose", "held"):
        r = env.http.post("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies",
                          content=karmada_policy(name).encode(), headers={"Content-Type": "application/yaml"})
        assert r.status_code == 201, r.text
        env.create(deploy_path(), deployment(name, 1, cpu="100m", memory="64Mi"))
    dfw = env.members["aws-dfw"]

    def image(name: str) -> str | None:
        d = dfw.deployment(name)
        return None if d is None else str(d.spec.template.spec.containers[0].image)

    wait_for(lambda: image("loose") == image("held") == "nginx:1.25", 30, "both copies in aws-dfw")
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/loose")
    wait_for(lambda: env.binding("deployment-default-loose") is not None and env.http.get(
        "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/loose").status_code == 404, 10,
        "the policy gone, its Binding kept")
    for name in ("loose", "held"):
        r = env.http.patch(deploy_path(name=name), json=[
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.27"}],
            headers={"Content-Type": "application/json-patch+json"})
        assert r.status_code == 200, r.text
    wait_for(lambda: image("held") == "nginx:1.27", 30, "the held workload's change in the member")
    assert image("loose") == "nginx:1.25", "the change of a workload no policy holds was propagated"
    assert env.copies("loose") == {"aws-dfw": 1}
    # the same policy made again (same name: the Binding's spec does not change) delivers what waited
    r = env.http.post("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies",
                      content=karmada_policy("loose").encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    wait_for(lambda: image("loose") == "nginx:1.27", 30, "the change delivered once the policy is back")
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/loose")
    for name in ("loose", "held"):
        env.delete(deploy_path(name=name))
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/held")


def test_a_new_bindings_finalizer_and_its_works_land_in_one_write(env: Env) -> None:
    """The finalizer that covers a Binding's Works is stored with them, in one transaction: the Works
    reach the members a store round trip sooner, and no Work ever exists without it."""
    since = env.http.get(BINDINGS, params={"limit": 1}).json()["metadata"]["resourceVersion"]
    env.create(deploy_path(), deployment("one-write", 2))
    env.placed_binding("one-write", "one-write", {"aws-dfw": 1, "gcp-sin": 1})
    wait_for(lambda: env.copies("one-write") == {"aws-dfw": 1, "gcp-sin": 1}, 10, "both copies")

    def events(path: str) -> list[dict[str, Any]]:
        return watch_events(env, path, since)

    finalized = [e["object"]["metadata"]["resourceVersion"] for e in events(BINDINGS)
                 if e["object"]["metadata"]["name"] == "one-write"
                 and "multicluster.io/propagation" in (e["object"]["metadata"].get("finalizers") or [])]
    created = {e["object"]["metadata"]["resourceVersion"] for e in events(WORKS)
               if e["type"] == "ADDED" and e["object"]["spec"]["binding"] == "one-write"}
    assert finalized and created == {finalized[0]}  # both Works, in the write that added the finalizer
    env.delete(f"{BINDINGS}/one-write")
    env.delete(deploy_path(name="one-write"))
    wait_for(lambda: env.copies("one-write") == {}, 10, "copies deleted")


def test_a_templates_status_waits_for_the_decision_and_says_where_its_copies_go(env: Env) -> None:
    """A workload's status is what DRO-DS decided and its members report: nothing is written on it
    before its Binding is decided (a "0/0 in 0 cluster(s)" superseded a moment later), and every
    status written counts the cluster its copy went to (which one is the Binding's ``status.clusters[]``)."""
    since = env.http.get(BINDINGS, params={"limit": 1}).json()["metadata"]["resourceVersion"]
    path = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
    r = env.http.post(path, content=karmada_policy("reported").encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    env.create(deploy_path(), deployment("reported", 1, cpu="100m", memory="64Mi"))
    wait_for(lambda: ((env.http.get(deploy_path(name="reported")).json().get("status") or {})
                      .get("readyReplicas") == 1), 30, "the copy ready in the template's status")

    def events(path: str, name: str) -> list[dict[str, Any]]:
        return [e["object"] for e in watch_events(env, path, since) if e["object"]["metadata"]["name"] == name]

    decided = [int(b["metadata"]["resourceVersion"]) for b in events(BINDINGS, "deployment-default-reported")
               if (b.get("status") or {}).get("scheduledTime")]
    statuses = [(int(d["metadata"]["resourceVersion"]), d["status"]) for d in events(deploy_path(), "reported")
                if d.get("status")]
    assert decided and statuses
    assert all(rv > decided[0] for rv, _ in statuses), (decided[0], statuses)
    assert all("in 1 cluster(s)" in st["conditions"][0]["message"] and "clusters" not in st
               for _, st in statuses), statuses
    env.delete(f"{path}/reported")
    env.delete(deploy_path(name="reported"))
    wait_for(lambda: env.copies("reported") == {}, 20, "copies deleted")


def watch_events(env: Env, path: str, since: str) -> list[dict[str, Any]]:
    """Every event of ``path`` after revision ``since``, from a watch that ends after a second."""
    r = env.http.get(path, params={"watch": "1", "resourceVersion": since, "timeoutSeconds": "1"}, timeout=10)
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def test_a_dependent_deleted_or_edited_in_the_member_is_applied_again(env: Env) -> None:
    """A workload's ConfigMap deleted behind DRO-DS's back comes back (the member's dependents are
    followed by watch); one edited there is put back by the workload's next change, which — while the
    member holds the ConfigMap as last applied — sends the workload alone."""
    from kubernetes import client as k8s

    env.create("/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": "dep-cfg", "namespace": "default"},
                                                         "data": {"mode": "fast"}})
    d = deployment("dep", 1)
    d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "dep-cfg"}}]
    env.create(deploy_path(), d)
    env.placed_binding("dep", "dep", {"aws-dfw": 1})
    core = k8s.CoreV1Api(env.members["aws-dfw"].api)

    def data() -> dict[str, str] | None:
        try:
            return dict(core.read_namespaced_config_map("dep-cfg", "default", _request_timeout=3).data or {})
        except k8s.ApiException as e:
            if e.status == 404:
                return None
            raise

    wait_for(lambda: data() == {"mode": "fast"} and env.copies("dep") == {"aws-dfw": 1}, 10, "both copies")
    core.delete_namespaced_config_map("dep-cfg", "default")
    # the member's ConfigMaps are followed from the work-status controller's next poll (a resync period)
    wait_for(lambda: data() == {"mode": "fast"}, 40, "the deleted ConfigMap applied again")
    core.patch_namespaced_config_map("dep-cfg", "default", {"data": {"mode": "edited"}})
    env.http.patch(deploy_path(name="dep"), json={"spec": {"replicas": 2}},
                   headers={"Content-Type": "application/merge-patch+json"})
    env.place("dep", {"aws-dfw": 2})
    wait_for(lambda: env.copies("dep") == {"aws-dfw": 2} and data() == {"mode": "fast"}, 10,
             "the workload's change applied, and the edited ConfigMap put back", what_else=data)
    env.delete(f"{BINDINGS}/dep")
    wait_for(lambda: env.binding("dep") is None and data() is None, 10, "copies deleted")
    env.delete(deploy_path(name="dep"))
    env.delete("/api/v1/namespaces/default/configmaps/dep-cfg")


def test_a_dependent_deleted_or_no_longer_named_leaves_the_member(env: Env) -> None:
    """A ConfigMap deleted on the control plane, and one the template stops naming, are taken off the
    member (they stayed there for good, and outlived the workload); one another workload still names
    stays."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(env.members["aws-dfw"].api)
    for name in ("gone-cfg", "kept-cfg", "shared-cfg"):
        env.create("/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                             "metadata": {"name": name, "namespace": "default"},
                                                             "data": {"k": name}})

    def named(workload: str, *configmaps: str) -> dict[str, Any]:
        d = deployment(workload, 1)
        d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": c}}
                                                                     for c in configmaps]
        return d

    env.create(deploy_path(), named("prune", "gone-cfg", "kept-cfg", "shared-cfg"))
    env.create(deploy_path(), named("other", "shared-cfg"))
    env.placed_binding("prune", "prune", {"aws-dfw": 1})
    env.placed_binding("other", "other", {"aws-dfw": 1})

    def held() -> set[str]:
        return {c.metadata.name for c in core.list_namespaced_config_map("default", _request_timeout=3).items
                if c.metadata.name.endswith("-cfg")}

    wait_for(lambda: {"gone-cfg", "kept-cfg", "shared-cfg"} <= held(), 15, "the dependents applied", what_else=held)
    env.delete("/api/v1/namespaces/default/configmaps/gone-cfg")
    wait_for(lambda: "gone-cfg" not in held(), 30, "the deleted dependent taken off the member", what_else=held)
    # the template stops naming two of them: the one no other workload names goes, the shared one stays
    env.http.put(deploy_path(name="prune"), json={**named("prune"), "metadata": {
        **env.http.get(deploy_path(name="prune")).json()["metadata"]}}).raise_for_status()
    wait_for(lambda: "kept-cfg" not in held(), 30, "the dependent no longer named taken off", what_else=held)
    assert "shared-cfg" in held() and env.copies("prune") == {"aws-dfw": 1}
    for name in ("prune", "other"):
        env.delete(deploy_path(name=name))
    for name in ("kept-cfg", "shared-cfg"):
        env.delete(f"/api/v1/namespaces/default/configmaps/{name}")


def test_a_namespace_deleted_on_the_control_plane_leaves_the_members_it_was_made_in(env: Env) -> None:
    """The namespace a member got with a workload goes from it once the control plane's is deleted (it
    stayed there, Active, for good); one the member had of its own is left alone."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(env.members["aws-dfw"].api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="own-ns")))
    for ns in ("made-ns", "own-ns"):
        env.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        env.create(deploy_path(ns), deployment("nsweb", 1, namespace=ns, cpu="100m", memory="64Mi"))
        env.placed_binding(f"nsweb-{ns}", "nsweb", {"aws-dfw": 1}, namespace=ns)

    def present(ns: str) -> bool:
        try:
            got = core.read_namespace(ns, _request_timeout=3)
        except k8s.ApiException as e:
            if e.status == 404:
                return False
            raise
        return got.status.phase != "Terminating"

    wait_for(lambda: env.copies("nsweb", "made-ns") == env.copies("nsweb", "own-ns") == {"aws-dfw": 1}, 20,
             "the workloads in both namespaces")
    for ns in ("made-ns", "own-ns"):
        env.delete(f"{BINDINGS}/nsweb-{ns}")
        env.delete(f"/api/v1/namespaces/{ns}")
    wait_for(lambda: not present("made-ns"), 30, "the namespace made in the member deleted with the control plane's")
    wait_for(lambda: env.copies("nsweb", "own-ns") == {}, 20, "the workload in the member's own namespace gone")
    assert present("own-ns"), "the member's own namespace was deleted"
    core.delete_namespace("own-ns")


def test_scaled_to_zero_the_copies_go_at_once(env: Env) -> None:
    """No copy is wanted anywhere: none waits out the graceful timeout (600 s) for another to be ready."""
    env.create(deploy_path(), deployment("zero", 2))
    env.placed_binding("zero", "zero", {"aws-dfw": 1, "gcp-sin": 1}, replicas=2)
    wait_for(lambda: env.copies("zero") == {"aws-dfw": 1, "gcp-sin": 1}, 10, "placed")
    b = env.binding("zero")
    assert b is not None
    b["spec"]["replicas"] = 0  # as the detector writes a template scaled to 0
    assert env.http.put(f"{BINDINGS}/zero", json=b).status_code == 200
    env.place("zero", {})
    wait_for(lambda: env.copies("zero") == {}, 15, "every copy gone, not kept for the graceful timeout",
             what_else=lambda: (env.binding("zero") or {}).get("status", {}).get("clusters"))
    env.delete(f"{BINDINGS}/zero")
    env.delete(deploy_path(name="zero"))
