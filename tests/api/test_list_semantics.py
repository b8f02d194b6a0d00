"""Kubernetes list semantics on every kind: across namespaces, field selectors, the core list paths."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.api.conftest import Api


def service(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": 80}]}}


def deployment(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def names(r: Any) -> list[tuple[str, str]]:
    assert r.status_code == 200, r.text
    return sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in r.json()["items"])


async def seed(api: Api) -> None:
    for ns in ("team-a", "team-b"):
        for n in ("web", "db"):
            r = await api.call("POST", f"/api/v1/namespaces/{ns}/services", json=service(n, ns))
            assert r.status_code == 201, r.text
            r = await api.call("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment(n, ns))
            assert r.status_code == 201, r.text


async def test_lists_across_namespaces_on_kubernetes_own_paths(api: Api) -> None:
    await seed(api)
    everything = [("team-a", "db"), ("team-a", "web"), ("team-b", "db"), ("team-b", "web")]
    assert names(await api.call("GET", "/api/v1/services")) == everything
    assert names(await api.call("GET", "/apis/apps/v1/deployments")) == everything
    r = await api.call("GET", "/api/v1/services")
    assert r.json()["kind"] == "ServiceList" and r.json()["metadata"]["resourceVersion"].isdigit()
    assert names(await api.call("GET", "/api/v1/namespaces/team-b/services")) == everything[2:]
    # The façade keeps its paths: /api/v1/clusters is DRO-DS's, a POST-only path is still a 405.
    assert (await api.call("GET", "/api/v1/clusters")).json()["items"] == []
    r = await api.call("GET", "/api/v1/whatif")
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert (await api.call("GET", "/api/v1/nonsense")).status_code == 404
    assert (await api.call("POST", "/api/v1/services", json=service("x", "team-a"))).status_code == 405


async def test_field_selectors_on_name_and_namespace(api: Api) -> None:
    await seed(api)
    q = "/api/v1/services?fieldSelector="
    assert names(await api.call("GET", q + "metadata.namespace=team-a")) == [("team-a", "db"), ("team-a", "web")]
    assert names(await api.call("GET", q + "metadata.namespace!=team-a,metadata.name==web")) == [("team-b", "web")]
    assert names(await api.call("GET", "/apis/apps/v1/deployments?fieldSelector=metadata.name%3Ddb")) == [
        ("team-a", "db"), ("team-b", "db")]
    r = await api.call("GET", q + "spec.type=ClusterIP")
    assert r.status_code == 400 and "field label not supported: spec.type" in r.text
    r = await api.call("GET", q + "nonsense")
    assert r.status_code == 400


async def test_watch_across_namespaces_with_a_field_selector(api: Api) -> None:
    await seed(api)
    rv = (await api.call("GET", "/api/v1/services")).json()["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []

    async def watch() -> None:
        async with api.client.stream(
                "GET", "/api/v1/services",
                params={"watch": "true", "resourceVersion": rv, "fieldSelector": "metadata.namespace=team-b"},
                headers=api.auth()) as r:
            async for line in r.aiter_lines():
                if line.strip():
                    events.append(json.loads(line))
                    if len(events) == 1:
                        return

    task = asyncio.create_task(watch())
    await api.call("POST", "/api/v1/namespaces/team-a/services", json=service("cache", "team-a"))
    await api.call("POST", "/api/v1/namespaces/team-b/services", json=service("cache", "team-b"))
    await asyncio.wait_for(task, 10)
    assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in events] == [("ADDED", "team-b")]
