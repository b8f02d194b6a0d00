"""Secrets and task configuration at rest and in use (SEC2), as a user meets them: a real ``drods
serve`` on SQLite and on etcd; a Secret, the Work that carries it to a pull-mode member, a Cluster's
credentials and a marker planted in an object of every kind sealed by default (Bindings and every
template kind too) are nowhere in the files under the data dir (SQLite's file and WAL, the audit log)
or etcd's; a kind not sealed by default is found there (the scan sees what is stored); a viewer sees
Secret metadata only; ``drods keys rotate`` re-encrypts everything while the server runs."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from drods.model.kinds import BINDING, CLUSTER, RESOURCE_PLACEMENT_POLICY, SECRET, TEMPLATE_KINDS, WORK, Kind
from drods.security.at_rest import DEFAULT_RESOURCES, resource_name
from drods.security.envelope import Envelope, Keyring
from drods.store.etcd import EtcdStore
from tests.etcd_server import EtcdCluster, etcd_binary
from tests.server_process import ServerProcess

GV = "/apis/multicluster.io/v1alpha1"
SECRETS = "/api/v1/namespaces/default/secrets"
EDGE = "edge-1"
SEALED: tuple[Kind, ...] = (SECRET, WORK, CLUSTER, BINDING, *TEMPLATE_KINDS)
NOT_SEALED = RESOURCE_PLACEMENT_POLICY
MARKER = "test.drods.io/marker"


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(params=["sqlite", "etcd"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], list[Path], str | None]]:
    """(server args, files a store keeps its data in, etcd endpoint)."""
    if request.param == "sqlite":
        yield [], [], None
        return
    if etcd_binary() is None:
        pytest.skip("etcd binary not found")
    with EtcdCluster(1, base_dir=str(tmp_path / "etcd")) as cluster:
        yield ["--store", f"etcd://{cluster.endpoints[0]}"], [m.data_dir for m in cluster.members], \
            cluster.endpoints[0]


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out += [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
    return out


def _path(kind: Kind, name: str | None = None) -> str:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    ns = "/namespaces/default" if kind.namespaced else ""
    return f"{base}{ns}/{kind.plural}" + (f"/{name}" if name else "")


def _marked(kind: Kind, marker: str) -> dict[str, Any]:
    """An object of ``kind`` with ``marker`` in an annotation (a Work's also in its manifest)."""
    meta: dict[str, Any] = {"name": f"m-{kind.plural}", "annotations": {MARKER: marker}}
    if kind.namespaced:
        meta["namespace"] = "default"
    body: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
    if kind is WORK:
        body["spec"] = {"cluster": EDGE, "binding": "none",
                        "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": marker}}]}
    elif kind is BINDING:
        body["spec"] = {"replicas": 0}
    elif kind is CLUSTER:
        body["spec"] = {"syncMode": "Pull"}
    elif kind is NOT_SEALED:
        body["spec"] = {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "none",
                                             "namespace": "default"}}
    return body


def _plant_markers(http: httpx.Client) -> dict[Kind, str]:
    """A marker in an object of every kind sealed by default and of one that is not; each reads back."""
    tag = uuid.uuid4().hex
    markers = {k: f"marker-{k.plural}-{tag}" for k in (*SEALED, NOT_SEALED)}
    for kind, marker in markers.items():
        r = http.post(_path(kind), json=_marked(kind, marker))
        assert r.status_code == 201, (kind.kind, r.text)
    for kind, marker in markers.items():
        if kind is not WORK:  # no binding made it: the controllers delete it (its revisions stay for the scan)
            got = http.get(_path(kind, f"m-{kind.plural}")).json()
            assert got["metadata"].get("annotations", {}).get(MARKER) == marker, (kind.kind, got)
    return markers


def _leaks(paths: list[Path], needles: list[bytes]) -> list[str]:
    return [f"{f}: {n!r}" for f in _files(paths) for n in needles if n in f.read_bytes()]


def _setup(http: httpx.Client, value: str, kubeconfig_token: str) -> None:
    r = http.post("/api/v1/clusters", json={"name": EDGE, "syncMode": "Pull", "region": "eu"})
    assert r.status_code == 201, r.text
    r = http.put("/api/v1/metrics", json={"cluster": EDGE, "cpuCapacity": 64, "cpuUsage": 10,
                                          "memoryCapacity": 256, "memoryAvailable": 200})
    assert r.status_code == 200, r.text
    creds = {"kubeconfig": f"apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {{token: {kubeconfig_token}}}\n"}
    r = http.post("/api/v1/clusters", json={"name": "pushy", "syncMode": "Pull", "credentials": creds})
    assert r.status_code == 201, r.text
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
              "type": "Opaque", "data": {"password": base64.b64encode(value.encode()).decode()}}
    assert http.post(SECRETS, json=secret).status_code == 201
    env = [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "app", "image": "nginx", "env": env,
                                                             "resources": {"requests": {"cpu": "100m"}}}]}}}}
    assert http.post("/apis/apps/v1/namespaces/default/deployments", json=deploy).status_code == 201
    policy = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": "web"},
              "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                            "namespace": "default"},
                       "targetClusters": [{"selectorType": "name", "values": [EDGE]}]}}
    assert http.post(f"{GV}/resourceplacementpolicies", json=policy).status_code == 201


def _secret_in_work(http: httpx.Client) -> dict[str, Any] | None:
    for w in http.get(f"{GV}/works").json().get("items", []):
        for m in w["spec"].get("manifests", []):
            if m.get("kind") == "Secret":
                return m  # type: ignore[no-any-return]
    return None


def _raw_etcd_values(endpoint: str) -> list[tuple[str, bytes]]:
    async def read() -> list[tuple[str, bytes]]:
        store = EtcdStore([endpoint])
        try:
            kvs, _ = await store.range("/")
            return [(kv.key, kv.value) for kv in kvs]
        finally:
            await store.close()

    return asyncio.run(read())


def test_secrets_are_encrypted_at_rest_hidden_from_viewers_and_rotated_live(
        tmp_path: Path, backend: tuple[list[str], list[Path], str | None]) -> None:
    args, store_files, etcd_endpoint = backend
    data = tmp_path / "data"
    value = f"pw-{uuid.uuid4().hex}"
    cred = f"tok-{secrets.token_hex(12)}"
    needles = [value.encode(), base64.b64encode(value.encode()), cred.encode()]
    with ServerProcess(data, args=args) as server, server.client(timeout=30) as http:
        _setup(http, value, cred)
        carried = wait_for(lambda: _secret_in_work(http), 60, "a Work carrying the Secret")
        assert base64.b64decode(carried["data"]["password"]).decode() == value

        # Components' writes are audited under their names, with secret values redacted.
        def component_changes() -> dict[str, set[str]] | None:
            found: dict[str, set[str]] = {}
            for e in http.get("/api/v1/audit").json()["items"]:
                if e["subject"].startswith("component:"):
                    found.setdefault(e["subject"], set()).update(c["kind"] for c in e["changes"])
            return found if {"Binding", "Work"} <= set().union(*found.values(), set()) else None

        audited = wait_for(component_changes, 20, "the detector's Binding and the Work in the audit log")
        assert "Binding" in audited.get("component:resource-detector", set()), audited
        assert value not in http.get("/api/v1/audit").text

        # Viewers: metadata only, on the object and inside the Work; operators read the data.
        with server.client("viewer") as viewer:
            seen = viewer.get(f"{SECRETS}/db").json()
            assert seen["metadata"]["name"] == "db" and "data" not in seen
            assert all("data" not in s for s in viewer.get(SECRETS).json()["items"])
            assert "data" not in (_secret_in_work(viewer) or {"data": 1})
            assert value not in viewer.get(f"{GV}/works").text
        with server.client("operator") as operator:
            assert operator.get(f"{SECRETS}/db").json()["data"]["password"] == base64.b64encode(value.encode()).decode()

        # At rest: not in any file under the data dir (the SQLite file, its WAL and shared memory, the
        # audit log, histories), nor in etcd (values and files); every default-sealed kind's marker neither.
        markers = _plant_markers(http)
        assert {resource_name(k) for k in SEALED} == set(DEFAULT_RESOURCES)
        needles += [m.encode() for k, m in markers.items() if k is not NOT_SEALED]
        files = [data, *store_files]
        assert not _leaks(files, needles), _leaks(files, needles)
        assert _leaks(files, [markers[NOT_SEALED].encode()]), "a kind not sealed is not in the files: the scan is blind"
        for f in (p for p in data.rglob("*") if p.is_file() and p.name.startswith("drods.db")):
            assert f.stat().st_mode & 0o777 == 0o600, f
        if etcd_endpoint:
            raw = _raw_etcd_values(etcd_endpoint)
            assert raw and not [k for k, v in raw for n in needles if n in v]

        # Rotation while serving: a new primary KEK; everything sealed again; all still readable.
        done = server.run_cli("keys", "rotate", "--data-dir", str(data), "--settle-seconds", "1.5", *args)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["primary"] == "k2" and report["objectsReencrypted"] >= len(SEALED) + 1, report
        assert report["fieldsResealed"] >= 1 and report["objectsUnsealed"] == 0, report
        assert base64.b64decode(http.get(f"{SECRETS}/db").json()["data"]["password"]).decode() == value
        fresh = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "after", "namespace": "default"},
                 "stringData": {"k": "v"}}
        assert http.post(SECRETS, json=fresh).status_code == 201
        assert http.get(f"{SECRETS}/after").json()["data"] == {"k": "dg=="}  # stringData, stored as data
        envelope = Envelope(Keyring.load(data))
        raw = _raw_etcd_values(etcd_endpoint) if etcd_endpoint else _raw_sqlite_values(data / "drods.db")
        sealed = [v for k, v in raw if k.startswith(tuple(kind.key_prefix() for kind in SEALED))]
        assert len(sealed) >= len(SEALED) + 1 and {envelope.kek_of(v) for v in sealed} == {"k2"}, \
            [envelope.kek_of(v) for v in sealed]
        assert [envelope.kek_of(v) for k, v in raw if k == NOT_SEALED.key(f"m-{NOT_SEALED.plural}")] == [None]


def _raw_sqlite_values(path: Path) -> list[tuple[str, bytes]]:
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [(bytes(k).decode(), bytes(v)) for k, v in db.execute("select key, value from kv")]
    finally:
        db.close()
