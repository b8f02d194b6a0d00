"""A Karmada user's YAML, applied unchanged with kubectl (tests/karmada/yaml): every policy field,
the built-in kinds a v1.31 cluster serves, a CRD with two versions, printer columns and the status
and scale subresources. Each document is read back as written; ``kubectl scale`` changes a custom
resource's replicas at the path its definition names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import wait_for

YAML = Path(__file__).resolve().parents[1] / "karmada" / "yaml"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((YAML / name).read_text()) if d]


def contains(got: Any, want: Any, where: str = "") -> None:
    """``want`` (what was written) is in ``got`` unchanged; the server may only add."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        for k, v in want.items():
            assert k in got, f"{where}.{k} missing"
            contains(got[k], v, f"{where}.{k}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def read_back(kubectl: Kubectl, doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc["metadata"]
    group, _, version = doc["apiVersion"].rpartition("/")
    args = ["get", f"{doc['kind'].lower()}.{version}.{group}" if group else doc["kind"].lower(), meta["name"],
            "-o", "json"]
    if meta.get("namespace"):
        args += ["-n", meta["namespace"]]
    got: dict[str, Any] = json.loads(kubectl.run(*args).stdout)
    return got


@pytest.fixture(scope="module")
def applied(kubectl: Kubectl) -> Kubectl:
    kubectl.run("create", "namespace", "conformance", check=False)
    definition, resource = (YAML / "crd.yaml").read_text().split("\n---\n")
    kubectl.run("apply", "-f", "-", input=definition)  # served once stored: then a resource of it
    kubectl.run("apply", "-f", "-", "-f", str(YAML / "kinds.yaml"), "-f", str(YAML / "policies.yaml"),
                "-f", str(YAML / "networking.yaml"), "-f", str(YAML / "search.yaml"), input=resource)
    return kubectl


@pytest.mark.parametrize("file", ["policies.yaml", "kinds.yaml", "crd.yaml", "networking.yaml", "search.yaml"])
def test_every_document_reads_back_as_written(applied: Kubectl, file: str) -> None:
    for doc in docs(file):
        for c in (doc.get("spec") or {}).get("placement", {}).get("spreadConstraints", []):
            if "spreadByLabel" not in c:
                c.setdefault("spreadByField", "cluster")  # Karmada's default, stored as Karmada stores it
        got = read_back(applied, doc)
        contains(got, {k: v for k, v in doc.items() if k != "metadata"}, doc["kind"])
        contains(got["metadata"], {k: v for k, v in doc["metadata"].items() if k in ("name", "namespace", "labels")},
                 f"{doc['kind']}.metadata")


def test_kubectl_get_lists_the_new_kinds(applied: Kubectl) -> None:
    pods = applied.run("get", "pods", "-n", "conformance").stdout.splitlines()
    assert pods[0].split()[0] == "NAME" and pods[1].split()[0] == "debug"
    for resource, name in (("storageclasses", "fast-ssd"), ("priorityclasses", "shop-critical"),
                           ("leases -n conformance", "shop-leader"), ("ingressclasses", "nginx"),
                           ("rc -n conformance", "legacy-rc"), ("csidrivers", "ebs.csi.aws.com")):
        out = applied.run("get", *resource.split(), "-o", "name").stdout
        assert name in out, (resource, out)


def test_a_cluster_scoped_core_kind_is_created_listed_watched_and_deleted(applied: Kubectl) -> None:
    table = applied.run("get", "pv").stdout.splitlines()
    assert table[0].split()[0] == "NAME" and table[1].split()[0] == "shop-data"
    assert applied.run("get", "pv", "-l", "tier=db", "-o", "name").stdout.strip() == "persistentvolume/shop-data"
    events = applied.run("get", "--raw", "/api/v1/persistentvolumes?watch=1&resourceVersion=0&timeoutSeconds=1").stdout
    assert json.loads(events.splitlines()[0])["object"]["metadata"]["name"] == "shop-data"
    applied.run("label", "pv", "shop-data", "backup=daily")
    assert json.loads(applied.run("get", "pv", "shop-data", "-o", "json").stdout)["metadata"]["labels"] == {
        "tier": "db", "backup": "daily"}
    applied.run("create", "-f", "-", input=PV_SCRATCH)
    applied.run("delete", "pv", "scratch")
    assert "scratch" not in applied.run("get", "pv", "-o", "name").stdout
    bad = applied.run("create", "-f", "-", input=PV_SCRATCH.replace("kind: PersistentVolume", "kind: Nonsense"),
                      check=False)
    assert bad.returncode != 0


def test_karmadas_short_names_find_karmadas_policies(applied: Kubectl) -> None:
    """``pp``, ``cpp``, ``op`` and ``cop`` name Karmada's policy kinds, as in Karmada; DRO-DS's own
    PropagationPolicy and ClusterOverridePolicy are ``mpp`` and ``mcop``."""
    for short, ns, name in (("pp", "conformance", "propagationpolicy.policy.karmada.io/storefront"),
                            ("cpp", None, "clusterpropagationpolicy.policy.karmada.io/platform-addons"),
                            ("op", "conformance", "overridepolicy.policy.karmada.io/storefront-images"),
                            ("cop", None, "clusteroverridepolicy.policy.karmada.io/everywhere-mirror")):
        out = applied.run("get", short, *(["-n", ns] if ns else []), "-o", "name").stdout
        assert name in out.split(), (short, out)
    for short, resource in (("mpp", "propagationpolicies.multicluster.io"),
                            ("mcop", "clusteroverridepolicies.multicluster.io")):
        assert applied.run("get", short).returncode == 0
        assert applied.run("get", short, "-o", "name").stdout == applied.run("get", resource, "-o", "name").stdout


def test_networking_kinds_print_and_are_found_by_short_name(applied: Kubectl) -> None:
    assert "multiclusterservice.networking.karmada.io/storefront" in applied.run(
        "get", "mcs", "-n", "conformance", "-o", "name").stdout
    assert "multiclusteringress.networking.karmada.io/storefront" in applied.run(
        "get", "mci", "-n", "conformance", "-o", "name").stdout


def test_resource_registries_print_answer_a_dry_run_and_report_their_status(applied: Kubectl) -> None:
    kind = "resourceregistries.v1alpha1.search.karmada.io"
    table = applied.run("get", kind).stdout.splitlines()
    assert table[0].split()[0] == "NAME" and {r.split()[0] for r in table[1:]} >= {"storefront-cache",
                                                                                    "every-cluster-pods"}
    assert applied.run("get", kind, "-l", "team=storefront", "-o", "name").stdout.strip() == \
        "resourceregistry.search.karmada.io/storefront-cache"
    applied.run("apply", "--dry-run=server", "-f", "-", input=DRY_REGISTRY)
    assert "dry-only" not in applied.run("get", kind, "-o", "name").stdout
    bad = applied.run("apply", "-f", "-", input=DRY_REGISTRY.replace("kind: Deployment\n", ""), check=False)
    assert bad.returncode != 0 and "kind" in bad.stderr
    # no member is registered here: the search cache controller says so in the status subresource
    wait_for(lambda: applied.run("get", kind, "storefront-cache", "-o", "jsonpath={.status.conditions[0].reason}")
             .stdout == "NoClusterSelected", 15, "the registry's Ready condition")


DRY_REGISTRY = """
apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: dry-only}
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
"""


PV_SCRATCH = """
apiVersion: v1
kind: PersistentVolume
metadata: {name: scratch}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/scratch}
"""


def test_printer_columns_scale_subresource_and_every_served_version(applied: Kubectl) -> None:
    # discovery prefers v1 over v1beta1, as kube-apiserver does: the kind's plain name reads v1
    table = applied.run("get", "webapps", "-n", "conformance").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "SIZE", "IMAGE"] and table[1].split()[:3] == ["shop", "2", "nginx:1.25"]
    plain = json.loads(applied.run("get", "webapps", "shop", "-n", "conformance", "-o", "json").stdout)
    assert plain["apiVersion"] == "apps.example.com/v1"
    crds = applied.run("get", "crd", "webapps.apps.example.com").stdout.splitlines()
    assert crds[0].split() == ["NAME", "CREATED", "AT"] and crds[1].split()[0] == "webapps.apps.example.com"
    applied.run("scale", "webapps.v1.apps.example.com/shop", "-n", "conformance", "--replicas=5")
    got = json.loads(applied.run("get", "webapps.v1.apps.example.com", "shop", "-n", "conformance",
                                 "-o", "json").stdout)
    assert got["spec"]["size"] == 5 and got["spec"]["image"] == "nginx:1.25"
    older = json.loads(applied.run("get", "webapps.v1beta1.apps.example.com", "shop", "-n", "conformance",
                                   "-o", "json").stdout)
    assert older["apiVersion"] == "apps.example.com/v1beta1" and older["spec"]["size"] == 5
    scale = json.loads(applied.run("get", "--raw",
                                   "/apis/apps.example.com/v1/namespaces/conformance/webapps/shop/scale").stdout)
    assert scale["kind"] == "Scale" and scale["spec"] == {"replicas": 5}
    assert scale["status"] == {"replicas": 0, "selector": "app=shop"}


def test_kubectl_scale_of_a_deployment(applied: Kubectl) -> None:
    applied.run("create", "deployment", "scaled", "-n", "conformance", "--image=nginx:1.25")
    applied.run("scale", "deployment/scaled", "-n", "conformance", "--replicas=4")
    got = json.loads(applied.run("get", "deployment", "scaled", "-n", "conformance", "-o", "json").stdout)
    assert got["spec"]["replicas"] == 4
    bad = applied.run("scale", "deployment/scaled", "-n", "conformance", "--replicas=3",
                      "--current-replicas=9", check=False)
    assert bad.returncode != 0
    got = json.loads(applied.run("get", "deployment", "scaled", "-n", "conformance", "-o", "json").stdout)
    assert got["spec"]["replicas"] == 4
