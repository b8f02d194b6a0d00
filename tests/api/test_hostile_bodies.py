"""Deeply nested JSON and YAML — on the Kubernetes paths, the flat API and the batch — is refused
with a 4xx in the one error shape, never a 500 RecursionError, and changes nothing."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

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



async def _raw_get(api: Api, url: str) -> tuple[int, dict[str, str], bytes]:
    """A GET sent as bytes on a socket: httpx itself refuses a URL this long, a Go client or curl does not."""
    base = api.client.base_url
    reader, writer = await asyncio.open_connection(base.host, base.port)
    token = api.auth()["Authorization"]
    writer.write(f"GET {url} HTTP/1.1\r\nHost: {base.host}\r\nAuthorization: {token}\r\n\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)  # the server closes the connection after its answer
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


async def test_a_request_line_too_long_for_the_parser_is_refused_in_the_error_shape(api: Api) -> None:
    """~170 KB of label selector: the HTTP parser refuses it before the API sees it, and the answer is still
    in the API's words (``{code, message, details}``, a ``Status`` on a Kubernetes path); the server goes on."""
    selector = quote(",".join(f"app notin (v{i})" for i in range(6_000)))
    assert len(selector) > 160_000
    status, headers, body = await _raw_get(api, f"/api/v1/clusters?labelSelector={selector}")
    assert status == 400 and headers["content-type"] == "application/json", body[:200]
    refusal = json.loads(body)
    assert refusal["code"] == "BAD_REQUEST" and "too long" in refusal["message"] and refusal["details"] == {}

    status, headers, body = await _raw_get(api, f"{K8S}?labelSelector={selector}")  # kubectl's: a Status
    assert status == 400 and headers["content-type"] == "application/json", body[:200]
    refusal = json.loads(body)
    assert (refusal["kind"], refusal["reason"], refusal["code"]) == ("Status", "BadRequest", 400)
    assert "too long" in refusal["message"]
    assert (await api.call("GET", K8S)).status_code == 200
