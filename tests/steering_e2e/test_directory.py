"""F8 end to end: exporting a Service makes a directory entry and a ServiceImport, and every member
receives the derived Service through propagation (pull-mode members: in their Works)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, eventually, serve

MC = "/apis/multicluster.io/v1alpha1"
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx",
                                                             "resources": {"requests": {"cpu": "100m"}}}]}}}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", components=frozenset({Component.STEERING, Component.MEMBERS})) as p:
        yield p


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_export_makes_a_directory_entry_and_derived_services_everywhere(plane: Plane) -> None:
    for name in ("east", "west", "edge"):
        await plane.cluster(name, 20.0)
    await plane.seen("east", "west", "edge")
    r = await plane.call("POST", "/api/v1/propagationpolicies",
                         json={"name": "web", "resourceType": "Deployment", "targetClusters": ["east"]})
    assert r.status_code == 201, r.text
    for path, body in (("/apis/apps/v1/namespaces/default/deployments", DEPLOYMENT),
                       ("/api/v1/namespaces/default/services", SERVICE),
                       (f"{MC}/namespaces/default/serviceexports",
                        {"apiVersion": "multicluster.io/v1alpha1", "kind": "ServiceExport",
                         "metadata": {"name": "web", "namespace": "default"}})):
        r = await plane.call("POST", path, json=body)
        assert r.status_code == 201, r.text

    async def entry() -> dict[str, Any] | None:
        body = (await plane.call("GET", "/api/v1/steering/directory")).json()
        e = next((s for s in body["services"] if s["name"] == "web"), None)
        return e if e and e["clusters"] else None

    e = await eventually(entry, 15.0, "the directory entry of web with its provider")
    assert [c["cluster"] for c in e["clusters"]] == ["east"]
    assert e["ports"] == [{"name": "http", "port": 80, "protocol": "TCP"}] and e["type"] == "ClusterSetIP"
    assert e["clusters"][0]["replicas"] == 1 and e["clusters"][0]["workloads"] == ["Deployment/web"]

    async def imported() -> dict[str, Any] | None:
        r = await plane.call("GET", f"{MC}/namespaces/default/serviceimports/web")
        return r.json() if r.status_code == 200 and r.json().get("status", {}).get("clusters") else None

    imp = await eventually(imported, 10.0, "the ServiceImport")
    assert imp["spec"]["clusters"] == ["east"] and imp["spec"]["ports"][0]["port"] == 80

    async def delivered() -> dict[str, Any] | None:
        works = (await plane.call("GET", f"{MC}/works")).json()["items"]
        got = {w["spec"]["cluster"]: [m["metadata"]["name"] for m in w["spec"]["manifests"]] for w in works
               if w["spec"]["binding"] == "derived-default-web"}
        return got if set(got) == {"east", "west", "edge"} else None

    got = await eventually(delivered, 15.0, "the derived Service in every member's Work")
    assert all(names == ["derived-web"] for names in got.values())

    # Unexporting removes the import and the derived Service.
    r = await plane.call("DELETE", f"{MC}/namespaces/default/serviceexports/web")
    assert r.status_code == 200, r.text

    async def gone() -> bool:
        a = await plane.call("GET", f"{MC}/namespaces/default/serviceimports/web")
        b = await plane.call("GET", "/api/v1/namespaces/default/services/derived-web")
        return a.status_code == 404 and b.status_code == 404

    await eventually(gone, 10.0, "the import and the derived Service to go")
