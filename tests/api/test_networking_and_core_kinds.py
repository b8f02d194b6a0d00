"""networking.karmada.io kinds and cluster-scoped core kinds on the API: bad input is refused with
field causes and changes nothing, ``dryRun`` stores nothing, and the core paths keep Kubernetes'
answers (a namespaced kind is not created on the cluster-wide path; a namespaced token cannot write
a cluster-scoped kind)."""

from __future__ import annotations

import json
from typing import Any

from drods.api.auth import Role
from tests.api.conftest import Api

MCS = "/apis/networking.karmada.io/v1alpha1/namespaces/shop/multiclusterservices"
MCI = "/apis/networking.karmada.io/v1alpha1/namespaces/shop/multiclusteringresses"
PV = "/api/v1/persistentvolumes"


def mcs(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterService",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


def volume(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}}


async def test_bad_networking_documents_are_refused_with_their_fields(api: Api) -> None:
    r = await api.call("POST", MCS, json=mcs(types=["Everywhere"]))
    assert r.status_code == 422 and "spec.types" in r.text, r.text
    r = await api.call("POST", MCS, json=mcs(types=["CrossCluster"], providerClusters=[{"cluster": "a"}]))
    assert r.status_code == 422 and "providerClusters" in r.text, r.text
    bad_path = {"apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterIngress",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "web"}}}]}}]}}
    r = await api.call("POST", MCI, json=bad_path)
    assert r.status_code == 422 and "pathType" in r.text, r.text
    r = await api.call("POST", f"{MCS}?dryRun=All", json=mcs(types=["CrossCluster"]))
    assert r.status_code == 201
    assert (await api.call("GET", MCS)).json()["items"] == []


async def test_cluster_scoped_core_kinds_on_kubernetes_paths(api: Api) -> None:
    r = await api.call("POST", PV, json=volume("pv-a"))
    assert r.status_code == 201, r.text
    r = await api.call("PATCH", f"{PV}/pv-a/status", json={"status": {"phase": "Available"}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["status"] == {"phase": "Available"}
    assert [o["metadata"]["name"] for o in (await api.call("GET", PV)).json()["items"]] == ["pv-a"]
    r = await api.call("POST", PV, json={**volume("pv-b"), "metadata": {"name": "Not_A_Name"}})
    assert r.status_code == 422 and "metadata.name" in r.text, r.text
    assert (await api.call("POST", "/api/v1/configmaps", json={"metadata": {"name": "x"}})).status_code == 405
    assert (await api.call("GET", "/api/v1/nonsense/x")).status_code == 404
    ns_token = api.app.state.ctx.tokens.issue(Role.OPERATOR, subject="ns", namespaces=["shop"])  # type: ignore[attr-defined]
    r = await api.client.post(PV, json=volume("pv-c"), headers={"Authorization": f"Bearer {ns_token}"})
    assert r.status_code == 403
    assert (await api.call("DELETE", f"{PV}/pv-a")).status_code == 200
    assert (await api.call("GET", f"{PV}/pv-a")).status_code == 404


async def test_a_body_in_a_content_type_the_server_does_not_decode_is_a_415_and_stores_nothing(api: Api) -> None:
    """A create sent as text/plain (or protobuf, or a form) was decoded as JSON and stored; kube-apiserver
    answers 415. JSON, YAML and a missing content type still work."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}, "data": {"k": "v"}}
    path = "/api/v1/namespaces/default/configmaps"
    for media in ("text/plain", "application/vnd.kubernetes.protobuf", "application/x-www-form-urlencoded"):
        r = await api.call("POST", path, content=json.dumps(cm).encode(), headers={"content-type": media})
        assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType", (media, r.text)
        assert media in r.json()["message"]
    assert (await api.call("GET", f"{path}/plain")).status_code == 404
    r = await api.call("POST", path, content=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n",
                       headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text
