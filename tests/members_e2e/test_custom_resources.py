"""Any resource, as a user does it with kubectl only (issue 12's done-means): a CustomResourceDefinition
whose replicas, pod template and status live at non-standard paths, declared only in a
ResourceInterpreterCustomization; a custom resource of it and a policy → divided across the three
sims by water level; the sims' statuses (written as the members' operator would) come back
aggregated; the Ingress, PVC, ServiceAccount and CronJob it uses follow it to the same clusters;
``kubectl diff`` and ``kubectl apply --dry-run=server`` store nothing; deleting the definition stops
serving the kind."""

from __future__ import annotations

import subprocess
from typing import Any

from kubernetes.dynamic import DynamicClient

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, repo_root, wait_for

NS = "ml"
RUNS = f"/apis/ml.example.org/v1/namespaces/{NS}/trainingruns"
BINDING = f"trainingrun-{NS}-resnet"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

EXAMPLES = repo_root() / "examples" / "resources"  # the test applies the documented example
DEFINITION = (EXAMPLES / "trainingrun-crd.yaml").read_text()
CUSTOMIZATION = (EXAMPLES / "trainingrun-interpreter.yaml").read_text()
DEPENDENTS = (EXAMPLES / "dependents.yaml").read_text()
POLICY = (EXAMPLES / "policy.yaml").read_text()
RUN = (EXAMPLES / "trainingrun.yaml").read_text()


def run(count: int = 6, framework: str = "torch") -> str:
    assert "count: 6" in RUN and "framework: torch" in RUN
    return RUN.replace("count: 6", f"count: {count}").replace("framework: torch", f"framework: {framework}")


def apply(kubectl: Kubectl, text: str, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return kubectl.run("apply", "-f", "-", *extra, input=text, check=check)


def member_copy(env: Env, cluster: str, path: str) -> dict[str, Any] | None:
    got: dict[str, Any] | None = env.members[cluster].get(path)
    return got


def shares(env: Env) -> dict[str, int]:
    """Workers of the copy in each member that holds one (read at the custom path)."""
    out = {}
    for name in env.members:
        tr = member_copy(env, name, f"{RUNS}/resnet")
        if tr is not None:
            out[name] = int(tr["spec"]["workers"]["count"])
    return out


def report(env: Env, cluster: str, ready: int, healthy: bool) -> None:
    """What the member's operator would write on its copy's status."""
    body = {"status": {"progress": {"readyWorkers": ready, "steps": 100},
                       "health": {"conditions": [{"type": "Healthy", "status": "True" if healthy else "False",
                                                  "reason": "Fine" if healthy else "NodeLost"}]}}}
    DynamicClient(env.members[cluster].api).request(
        "patch", f"{RUNS}/resnet/status", body=body, content_type="application/merge-patch+json")


def test_a_custom_resource_is_divided_followed_by_its_dependents_and_its_status_aggregated(
        env: Env, kubectl: Kubectl) -> None:
    # the definition: served at once, listed, explained from its schema
    apply(kubectl, DEFINITION)
    kubectl.run("wait", "--for", "condition=established", "--timeout=10s", "crd/trainingruns.ml.example.org")
    assert kubectl.run("get", "trainingruns", "-n", NS).returncode == 0
    assert "trainingruns" in kubectl.run("api-resources", "--api-group=ml.example.org").stdout
    explained = kubectl.run("explain", "trainingrun.spec.workers").stdout
    assert "The worker pool of a training run." in explained and "count" in explained
    # a resource the schema refuses: a Kubernetes 422 naming the field, nothing stored
    bad = apply(kubectl, run(framework="tensorflow"), check=False)
    assert bad.returncode != 0 and "spec.framework" in bad.stderr, bad.stderr
    assert env.http.get(f"{RUNS}/resnet").status_code == 404
    # interpretation, dependents, the resource and its policy
    apply(kubectl, CUSTOMIZATION)
    apply(kubectl, DEPENDENTS)
    apply(kubectl, run())
    apply(kubectl, POLICY)

    b = wait_for(lambda: (x := env.binding(BINDING)) and (x.get("status") or {}).get("phase") == "Running" and x,
                 30, "the training run's binding Running", what_else=lambda: env.binding(BINDING))
    # replicas and per-replica requests from the customization's paths
    assert b["spec"]["replicas"] == 6
    assert b["spec"]["resources"] == {"cpu": 0.5, "memory": 0.25}
    where = {t["cluster"]: t["replicas"] for t in b["status"]["placement"]}
    assert sum(where.values()) == 6
    wanted = {c: n for c, n in where.items() if n}
    copies = wait_for(lambda: s if (s := shares(env)) == wanted else None, 15,
                      "each cluster's share written at spec.workers.count", what_else=lambda: shares(env))
    # divided by water level: azure-lhr is half full, so it gets fewer workers than each emptier cluster
    assert all(copies.get("azure-lhr", 0) < copies[c] for c in ("aws-dfw", "gcp-sin")), copies
    # the definition went along, and every dependent followed the run to exactly its clusters
    for cluster in env.members:
        has_copy = cluster in copies
        assert (member_copy(env, cluster, f"{CRD_PATH}/trainingruns.ml.example.org") is not None) == has_copy
        for path in (f"/api/v1/namespaces/{NS}/serviceaccounts/trainer",
                     f"/api/v1/namespaces/{NS}/persistentvolumeclaims/datasets",
                     f"/api/v1/namespaces/{NS}/services/resnet-board",
                     f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses/resnet-board",
                     f"/apis/batch/v1/namespaces/{NS}/cronjobs/resnet-cleanup"):
            assert (member_copy(env, cluster, path) is not None) == has_copy, (cluster, path)

    # the members' operators report; the control plane's copy shows the sum and the reflected conditions
    for cluster, n in copies.items():
        report(env, cluster, n, healthy=True)

    def aggregated() -> dict[str, Any] | None:
        st = env.http.get(f"{RUNS}/resnet").json().get("status") or {}
        return st if (st.get("progress") or {}).get("readyWorkers") == 6 else None

    st = wait_for(aggregated, 15, "aggregated status", what_else=lambda: env.http.get(f"{RUNS}/resnet").json())
    assert st["progress"]["steps"] == 100 * len(copies)
    table = kubectl.run("get", "tr", "resnet", "-n", NS, "-o", "wide").stdout.split()  # the printer columns
    assert table[:9] == ["NAME", "WORKERS", "READY", "FRAMEWORK", "AGE", "resnet", "6", "6", "torch"], table
    assert len(table) == 10 and table[9].endswith("s"), table  # the age, e.g. 12s
    assert st["health"]["conditions"] == [{"type": "Healthy", "status": "True", "reason": "Fine"}]
    assert {c["cluster"]: c["readyReplicas"]
            for c in st["clusters"]} == copies
    entries = {e["cluster"]: e.get("readyReplicas") for e in (env.binding(BINDING) or {})["status"]["clusters"]}
    assert entries == copies
    sick = next(iter(copies))
    report(env, sick, copies[sick], healthy=False)
    wait_for(lambda: env.http.get(f"{RUNS}/resnet").json()["status"]["health"]["conditions"][0]["status"] == "False",
             15, "one unhealthy cluster makes the aggregate unhealthy")

    # kubectl diff and a server-side dry run: they answer, and nothing changes
    before = env.http.get(f"{RUNS}/resnet").json()
    diff = kubectl.run("diff", "-f", "-", input=run(count=9), check=False)
    assert diff.returncode == 1, diff.stderr  # 1: there are differences
    assert "-    count: 6" in diff.stdout and "+    count: 9" in diff.stdout
    dry = apply(kubectl, run(count=9), "--dry-run=server")
    assert "(server dry run)" in dry.stdout
    after = env.http.get(f"{RUNS}/resnet").json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert (env.binding(BINDING) or {})["spec"]["replicas"] == 6

    # the policy narrows to two clusters: the run moves (gracefully: the new copies report ready), and
    # its dependents and definition leave the dropped cluster with it
    narrowed = POLICY.rstrip() + "\n  targetClusters:\n    - {selectorType: name, values: [aws-dfw, gcp-sin]}\n"
    apply(kubectl, narrowed)

    def placed() -> dict[str, int] | None:
        p = {t["cluster"]: t["replicas"] for t in ((env.binding(BINDING) or {}).get("status") or {}).get("placement")
             or [] if t["replicas"]}
        return p if set(p) == {"aws-dfw", "gcp-sin"} else None

    moved = wait_for(placed, 20, "the run placed on the two clusters", what_else=lambda: env.binding(BINDING))
    wait_for(lambda: all(shares(env).get(c) == n for c, n in moved.items()), 15, "the new shares in the members",
             what_else=lambda: shares(env))
    for cluster, n in moved.items():
        report(env, cluster, n, healthy=True)
    for path in (f"{RUNS}/resnet", f"/api/v1/namespaces/{NS}/serviceaccounts/trainer",
                 f"/api/v1/namespaces/{NS}/persistentvolumeclaims/datasets",
                 f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses/resnet-board",
                 f"/apis/batch/v1/namespaces/{NS}/cronjobs/resnet-cleanup",
                 f"{CRD_PATH}/trainingruns.ml.example.org"):
        wait_for(lambda p=path: member_copy(env, "azure-lhr", p) is None, 15, f"{path} gone from azure-lhr")
        assert all(member_copy(env, c, path) is not None for c in moved), path

    # the run leaves with its dependents; then the definition, and the kind is no longer served
    kubectl.run("delete", "trainingrun", "resnet", "-n", NS)
    wait_for(lambda: not shares(env), 20, "the copies leave", what_else=lambda: shares(env))
    wait_for(lambda: all(member_copy(env, c, f"/apis/batch/v1/namespaces/{NS}/cronjobs/resnet-cleanup") is None
                         for c in env.members), 15, "the CronJob leaves with its workload")
    wait_for(lambda: all(member_copy(env, c, f"{CRD_PATH}/trainingruns.ml.example.org") is None for c in env.members),
             15, "the definition leaves the members with the last resource of its kind")
    kubectl.run("delete", "-f", "-", input=POLICY + "---" + CUSTOMIZATION + "---" + DEPENDENTS)
    kubectl.run("delete", "crd", "trainingruns.ml.example.org")
    gone = kubectl.run("get", "trainingruns", "-n", NS, check=False)
    assert gone.returncode != 0
    assert env.http.get(f"{RUNS}").status_code == 404
