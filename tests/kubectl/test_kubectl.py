"""F7: the multicluster.io kinds and workload templates through the real kubectl.

kubectl reads discovery and the OpenAPI documents, applies with server-side field validation
(no ``--validate=false``), patches on re-apply, watches, and shows server-side columns.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubectl.conftest import Kubectl
from tests.server_process import ServerProcess

CLUSTER = """
apiVersion: multicluster.io/v1alpha1
kind: Cluster
metadata:
  name: {name}
  labels: {{env: prod}}
spec:
  endpoint: https://k8s.{name}.example
  region: {region}
  provider: aws
  capabilities: [gpu]
"""

POLICIES = """
apiVersion: multicluster.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: web-pp}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]
  placement: {{clusterAffinity: {{clusterNames: [k-aws-east]}}}}
---
apiVersion: multicluster.io/v1alpha1
kind: ResourcePlacementPolicy
metadata: {{name: web-rpp}}
spec:
  resourceSelector: {{apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}}
  targetClusters: [{{selectorType: name, values: [k-aws-east]}}]
  placement: {{replicaScheduling: {{replicaSchedulingType: Divided}}}}
---
apiVersion: multicluster.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: web-gpu}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]
  overrides:
  - clusterSelector: {{names: [k-aws-east]}}
    fieldPatches:
    - path: spec.template.spec.containers[0].resources.limits
      value: {{"nvidia.com/gpu": {gpus}}}
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: {image}
        resources: {{limits: {{cpu: "1"}}}}
      - name: sidecar
        image: busybox:1.36
"""


def write_manifests(directory: Path, *, region: str, gpus: int, image: str, replicas: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "1-cluster.yaml").write_text(CLUSTER.format(name="k-aws-east", region=region))
    (directory / "2-policies.yaml").write_text(POLICIES.format(gpus=gpus))
    (directory / "3-deployment.yaml").write_text(DEPLOYMENT.format(image=image, replicas=replicas))
    return directory


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl.run("get", *args, "-o", "json").stdout)


def test_api_resources_lists_our_kinds(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip() and "karmada" not in line}
    for plural in ("clusters", "propagationpolicies", "resourceplacementpolicies", "clusteroverridepolicies",
                   "bindings"):
        assert plural in rows, out
        assert "multicluster.io/v1alpha1" in rows[plural]
    assert "apps/v1" in rows["deployments"]
    assert " mpp " in rows["propagationpolicies"] + " "  # `pp` is Karmada's, for Karmada's kind
    # categories: `kubectl get drods` is every DRO-DS kind; `all` keeps Kubernetes' meaning
    drods = kubectl.run("api-resources", "--categories", "drods", "-o", "name").stdout.split()
    assert {"clusters.multicluster.io", "bindings.multicluster.io", "works.multicluster.io"} <= set(drods)
    everything = kubectl.run("api-resources", "--categories", "all", "-o", "name").stdout.split()
    assert "deployments.apps" in everything and "services" in everything
    assert not {"clusters.multicluster.io", "configmaps", "secrets", "namespaces"} & set(everything)


def test_apply_reapply_get_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    manifests = write_manifests(tmp_path / "m", region="us-east-1", gpus=2, image="nginx:1.25", replicas=2)
    out = kubectl.run("apply", "-f", str(manifests)).stdout
    for name in ("cluster.multicluster.io/k-aws-east", "propagationpolicy.multicluster.io/web-pp",
                 "resourceplacementpolicy.multicluster.io/web-rpp", "clusteroverridepolicy.multicluster.io/web-gpu",
                 "deployment.apps/web"):
        assert f"{name} created" in out, out

    table = kubectl.run("get", "clusters").stdout.splitlines()
    assert table[0].split() == ["NAME", "MODE", "REGION", "PROVIDER", "CITY", "READY", "VERSION", "NODES",
                                "CPU(ALLOC/USED)", "WATER", "HEARTBEAT", "AGE"]
    assert table[1].split()[:5] == ["k-aws-east", "Push", "us-east-1", "aws", "Unknown"]  # CITY is empty

    write_manifests(tmp_path / "m", region="us-west-2", gpus=4, image="nginx:1.27", replicas=3)
    out = kubectl.run("apply", "-f", str(manifests)).stdout
    assert "cluster.multicluster.io/k-aws-east configured" in out
    assert "clusteroverridepolicy.multicluster.io/web-gpu configured" in out
    assert "deployment.apps/web configured" in out
    assert "propagationpolicy.multicluster.io/web-pp unchanged" in out

    cluster = get_json(kubectl, "cluster", "k-aws-east")
    assert cluster["spec"]["region"] == "us-west-2"
    assert cluster["metadata"]["generation"] == 2
    cop = yaml.safe_load(kubectl.run("get", "clusteroverridepolicy", "web-gpu", "-o", "yaml").stdout)
    patch = cop["spec"]["overrides"][0]["fieldPatches"][0]
    assert patch["path"] == "spec.template.spec.containers[0].resources.limits"
    assert patch["value"] == {"nvidia.com/gpu": 4}
    rpp = get_json(kubectl, "rpp", "web-rpp")
    assert rpp["spec"]["targetClusters"] == [{"selectorType": "name", "values": ["k-aws-east"]}]

    # kubectl sends a strategic merge patch for Deployments: containers merge by name.
    deploy = get_json(kubectl, "deploy", "web", "-n", "default")
    containers = deploy["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "sidecar"]
    assert containers[0]["image"] == "nginx:1.27"
    assert containers[0]["resources"] == {"limits": {"cpu": "1"}}
    assert deploy["spec"]["replicas"] == 3
    assert not any(k.startswith("$") for k in deploy["spec"]["template"]["spec"])
    assert "web" in kubectl.run("get", "deploy", "-n", "default").stdout

    out = kubectl.run("delete", "-f", str(manifests)).stdout
    assert 'cluster.multicluster.io "k-aws-east" deleted' in out
    assert get_json(kubectl, "clusters")["items"] == []
    assert get_json(kubectl, "deployments", "-n", "default")["items"] == []


def test_removed_container_is_removed_on_reapply(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(DEPLOYMENT.format(image="nginx:1.25", replicas=1).replace("name: web", "name: web2", 1))
    kubectl.run("apply", "-f", str(path))
    path.write_text(path.read_text().split("      - name: sidecar")[0])
    kubectl.run("apply", "-f", str(path))
    deploy = get_json(kubectl, "deploy", "web2")
    assert [c["name"] for c in deploy["spec"]["template"]["spec"]["containers"]] == ["web"]
    kubectl.run("delete", "deploy", "web2")


def test_server_side_apply(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.format(name="k-ssa", region="eu-west-1"))
    out = kubectl.run("apply", "--server-side", "-f", str(path)).stdout
    assert "cluster.multicluster.io/k-ssa serverside-applied" in out
    path.write_text(CLUSTER.format(name="k-ssa", region="eu-central-1"))
    kubectl.run("apply", "--server-side", "-f", str(path))
    assert get_json(kubectl, "cluster", "k-ssa")["spec"]["region"] == "eu-central-1"
    out = kubectl.run("delete", "cluster", "k-ssa").stdout
    assert 'cluster.multicluster.io "k-ssa" deleted' in out
    assert "NotFound" in kubectl.run("get", "cluster", "k-ssa", check=False).stderr


def test_invalid_objects_are_refused_by_the_server(kubectl: Kubectl, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(CLUSTER.format(name="k-bad", region="x") + "  bogusField: 1\n")
    done = kubectl.run("apply", "-f", str(unknown), check=False)
    assert done.returncode != 0
    assert "spec.bogusField" in done.stderr and "Extra inputs are not permitted" in done.stderr, done.stderr

    bad_value = tmp_path / "bad-value.yaml"
    bad_value.write_text(CLUSTER.format(name="k-bad", region="x") + "  syncMode: Sideways\n")
    done = kubectl.run("apply", "-f", str(bad_value), check=False)
    assert done.returncode != 0
    assert "spec.syncMode" in done.stderr and "'Push' or 'Pull'" in done.stderr, done.stderr
    assert 'The Cluster "k-bad" is invalid' in done.stderr, done.stderr  # the Status names the object

    assert "--validate" not in done.stderr  # the schema was found: kubectl did not ask to skip validation
    missing = kubectl.run("get", "cluster", "k-bad", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr

    typo = tmp_path / "typo.yaml"  # a built-in kind: refused by its Kubernetes schema, by name
    typo.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: typo}\nspec:\n  replica: 3\n"
                    "  selector: {matchLabels: {app: t}}\n  template:\n    metadata: {labels: {app: t}}\n"
                    "    spec: {containers: [{name: t, image: nginx}]}\n")
    done = kubectl.run("apply", "-f", str(typo), check=False)
    assert done.returncode != 0 and "spec.replica: unknown field" in done.stderr, done.stderr
    assert "--validate" not in done.stderr
    assert kubectl.run("get", "deployment", "typo", check=False).returncode != 0

    # refused by a check beyond the schema: kubectl prints the Status message, which says why
    never = tmp_path / "never.yaml"
    never.write_text("apiVersion: autoscaling.karmada.io/v1alpha1\nkind: CronFederatedHPA\n"
                     "metadata: {name: never, namespace: default}\nspec:\n"
                     "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
                     "  rules:\n  - {name: feb30, schedule: '0 0 30 2 *', targetReplicas: 3}\n"
                     "  - {name: upside-down, schedule: '0 8 * * *', targetMinReplicas: 12, targetMaxReplicas: 10}\n")
    done = kubectl.run("apply", "-f", str(never), check=False)
    assert done.returncode != 0 and "never fires" in done.stderr, done.stderr
    assert "spec.rules[1]" in done.stderr and "targetMinReplicas" in done.stderr, done.stderr


def test_viewer_can_read_but_not_write(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.format(name="k-viewer", region="x"))
    assert kubectl.run("get", "clusters", role="viewer").returncode == 0
    done = kubectl.run("apply", "-f", str(path), role="viewer", check=False)
    assert done.returncode != 0
    assert "Forbidden" in done.stderr, done.stderr
    assert get_json(kubectl, "clusters", "--field-selector", "metadata.name=k-viewer")["items"] == []


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], needle: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no line with {needle!r} within {timeout}s")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if needle in line:
            return line


def test_watch_shows_changes_in_the_same_columns(kubectl: Kubectl, tls_server: ServerProcess) -> None:
    with tls_server.client() as api:
        api.post("/apis/multicluster.io/v1alpha1/clusters",
                 json={"metadata": {"name": "k-watch"}, "spec": {"region": "r1"}}).raise_for_status()
        proc = subprocess.Popen(kubectl.command("get", "clusters", "-w", "--request-timeout=60s"),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            lines = _lines(proc)
            header = _wait_for_line(lines, "NAME")
            assert "REGION" in header
            _wait_for_line(lines, "k-watch")
            api.patch("/apis/multicluster.io/v1alpha1/clusters/k-watch", json={"spec": {"region": "r2"}},
                      headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
            changed = _wait_for_line(lines, "r2")
            assert changed.split()[:3] == ["k-watch", "Push", "r2"]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        api.delete("/apis/multicluster.io/v1alpha1/clusters/k-watch").raise_for_status()


def test_server_dry_run_and_diff_store_nothing(kubectl: Kubectl, tls_server: ServerProcess,
                                              tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.format(name="k-dry", region="x"))
    out = kubectl.run("apply", "--dry-run=server", "-f", str(path)).stdout
    assert "cluster.multicluster.io/k-dry created (server dry run)" in out, out
    assert "NotFound" in kubectl.run("get", "cluster", "k-dry", check=False).stderr
    # The server validates a dry run for real.
    bad = tmp_path / "bad.yaml"
    bad.write_text(CLUSTER.format(name="k-dry", region="x") + "  syncMode: Sideways\n")
    done = kubectl.run("apply", "--dry-run=server", "-f", str(bad), check=False)
    assert done.returncode != 0 and "spec.syncMode" in done.stderr, done.stderr

    # kubectl diff asks the server what apply would make (a dry-run patch) and compares it with the live object.
    deploy = tmp_path / "d.yaml"
    deploy.write_text(DEPLOYMENT.format(image="nginx:1.25", replicas=1).replace("name: web", "name: web-dry", 1))
    new = kubectl.run("diff", "-f", str(deploy), check=False)
    assert new.returncode == 1 and "+  name: web-dry" in new.stdout, new.stdout + new.stderr
    kubectl.run("apply", "-f", str(deploy))
    same = kubectl.run("diff", "-f", str(deploy), check=False)
    assert same.returncode == 0 and same.stdout == "", same.stdout + same.stderr
    deploy.write_text(deploy.read_text().replace("nginx:1.25", "nginx:1.27").replace("replicas: 1", "replicas: 4"))
    changed = kubectl.run("diff", "-f", str(deploy), check=False)
    assert changed.returncode == 1, changed.stderr
    removed = [ln for ln in changed.stdout.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in changed.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert any("image: nginx:1.25" in ln for ln in removed) and any("image: nginx:1.27" in ln for ln in added)
    assert any(ln.split() == ["+", "replicas:", "4"] or ln.replace(" ", "") == "+replicas:4" for ln in added)
    out = kubectl.run("apply", "--dry-run=server", "-f", str(deploy)).stdout
    assert "deployment.apps/web-dry configured (server dry run)" in out, out
    live = get_json(kubectl, "deploy", "web-dry")
    assert live["spec"]["replicas"] == 1 and live["metadata"]["generation"] == 1
    out = kubectl.run("delete", "--dry-run=server", "deploy", "web-dry").stdout
    assert "(server dry run)" in out
    assert get_json(kubectl, "deploy", "web-dry")["metadata"]["uid"] == live["metadata"]["uid"]
    audit = tls_server.client().get("/api/v1/audit").json()["items"]
    assert not [e for e in audit if e["path"].endswith("/clusters/k-dry")
                or (e["verb"] == "DELETE" and e["path"].endswith("/deployments/web-dry"))]
    kubectl.run("delete", "deploy", "web-dry")


SERVICE = """
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  ports: [{{port: 80}}]
"""


def test_lists_across_namespaces(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    docs = [SERVICE.format(name=n, ns=ns) for ns in ("ns-a", "ns-b") for n in ("front", "back")]
    docs.append(DEPLOYMENT.format(image="nginx:1", replicas=1).replace("namespace: default", "namespace: ns-b")
                .replace("name: web", "name: web-all", 1))
    path.write_text("---".join(docs))
    kubectl.run("apply", "-f", str(path))
    rows = [line.split() for line in kubectl.run("get", "svc", "-A").stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert sorted((r[0], r[1]) for r in rows[1:]) == [("ns-a", "back"), ("ns-a", "front"), ("ns-b", "back"),
                                                      ("ns-b", "front")]
    out = kubectl.run("get", "all", "-A").stdout
    assert "service/front" in out and "deployment.apps/web-all" in out, out
    out = kubectl.run("get", "svc", "-A", "--field-selector", "metadata.namespace=ns-b,metadata.name!=back",
                      "-o", "name").stdout.split()
    assert out == ["service/front"]
    # kubectl's chunked list (--chunk-size, 500 by default) follows the server's continue tokens
    chunked = kubectl.run("get", "svc", "-A", "--chunk-size=1", "-o", "name", "-v=6")
    assert sorted(chunked.stdout.split()) == ["service/back", "service/back", "service/front", "service/front"]
    assert chunked.stderr.count("continue=") >= 3, chunked.stderr
    kubectl.run("delete", "-f", str(path))


COMMON_KINDS = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: ns-c}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: ns-c}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: front, namespace: ns-c}
spec: {defaultBackend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ns-c}
spec: {schedule: "0 3 * * *", jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: busybox}],
  restartPolicy: Never}}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: ns-c}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, minReplicas: 1, maxReplicas: 5}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: ns-c}
spec: {podSelector: {}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: ns-c}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: ns-c}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: ns-c}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: runner, namespace: ns-c}]
"""


def test_common_kubernetes_kinds_are_stored_as_given(kubectl: Kubectl, tmp_path: Path) -> None:
    rows = {line.split()[0] for line in kubectl.run("api-resources").stdout.splitlines()[1:] if line.strip()}
    assert {"serviceaccounts", "persistentvolumeclaims", "ingresses", "cronjobs", "horizontalpodautoscalers",
            "networkpolicies", "poddisruptionbudgets", "roles", "rolebindings", "clusterroles"} <= rows
    path = tmp_path / "kinds.yaml"
    path.write_text(COMMON_KINDS)
    out = kubectl.run("apply", "-f", str(path)).stdout
    for name in ("serviceaccount/runner", "persistentvolumeclaim/data", "ingress.networking.k8s.io/front",
                 "cronjob.batch/nightly", "horizontalpodautoscaler.autoscaling/web",
                 "networkpolicy.networking.k8s.io/deny", "poddisruptionbudget.policy/web",
                 "role.rbac.authorization.k8s.io/reader", "rolebinding.rbac.authorization.k8s.io/reader"):
        assert f"{name} created" in out, out
    assert "unchanged" in kubectl.run("apply", "-f", str(path)).stdout
    assert get_json(kubectl, "rolebinding", "reader", "-n", "ns-c")["roleRef"]["name"] == "reader"
    assert get_json(kubectl, "cj", "nightly", "-n", "ns-c")["spec"]["schedule"] == "0 3 * * *"
    # every namespace, narrowed to this test's (other tests of the session's server add their own)
    names = kubectl.run("get", "ing,pvc,sa", "-A", "--field-selector", "metadata.namespace=ns-c",
                        "-o", "name").stdout.split()
    assert names == ["ingress.networking.k8s.io/front", "persistentvolumeclaim/data", "serviceaccount/runner"]
    assert "cronjob.batch/nightly" in kubectl.run("get", "all", "-n", "ns-c", "-o", "name").stdout
    kubectl.run("delete", "-f", str(path))


KARMADA_PP = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: karmada-team
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
"""


def test_karmada_policy_yaml_applies_unchanged(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "pp.yaml"
    path.write_text(KARMADA_PP)
    out = kubectl.run("apply", "-f", str(path)).stdout
    assert "propagationpolicy.policy.karmada.io/nginx-propagation created" in out, out
    got = get_json(kubectl, "propagationpolicies.policy.karmada.io", "-n", "karmada-team", "nginx-propagation")
    assert got["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["member1", "member2"]
    # DRO-DS's own PropagationPolicy keeps the plain plural and is `mpp`; `pp` is Karmada's, as in Karmada
    for name, group in (("mpp", "multicluster.io"), ("propagationpolicies", "multicluster.io"),
                        ("pp", "policy.karmada.io")):
        explained = kubectl.run("explain", name).stdout
        assert group in explained.split("FIELDS")[0], explained
    greedy = tmp_path / "greedy.yaml"  # Karmada's preemption is accepted as written
    greedy.write_text(KARMADA_PP.replace("name: nginx-propagation", "name: greedy") + "  preemption: Always\n")
    kubectl.run("apply", "-f", str(greedy))
    assert kubectl.run("get", "-f", str(greedy), "-o", "jsonpath={.spec.preemption}").stdout == "Always"
    kubectl.run("delete", "-f", str(greedy))
    kubectl.run("delete", "-f", str(path))


def test_explain_reads_the_generated_schema(kubectl: Kubectl) -> None:
    if kubectl.client_minor() < 27:
        pytest.skip("kubectl < 1.27 explains from OpenAPI v2, which DRO-DS serves without definitions")
    done = kubectl.run("explain", "clusteroverridepolicies.spec.overrides.fieldPatches")
    assert "path" in done.stdout and "value" in done.stdout


def test_sort_by_a_field_beyond_metadata(kubectl: Kubectl, tmp_path: Path) -> None:
    """``kubectl get … --sort-by=.spec.replicas`` (or events by ``.lastTimestamp``) asks for table rows with
    the whole object (``includeObject=Object``): with metadata alone it printed "No resources found"."""
    ns = "sorting"
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    for name, replicas in (("three", 3), ("one", 1), ("two", 2)):
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                     "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": {"labels": {"app": name}},
                                           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    manifest = tmp_path / "sort.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    kubectl.run("apply", "-f", str(manifest))
    out = kubectl.run("get", "deployments", "-n", ns, "--sort-by=.spec.replicas", "-o", "name").stdout.split()
    assert out == ["deployment.apps/one", "deployment.apps/two", "deployment.apps/three"], out
    table = kubectl.run("get", "deployments", "-n", ns, "--sort-by=.spec.replicas").stdout.splitlines()
    assert [line.split()[0] for line in table[1:]] == ["one", "two", "three"], table
    kubectl.run("delete", "namespace", ns, "--wait=false")
