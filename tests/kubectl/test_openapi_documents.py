"""The OpenAPI documents kubectl relies on, checked without kubectl (in-process server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from drods.api.auth import Role, TokenAuthority, load_or_create_signing_key
from drods.api.routes.openapi_k8s import group_version_documents, v2_protobuf
from drods.model.kinds import ALL_KINDS, MULTICLUSTER_KINDS
from drods.server import ServerConfig, build_app
from drods.store import default_store_url


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = build_app(ServerConfig(store_url=default_store_url(tmp_path), data_dir=tmp_path))
    token = TokenAuthority(load_or_create_signing_key(tmp_path / "jwt.key")).issue(Role.VIEWER)
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as c:
        yield c


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_every_ref_resolves_and_the_dialect_is_openapi_3_0() -> None:
    for doc in group_version_documents(ALL_KINDS).values():
        schemas = doc["components"]["schemas"]
        for ref in _refs(doc):
            assert ref.removeprefix("#/components/schemas/") in schemas, ref
        text = json.dumps(doc["components"])
        assert '"type": "null"' not in text and '"const"' not in text and '"title"' not in text
        for schema in schemas.values():
            for prop in (schema.get("properties") or {}).values():
                for key in ("exclusiveMinimum", "exclusiveMaximum"):
                    assert isinstance(prop.get(key, True), bool)


def test_each_kind_advertises_server_side_field_validation() -> None:
    docs = group_version_documents(ALL_KINDS)
    for kind in ALL_KINDS:
        doc = docs["apis/" + kind.api_version if kind.group else "api/" + kind.version]
        patches = [item["patch"] for item in doc["paths"].values()
                   if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind.kind]
        assert patches, kind.kind
        for op in patches:
            assert {"name": "fieldValidation", "in": "query"}.items() <= op["parameters"][0].items()
            # No strategic merge patch: kubectl must not compute one from these schemas.
            assert "application/strategic-merge-patch+json" not in op["requestBody"]["content"]
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        assert any(gvk in s.get("x-kubernetes-group-version-kind", []) for s in doc["components"]["schemas"].values())


def test_spec_schemas_come_from_the_models() -> None:
    doc = group_version_documents(ALL_KINDS)["apis/multicluster.io/v1alpha1"]
    schemas = doc["components"]["schemas"]
    cluster = schemas["io.multicluster.v1alpha1.Cluster"]
    spec_ref = "#/components/schemas/io.multicluster.v1alpha1.ClusterSpec"
    assert cluster["properties"]["spec"]["allOf"] == [{"$ref": spec_ref}]
    spec = schemas["io.multicluster.v1alpha1.ClusterSpec"]
    assert spec["properties"]["syncMode"]["enum"] == ["Push", "Pull"]
    assert spec["properties"]["region"] == {"type": "string", "default": None, "nullable": True}
    assert spec["additionalProperties"] is False
    selector = schemas["io.multicluster.v1alpha1.TargetClusterSelector"]
    assert selector["properties"]["selectorType"]["enum"] == ["name", "label"]
    assert {f"io.multicluster.v1alpha1.{k.kind}" for k in MULTICLUSTER_KINDS} <= set(schemas)
    apps = group_version_documents(ALL_KINDS)["apis/apps/v1"]["components"]["schemas"]
    deployment = apps["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-preserve-unknown-fields"] is True


def test_served_documents(client: TestClient) -> None:
    index = client.get("/openapi/v3").json()["paths"]
    assert set(index) == {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/multicluster.io/v1alpha1",
                          "apis/networking.k8s.io/v1", "apis/autoscaling/v2", "apis/rbac.authorization.k8s.io/v1",
                          "apis/policy/v1", "apis/policy.karmada.io/v1alpha1", "apis/apiextensions.k8s.io/v1",
                          "apis/discovery.k8s.io/v1", "apis/coordination.k8s.io/v1", "apis/storage.k8s.io/v1",
                          "apis/scheduling.k8s.io/v1", "apis/autoscaling.karmada.io/v1alpha1",
                          "apis/config.karmada.io/v1alpha1", "apis/networking.karmada.io/v1alpha1",
                          "apis/apps.karmada.io/v1alpha1", "apis/remedy.karmada.io/v1alpha1",
                          "apis/search.karmada.io/v1alpha1"}
    url = index["apis/multicluster.io/v1alpha1"]["serverRelativeURL"]
    doc = client.get(url).json()
    assert doc["openapi"].startswith("3.0")
    assert "/apis/multicluster.io/v1alpha1/clusters/{name}" in doc["paths"]
    v2 = client.get("/openapi/v2", headers={"Accept": "application/json"}).json()
    assert v2["swagger"] == "2.0" and "io.multicluster.v1alpha1.Cluster" in v2["definitions"]
    assert "#/components/" not in json.dumps(v2)
    pb = client.get("/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert pb.status_code == 200 and pb.content == v2_protobuf()
    assert pb.content.startswith(b"\x0a\x032.0")  # field 1 (swagger) = "2.0"


def test_errors_are_kubernetes_status(client: TestClient) -> None:
    missing = client.get("/openapi/v3/apis/nosuch/v1")
    assert missing.status_code == 404 and missing.json()["kind"] == "Status"
    anonymous = client.get("/openapi/v3", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    assert anonymous.json()["kind"] == "Status" and anonymous.json()["reason"] == "Unauthorized"
