"""The ``drods`` client verbs against a real server: output formats, create/update/delete, errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import yaml

from tests.cli.conftest import Drods
from tests.free_port import free_port
from tests.server_process import ServerProcess, wait_until

MANIFESTS = """
apiVersion: multicluster.io/v1alpha1
kind: Cluster
metadata:
  name: c-aws
  labels: {env: prod}
spec:
  endpoint: https://k8s.c-aws.example
  region: us-east-1
  capabilities: [gpu, tls-encryption]
---
apiVersion: multicluster.io/v1alpha1
kind: PropagationPolicy
metadata: {name: c-pp}
spec:
  resourceType: Deployment
  targetClusters: [c-aws]
---
apiVersion: multicluster.io/v1alpha1
kind: ResourcePlacementPolicy
metadata: {name: c-rpp}
spec:
  resourceSelector: {apiVersion: apps/v1, kind: Deployment, name: api, namespace: default}
  targetClusters: [{selectorType: label, values: [env=prod]}]
"""

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
             "template": {"metadata": {"labels": {"app": "api"}},
                          "spec": {"containers": [{"name": "api", "image": "api:1"}]}}},
}


def write(tmp_path: Path) -> Path:
    d = tmp_path / "manifests"
    d.mkdir(exist_ok=True)
    (d / "a.yaml").write_text(MANIFESTS)
    (d / "b.json").write_text(json.dumps(DEPLOYMENT))
    (d / "notes.txt").write_text("ignored")
    return d


def test_version(drods: Drods) -> None:
    done = drods("version", "-o", "json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["client"]["version"]
    assert "drods" in info["server"]["gitVersion"]
    assert "Client Version: drods" in drods("version", "--client", role=None).stdout


def test_apply_get_delete(drods: Drods, tmp_path: Path) -> None:
    d = write(tmp_path)
    done = drods("apply", "-f", str(d))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "cluster/c-aws created", "propagationpolicy/c-pp created", "resourceplacementpolicy/c-rpp created",
        "deployment/api created",
    ]
    again = drods("apply", "-f", str(d))
    assert again.stdout.count("unchanged") == 4, again.stdout

    # Change one value and drop one field: the previous apply is remembered, so the field goes.
    (d / "a.yaml").write_text(MANIFESTS.replace("us-east-1", "us-east-2").replace(
        "  capabilities: [gpu, tls-encryption]\n", ""))
    changed = drods("apply", "-f", str(d / "a.yaml"))
    assert "cluster/c-aws configured" in changed.stdout and "propagationpolicy/c-pp unchanged" in changed.stdout

    cluster = json.loads(drods("get", "clusters", "c-aws", "-o", "json").stdout)
    assert cluster["spec"]["region"] == "us-east-2"
    plain, wide = (drods("get", "clusters", *o).stdout.splitlines()[0].split() for o in ((), ("-o", "wide")))
    assert "APIENDPOINT" not in plain and wide[:len(plain)] == plain, (plain, wide)
    assert wide[len(plain):] == ["ZONE", "APIENDPOINT", "MEMORY(ALLOC/USED)", "PODS(USED)", "TAINTS", "CORDONED"]
    assert "capabilities" not in cluster["spec"]

    listed = yaml.safe_load(drods("get", "cluster", "-l", "env=prod", "-o", "yaml").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c-aws"]
    assert json.loads(drods("get", "cluster", "-l", "env=dev", "-o", "json").stdout)["items"] == []

    table = drods("get", "mpp").stdout.splitlines()  # DRO-DS's PropagationPolicy (`pp` is Karmada's, as in kubectl)
    assert table[0].split()[0] == "NAME" and table[1].split()[0] == "c-pp"
    bare = drods("get", "mpp", "--no-headers").stdout.splitlines()  # as kubectl's (the AGE may have moved on)
    assert [line.split()[0] for line in bare] == [line.split()[0] for line in table[1:]] == ["c-pp"]
    assert json.loads(drods("get", "rpp", "c-rpp", "-o", "json").stdout)["spec"]["targetClusters"] == [
        {"selectorType": "label", "values": ["env=prod"]}]
    deploys = drods("get", "deployments", "-n", "default").stdout
    assert deploys.split()[:6] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "CLUSTERS", "AGE"] and "api" in deploys
    assert "NAMESPACE" in drods("get", "deploy", "-A").stdout
    assert "No deployments found in namespace other" in drods("get", "deploy", "-n", "other").stderr

    from_stdin = drods("apply", "-f", "-", "-o", "json", input=json.dumps({**DEPLOYMENT, "spec": {
        **DEPLOYMENT["spec"], "replicas": 5}}))
    assert json.loads(from_stdin.stdout)["spec"]["replicas"] == 5

    gone = drods("delete", "-f", str(d))
    assert gone.returncode == 0, gone.stderr
    assert "cluster/c-aws deleted" in gone.stdout and "deployment/api deleted" in gone.stdout
    assert json.loads(drods("get", "clusters", "-o", "json").stdout)["items"] == []
    missing = drods("delete", "cluster", "c-aws")
    assert missing.returncode == 1 and "NotFound" in missing.stderr
    assert drods("delete", "cluster", "c-aws", "--ignore-not-found").returncode == 0


def test_invalid_object_is_refused_and_nothing_stored(drods: Drods, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFESTS.split("---")[0].replace("c-aws", "c-bad") + "  syncMode: Sideways\n  extra: 1\n")
    done = drods("apply", "-f", str(bad))
    assert done.returncode == 1
    assert "spec.syncMode" in done.stderr and "spec.extra" in done.stderr, done.stderr
    assert drods("get", "cluster", "c-bad").returncode == 1
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    failed = drods("apply", "-f", str(broken))
    assert failed.returncode == 1 and "MALFORMED_FILE" in failed.stderr


def test_cluster_commands(drods: Drods) -> None:
    done = drods("cluster", "register", "c-edge", "--endpoint", "https://edge.example", "--region", "us-south",
                 "--zone", "dfw-1", "--provider", "onprem", "--city", "DFW", "--label", "tier=edge",
                 "--label", "env=prod", "--capability", "gpu", "--pull")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cluster/c-edge registered"
    shown = yaml.safe_load(drods("cluster", "show", "c-edge", "-o", "yaml").stdout)
    assert shown["city"] == "DFW" and shown["syncMode"] == "Pull" and shown["capabilities"] == ["gpu"]
    assert shown["labels"] == {"tier": "edge", "env": "prod"}
    assert "DFW" in drods("cluster", "show", "c-edge").stdout

    listed = json.loads(drods("cluster", "list", "-o", "json").stdout)
    assert "c-edge" in [c["name"] for c in listed["items"]]
    table = drods("cluster", "list", "-l", "tier=edge").stdout.splitlines()
    assert table[0].split()[:4] == ["NAME", "MODE", "ENDPOINT", "REGION"]
    assert table[1].split()[:2] == ["c-edge", "Pull"]

    dup = drods("cluster", "register", "c-edge", "--endpoint", "https://x")
    assert dup.returncode == 1 and "CLUSTER_ALREADY_EXISTS" in dup.stderr
    bad = drods("cluster", "register", "c-bad", "--label", "novalue")
    assert bad.returncode != 0

    assert drods("cluster", "remove", "c-edge").stdout.strip() == "cluster/c-edge removed"
    gone = drods("cluster", "show", "c-edge")
    assert gone.returncode == 1 and "CLUSTER_NOT_FOUND" in gone.stderr


def test_audit(drods: Drods) -> None:
    drods("cluster", "register", "c-audit", "--endpoint", "https://a")
    drods("cluster", "remove", "c-audit")
    entries = json.loads(drods("audit", "-o", "json").stdout)["items"]
    mine = [e for e in entries if e["path"].endswith("c-audit") or e.get("object", "").endswith("c-audit")]
    assert any(e["verb"] == "DELETE" and e["result"] == 200 for e in mine), entries[-5:]
    assert any(e["verb"] == "POST" for e in entries)
    assert "VERB" in drods("audit", "--limit", "2").stdout
    future = json.loads(drods("audit", "--since", "2999-01-01T00:00:00Z", "-o", "json").stdout)
    assert future["items"] == []
    recent = json.loads(drods("audit", "--since", "10m", "-o", "json").stdout)["items"]  # as kubectl logs --since
    assert any(e["path"].endswith("c-audit") for e in recent), recent[-3:]
    assert json.loads(drods("audit", "--until", "1d", "-o", "json").stdout)["items"] == []
    bad = drods("audit", "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr and "duration" in bad.stderr, bad.stderr
    denied = drods("audit", role="viewer")
    assert denied.returncode == 1 and "FORBIDDEN" in denied.stderr
    refused = drods("cluster", "register", "c-refused", "--endpoint", "https://a", role="viewer")
    assert refused.returncode == 1
    table = drods("audit", "--limit", "5").stdout  # the reason beside the refusal
    assert any("403" in line and "may not write" in line for line in table.splitlines()), table


def test_errors_exit_1_with_the_server_message(drods: Drods, tmp_path: Path) -> None:
    unknown = drods("get", "widgets")
    assert unknown.returncode == 1 and "RESOURCE_TYPE_NOT_FOUND" in unknown.stderr

    no_token = drods("get", "clusters", role=None)
    assert no_token.returncode == 1
    assert "UNAUTHENTICATED" in no_token.stderr or "Unauthorized" in no_token.stderr
    assert "DRODS_TOKEN" in no_token.stderr

    path = tmp_path / "c.yaml"
    path.write_text(MANIFESTS.split("---")[0].replace("c-aws", "c-viewer"))
    forbidden = drods("apply", "-f", str(path), role="viewer")
    assert forbidden.returncode == 1 and "Forbidden" in forbidden.stderr
    readable = drods("get", "clusters", "-o", "json", role="viewer")
    assert readable.returncode == 0 and "c-viewer" not in readable.stdout

    down = drods("get", "clusters", env={"DRODS_SERVER": f"http://127.0.0.1:{free_port()}"})
    assert down.returncode == 1 and "cannot connect" in down.stderr

    wrong_output = drods("get", "clusters", "-o", "xml")
    assert wrong_output.returncode != 0


def test_tls_server_with_ca_file(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "tls", byo_cert=True) as server:
        env = {"DRODS_TOKEN": server.token("viewer")}
        assert server.cert is not None
        ok = server.run_cli("get", "clusters", "--server", server.url, "--ca-file", str(server.cert), env=env)
        assert ok.returncode == 0, ok.stderr
        untrusted = server.run_cli("get", "clusters", "--server", server.url, env={**env, "DRODS_CA_FILE": ""})
        assert untrusted.returncode == 1 and "CERTIFICATE_UNTRUSTED" in untrusted.stderr
        assert "--ca-file" in untrusted.stderr and "Is the server running" not in untrusted.stderr
        # it serves its own certificate: the hint names that case, not only the data dir's CA (walkthrough AR)
        assert "your own CA" in untrusted.stderr, untrusted.stderr
        insecure = server.run_cli("version", "--server", server.url, "--insecure-skip-tls-verify", env=env)
        assert insecure.returncode == 0, insecure.stderr


def test_get_wide_shows_the_extra_columns(drods: Drods, tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("apiVersion: multicluster.io/v1alpha1\nkind: Binding\nmetadata: {name: wide-b}\n"
                 "spec: {replicas: 1}\n")
    assert drods("apply", "-f", str(f)).returncode == 0
    plain = drods("get", "bindings").stdout.splitlines()
    wide = drods("get", "bindings", "-o", "wide").stdout.splitlines()
    assert "COST/H" not in plain[0] and "USERS" not in plain[0]
    assert wide[0].split()[-2:] == ["COST/H", "USERS"]
    assert any(line.split()[0] == "wide-b" for line in wide[1:])
    assert drods("get", "bindings", "-o", "bogus").returncode != 0


def test_audit_shows_component_changes_beside_user_changes(drods: Drods, cli_server: ServerProcess,
                                                           tmp_path: Path) -> None:
    """A user's Deployment and policy, and the Binding the resource detector makes for them: the
    user's requests and the component's change (with the replica that made it) in one listing."""
    manifest = tmp_path / "app.yaml"
    manifest.write_text(yaml.safe_dump_all([
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "audited-web", "namespace": "default", "labels": {"app": "audited-web"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "audited-web"}},
                  "template": {"metadata": {"labels": {"app": "audited-web"}},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "audited-web"},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "audited-web"}]}},
    ]))
    applied = drods("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr

    def binding_records() -> list[dict[str, Any]]:
        entries = json.loads(drods("audit", "--kind", "Binding", "-o", "json").stdout)["items"]
        return [e for e in entries if e["subject"] == "component:resource-detector"
                and any("audited-web" in str(c.get("name")) for c in e.get("changes") or [])]

    wait_until(lambda: bool(binding_records()), 20, "the detector's Binding in the audit log")
    assert cli_server.proc is not None
    record = binding_records()[0]
    assert record["role"] == "component" and record["changes"][0]["verb"] == "create"
    assert record["replica"].startswith(f"{socket.gethostname()}-{cli_server.proc.pid}-")
    table = drods("audit").stdout
    rows = [line for line in table.splitlines() if "audited-web" in line]
    assert any("component:resource-detector" in r and record["replica"] in r and "Binding" in r for r in rows), table
    assert any("admin" in r and "Deployment" in r for r in rows), table  # the user's change beside it
    assert all(" done " in r for r in rows if "component:resource-detector" in r), rows
    # a token the CLI signs is recorded with its audit entry in one transaction: done, not "unknown"
    made = drods("token", "create", "--role", "viewer", "--subject", "audited-token", "--data-dir",
                 str(cli_server.data_dir), role=None)
    assert made.returncode == 0, made.stderr
    rows = [line for line in drods("audit", "--kind", "Token").stdout.splitlines() if " cli " in line]
    assert rows and all(" done " in r and "unknown" not in r for r in rows), rows


def test_apply_of_yaml_nan_or_inf_names_the_field_and_applies_the_rest(drods: Drods, tmp_path: Path) -> None:
    """YAML's .nan/.inf ended `drods apply` in a traceback ("Out of range float values are not JSON
    compliant"); now that object fails with the field named, and the others are applied."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: multicluster.io/v1alpha1\nkind: Cluster\nmetadata: {name: c-nan}\n"
                   "spec: {region: eu, users: [{site: LHR, weight: .inf}]}\n---\n"
                   "apiVersion: multicluster.io/v1alpha1\nkind: Cluster\nmetadata: {name: c-ok}\nspec: {region: eu}\n")
    done = drods("apply", "-f", str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cluster/c-nan: spec.users[0].weight: .nan and .inf are not numbers" in done.stderr, done.stderr
    assert "cluster/c-ok created" in done.stdout, done.stdout
    assert drods("delete", "cluster", "c-ok").returncode == 0
