"""Deeply nested JSON and YAML — on the Kubernetes paths, the flat API and the batch — is refused
with a 4xx in the one error shape, never a 500 RecursionError, and changes nothing."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

K8S = "/apis/multicluster.io/v1alpha1/clusters"


def _deep_json(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize("depth", [150, 5_000, 200_000])
async def test_deep_bodies_are_refused_cleanly(api: Api, depth: int) -> None:
    deep_list = b"[" * depth + b"]" * depth
    deep_yaml = b"a:\n" + b"".join(b"  " * i + b"- \n" for i in range(1, min(depth, 3000)))
    cases = [
        ("POST", K8S, deep_list, "application/json"),
        ("POST", K8S, b'{"apiVersion":"multicluster.io/v1alpha1","kind":"Cluster","metadata":{"name":"x"},"spec":'
         + _deep_json(depth) + b"}", "application/json"),
        ("POST", K8S, b"[" * depth, "application/json"),  # unterminated, too
        ("POST", K8S, deep_yaml, "application/yaml"),
        ("PATCH", f"{K8S}/x", _deep_json(depth), "application/merge-patch+json"),
        ("POST", "/api/v1/clusters", b'{"name":"x","labels":' + _deep_json(depth) + b"}", "application/json"),
        ("POST", "/api/v1/sync/batch", b'{"objects":[' + _deep_json(depth) + b"]}", "application/json"),
        ("PUT", "/api/v1/metrics", b'{"cluster":"x","extra":' + deep_list + b"}", "application/json"),
    ]
    for method, path, body, media in cases:
        r = await api.call(method, path, content=body, headers={"content-type": media})
        assert 400 <= r.status_code < 500, (method, path, r.status_code, r.text[:300])
        doc = r.json()
        assert ("code" in doc and "message" in doc and "details" in doc) or doc.get("kind") == "Status", doc
    listed = (await api.call("GET", "/api/v1/clusters")).json()["items"]
    assert listed == []
