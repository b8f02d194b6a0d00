"""``kubectl get`` against a real `drods sim`: the columns and values kube-apiserver would print."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
import yaml

from drods.api.routes.discovery import KUBE_GIT_VERSION
from tests.sim.util import running_sims, wait_until

pytestmark = pytest.mark.timeout(90)

Kubectl = Callable[..., str]

MANIFESTS = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    *({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
       "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                             "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                                      "resources": {"requests": {"cpu": cpu}}}]}}}}
      for name, replicas, cpu in (("web", 2, "250m"), ("huge", 1, "64"))),
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
     "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
              "template": {"metadata": {"labels": {"app": "db"}},
                           "spec": {"containers": [{"name": "pg", "image": "postgres:16"}]}}}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
     "spec": {"selector": {"matchLabels": {"app": "agent"}},
              "template": {"metadata": {"labels": {"app": "agent"}},
                           "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                    "containers": [{"name": "a", "image": "agent:1"}]}}}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
     "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "j", "image": "busybox"}]}}}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
     "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
     "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 443, "nodePort": 30443}]}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "files"},
     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
              "resources": {"requests": {"storage": "2Gi"}}}},
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "by-hand"},
     "addressType": "IPv4", "ports": [{"port": 80}, {"port": 443}],
     "endpoints": [{"addresses": [f"10.9.0.{i}"]} for i in range(1, 5)]},
]


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    binary = os.environ.get("DRODS_KUBECTL") or shutil.which("kubectl")
    if binary is None:
        if os.environ.get("DRODS_REQUIRE_KUBECTL") == "1":
            pytest.fail("kubectl not found")
        pytest.skip("kubectl not installed")
    state = tmp_path_factory.mktemp("sims")
    with running_sims(state, {"tab": ["--nodes", "2", "--node-cpu", "2", "--node-memory", "4Gi",
                                      "--job-seconds", "0.2"]}) as sims:
        kubeconfig = sims["tab"].kubeconfig

        def run(*args: str, stdin: str | None = None) -> str:
            done = subprocess.run([binary, f"--kubeconfig={kubeconfig}", f"--cache-dir={state / 'cache'}",
                                   "--request-timeout=10s", *args], capture_output=True, text=True, input=stdin,
                                  timeout=30, env={**os.environ, "KUBECONFIG": ""})
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
            return done.stdout

        run("apply", "-f", "-", stdin=yaml.safe_dump_all(MANIFESTS))
        wait_until(lambda: _settled(run), timeout=20, interval=0.2, what="workloads settled")
        yield run


def _settled(kubectl: Kubectl) -> bool:
    deploys, jobs, sts = (rows(kubectl("get", kind)) for kind in ("deployments", "jobs", "statefulsets"))
    return (deploys["web"]["READY"] == "2/2" and jobs["once"]["STATUS"] == "Complete"
            and sts["db"]["READY"] == "2/2")


def parse(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """kubectl's aligned table → headers and rows, cut at the header columns' offsets (headers like
    ``NOMINATED NODE`` contain a single space, columns are two or more apart)."""
    lines = text.splitlines()
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    headers = [h for _, h in spans]
    out = []
    for line in lines[1:]:
        cuts = [s for s, _ in spans] + [len(line)]
        out.append({h: line[cuts[i]:cuts[i + 1]].strip() for i, h in enumerate(headers)})
    return headers, out


def rows(text: str) -> dict[str, dict[str, str]]:
    return {r["NAME"]: r for r in parse(text)[1]}


def test_pods(kubectl: Kubectl) -> None:
    headers, pods = parse(kubectl("get", "pods"))
    assert headers == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_app = {p["NAME"].split("-")[0]: p for p in pods}
    assert {k: (p["READY"], p["STATUS"], p["RESTARTS"]) for k, p in by_app.items()} == {
        "web": ("1/1", "Running", "0"), "huge": ("0/1", "Pending", "0"), "once": ("0/1", "Completed", "0"),
        "db": ("1/1", "Running", "0"), "agent": ("1/1", "Running", "0")}
    assert re.fullmatch(r"\d+s", by_app["web"]["AGE"])

    headers, wide = parse(kubectl("get", "pods", "-o", "wide"))
    assert headers == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                       "READINESS GATES"]
    by_app = {p["NAME"].split("-")[0]: p for p in wide}
    assert re.fullmatch(r"10\.\d+\.\d+\.\d+", by_app["web"]["IP"]) and by_app["web"]["NODE"].startswith("tab-node-")
    assert (by_app["huge"]["IP"], by_app["huge"]["NODE"], by_app["huge"]["NOMINATED NODE"]) == ("<none>",) * 3
    headers, everywhere = parse(kubectl("get", "pods", "-A"))
    assert headers[:2] == ["NAMESPACE", "NAME"] and {p["NAMESPACE"] for p in everywhere} == {"default"}


def test_nodes(kubectl: Kubectl) -> None:
    headers, nodes = parse(kubectl("get", "nodes"))
    assert headers == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(n["NAME"], n["STATUS"], n["ROLES"], n["VERSION"]) for n in nodes] == [
        (f"tab-node-{i}", "Ready", "worker", KUBE_GIT_VERSION) for i in range(2)]
    headers, wide = parse(kubectl("get", "nodes", "-o", "wide"))
    assert headers[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert (wide[1]["INTERNAL-IP"], wide[1]["EXTERNAL-IP"], wide[1]["KERNEL-VERSION"]) == ("10.0.0.2", "<none>",
                                                                                           "<unknown>")


def test_workloads(kubectl: Kubectl) -> None:
    headers, deploys = parse(kubectl("get", "deployments"))
    assert headers == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert {d["NAME"]: (d["READY"], d["UP-TO-DATE"], d["AVAILABLE"]) for d in deploys} == {
        "web": ("2/2", "2", "2"), "huge": ("0/1", "1", "0")}
    headers, wide = parse(kubectl("get", "deployment", "web", "-o", "wide"))
    assert headers[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert (wide[0]["CONTAINERS"], wide[0]["IMAGES"], wide[0]["SELECTOR"]) == ("app", "nginx:1.27", "app=web")

    headers, sts = parse(kubectl("get", "statefulsets"))
    assert headers == ["NAME", "READY", "AGE"] and sts[0]["READY"] == "2/2"

    headers, ds = parse(kubectl("get", "daemonsets"))
    assert headers == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"]
    assert [ds[0][h] for h in headers[1:7]] == ["2", "2", "2", "2", "2", "kubernetes.io/os=linux"]

    headers, jobs = parse(kubectl("get", "jobs"))
    assert headers == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert (jobs[0]["STATUS"], jobs[0]["COMPLETIONS"]) == ("Complete", "1/1")
    assert re.fullmatch(r"\d+s", jobs[0]["DURATION"])


def test_services_and_namespaces(kubectl: Kubectl) -> None:
    headers, services = parse(kubectl("get", "services"))
    assert headers == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert {s["NAME"]: (s["TYPE"], s["EXTERNAL-IP"], s["PORT(S)"]) for s in services} == {
        "web": ("ClusterIP", "<none>", "80/TCP"), "lb": ("LoadBalancer", "<pending>", "443:30443/TCP")}

    headers, namespaces = parse(kubectl("get", "namespaces"))
    assert headers == ["NAME", "STATUS", "AGE"]
    assert {n["NAME"]: n["STATUS"] for n in namespaces}["team-a"] == "Active"


def test_claims_and_endpoint_slices(kubectl: Kubectl) -> None:
    headers, claims = parse(kubectl("get", "pvc"))
    assert headers == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS",
                       "VOLUMEATTRIBUTESCLASS", "AGE"]
    files = rows(kubectl("get", "pvc"))["files"]  # no pod uses it yet: Pending, as WaitForFirstConsumer leaves it
    assert (files["STATUS"], files["CAPACITY"], files["ACCESS MODES"], files["STORAGECLASS"],
            files["VOLUMEATTRIBUTESCLASS"]) == ("Pending", "", "", "standard", "<unset>"), files
    headers, _ = parse(kubectl("get", "endpointslices"))
    assert headers == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    by_hand = rows(kubectl("get", "endpointslices"))["by-hand"]
    assert (by_hand["ADDRESSTYPE"], by_hand["PORTS"], by_hand["ENDPOINTS"]) == (
        "IPv4", "80,443", "10.9.0.1,10.9.0.2,10.9.0.3 + 1 more..."), by_hand


def test_get_all_lists_workloads_and_services_only(kubectl: Kubectl) -> None:
    out = kubectl("get", "all")
    kinds = {line.split()[0].split("/")[0] for line in out.splitlines() if "/" in line.split(" ")[0]}
    assert {"pod", "service", "deployment.apps"} <= kinds, out
    assert not kinds & {"configmap", "secret", "node", "namespace", "event", "serviceaccount"}, out


def test_watch_prints_the_same_columns(kubectl: Kubectl) -> None:
    out = kubectl("get", "deployments", "--watch", "--request-timeout=1s")
    headers, deploys = parse(out)
    assert headers == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert {d["NAME"]: d["READY"] for d in deploys} == {"web": "2/2", "huge": "0/1"}
