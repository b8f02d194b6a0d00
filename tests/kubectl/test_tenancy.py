"""Tenancy (SEC1), as an administrator hands out tokens: an operator limited to team-a and team-b acts
on namespaced objects there and nowhere else, on every path (Kubernetes and flat, kubectl and
curl-like clients); a namespaced viewer reads Secret metadata only; ``drods token list`` shows live
tokens by ID and ``drods token revoke ID`` shuts one out of every request at once."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.server_process import ServerProcess

DEPLOYS = "/apis/apps/v1/namespaces/{ns}/deployments"


def deployment(name: str, ns: str) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def _token(server: ServerProcess, *args: str) -> str:
    done = server.run_cli("token", "create", "--data-dir", str(server.data_dir), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _client(server: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, verify=server.verify, timeout=30,
                        headers={"Authorization": f"Bearer {token}"})


def test_namespaced_tokens_and_revocation(tmp_path: Path, kubectl_path: str) -> None:
    with ServerProcess(tmp_path / "data") as server:
        team = _token(server, "--role", "operator", "--namespace", "team-a", "--namespace", "team-b",
                      "--subject", "team-lead")
        looker = _token(server, "--role", "viewer", "--namespace", "team-a")
        refused = server.run_cli("token", "create", "--data-dir", str(server.data_dir), "--role", "admin",
                                 "--namespace", "x")
        assert refused.returncode != 0 and "operator and viewer" in refused.stderr

        with _client(server, server.token("admin")) as admin:
            r = admin.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": "team-a"}})
            assert r.status_code == 201, r.text
        with _client(server, team) as http:
            for ns in ("team-a", "team-b"):
                assert http.post(DEPLOYS.format(ns=ns), json=deployment("web", ns)).status_code == 201
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team-a"},
                      "stringData": {"password": "p"}}
            assert http.post("/api/v1/namespaces/team-a/secrets", json=secret).status_code == 201
            assert http.get("/api/v1/namespaces/team-a/secrets/db").json()["data"] == {"password": "cA=="}
            # its own Namespace object it may read, no other, and it may not delete it
            assert http.get("/api/v1/namespaces/team-a").status_code == 200
            assert http.get("/api/v1/namespaces/team-c").status_code == 403
            assert http.delete("/api/v1/namespaces/team-a").status_code == 403
            # Not another namespace, not all namespaces, nothing cluster-scoped, on any path.
            refusals = [
                http.post(DEPLOYS.format(ns="team-c"), json=deployment("web", "team-c")),
                http.get(DEPLOYS.format(ns="team-c")),
                http.get("/apis/apps/v1/deployments"),
                http.get("/apis/multicluster.io/v1alpha1/clusters"),
                http.post("/apis/multicluster.io/v1alpha1/bindings", json={}),
                http.get("/apis/multicluster.io/v1alpha1/works"),
                http.get("/api/v1/namespaces"),
                http.get("/api/v1/clusters"),
                http.post("/api/v1/clusters", json={"name": "x"}),
                http.get("/api/v1/bindings"),
                http.put("/api/v1/metrics", json={"cluster": "x"}),
                http.post("/api/v1/sync/batch", json={"objects": []}),
                http.get("/api/v1/monitor/realtime"),
            ]
            assert [r.status_code for r in refusals] == [403] * len(refusals), [r.text for r in refusals]
            assert all(r.json()["code"] in ("FORBIDDEN", "Forbidden") or r.json().get("reason") == "Forbidden"
                       for r in refusals)
        with server.client("admin") as admin:
            assert admin.get(DEPLOYS.format(ns="team-c")).status_code == 200  # nothing was created there
            assert admin.get(DEPLOYS.format(ns="team-c")).json()["items"] == []

        # A namespaced viewer: reads its namespace, Secret metadata only; writes nothing.
        with _client(server, looker) as http:
            seen = http.get("/api/v1/namespaces/team-a/secrets/db").json()
            assert seen["metadata"]["name"] == "db" and "stringData" not in seen and "data" not in seen
            assert [d["metadata"]["name"] for d in http.get(DEPLOYS.format(ns="team-a")).json()["items"]] == ["web"]
            assert http.get(DEPLOYS.format(ns="team-b")).status_code == 403
            assert http.delete(DEPLOYS.format(ns="team-a") + "/web").status_code == 403

        # kubectl with the team token: its namespaces work, the rest is Forbidden.
        kubeconfig = tmp_path / "team.kubeconfig"
        made = server.run_cli("kubeconfig", "--server", server.url, "--token", team, "--data-dir",
                              str(server.data_dir))
        kubeconfig.write_text(made.stdout)

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([kubectl_path, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}",
                                   *args], capture_output=True, text=True, timeout=60, check=False,
                                  env={**os.environ, "KUBECONFIG": ""})

        got = kubectl("-n", "team-b", "get", "deployments", "-o", "name")
        assert got.returncode == 0 and "web" in got.stdout, got.stderr
        denied = kubectl("get", "clusters")
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr

        # Token IDs: list, revoke; the revoked token is refused everywhere at once.
        listed = server.run_cli("token", "list", "--data-dir", str(server.data_dir), "-o", "json")
        assert listed.returncode == 0, listed.stderr
        records = {r["subject"]: r for r in json.loads(listed.stdout)["items"]}
        assert records["team-lead"]["namespaces"] == ["team-a", "team-b"] and records["team-lead"]["role"] == "operator"
        # a watch the token opened before: it ends once the token is revoked, not streams on for ever
        first, ended = threading.Event(), threading.Event()

        def watch() -> None:
            with _client(server, team) as http, http.stream(
                    "GET", "/api/v1/namespaces/team-a/secrets", params={"watch": "true"},
                    timeout=httpx.Timeout(10, read=None)) as r:
                for line in r.iter_lines():
                    if line.strip():
                        first.set()
            ended.set()

        threading.Thread(target=watch, daemon=True).start()
        assert first.wait(10), "the watch saw the Secret"
        assert not ended.is_set()
        revoked = server.run_cli("token", "revoke", records["team-lead"]["id"], "--data-dir", str(server.data_dir))
        assert revoked.returncode == 0, revoked.stderr
        assert ended.wait(15), "a watch of the revoked token still streams"
        with _client(server, team) as http:
            deadline = time.monotonic() + 10
            while http.get(DEPLOYS.format(ns="team-a")).status_code != 401:
                assert time.monotonic() < deadline, "the revoked token is still accepted"
                time.sleep(0.1)
            assert http.get(DEPLOYS.format(ns="team-a")).json().get("message", "").find("revoked") >= 0
        with _client(server, looker) as http:
            assert http.get(DEPLOYS.format(ns="team-a")).status_code == 200
        again = server.run_cli("token", "list", "--data-dir", str(server.data_dir), "-o", "json")
        assert "team-lead" not in {r["subject"] for r in json.loads(again.stdout)["items"]}
        unknown = server.run_cli("token", "revoke", "nope", "--data-dir", str(server.data_dir))
        assert unknown.returncode == 1
