"""The directory the API answers, read from the registry: only exporting namespaces are looked at."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drods.model.kinds import BINDING, CLUSTER, SERVICE_EXPORT, WORKLOAD_KINDS
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.steering.directory import directory
from drods.store import Store

SERVICE = next(k for k in WORKLOAD_KINDS if k.kind == "Service")
DEPLOYMENT = next(k for k in WORKLOAD_KINDS if k.kind == "Deployment")


def _deployment(ns: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_the_directory_reads_only_bindings_of_exporting_namespaces(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    await registry.create(CLUSTER, {"metadata": {"name": "east"}, "spec": {}})
    for ns in ("shop", "quiet"):
        await registry.create(DEPLOYMENT, _deployment(ns), ns)
        await registry.create(SERVICE, {"metadata": {"name": "web", "namespace": ns},
                                        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, ns)
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}
        body = {"metadata": {"name": f"web-{ns}"}, "spec": {"resource": ref},
                "status": {"placement": [{"cluster": "east", "replicas": 1}]}}
        await store.put(BINDING.key(f"web-{ns}"), json.dumps(body).encode())
    assert await directory(registry) == []  # nothing exported: no binding is even read

    await registry.create(SERVICE_EXPORT, {"metadata": {"name": "web", "namespace": "shop"}}, "shop")
    read: list[str] = []
    try_get = registry.try_get

    async def recording(kind: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        read.append(f"{namespace}/{name}")
        return await try_get(kind, name, namespace, **kw)

    monkeypatch.setattr(registry, "try_get", recording)
    [entry] = await directory(registry)
    assert (entry["namespace"], entry["name"]) == ("shop", "web")
    assert [(r["cluster"], r["replicas"], r["workloads"]) for r in entry["clusters"]] == \
        [("east", 1, ["Deployment/web"])]
    assert read == ["shop/web"]  # the quiet namespace's template was never read
