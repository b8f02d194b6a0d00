"""SEC3: a component's writes are audited as what they changed, not as whole objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from drods.model.kinds import SERVICE_ROUTE
from drods.registry import changes
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store.sqlite import SqliteStore


def route_object(cluster_at_7: str) -> dict[str, Any]:
    routes = [{"clientSite": f"S{i}", "instances": [{"cluster": cluster_at_7 if i == 7 else "a", "weight": 1.0,
                                                     "metric": 1.0, "reason": "best"}], "eligible": ["a"]}
              for i in range(50)]
    return {"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind, "metadata": {"name": "v.example"},
            "spec": {"serviceId": "v.example", "strategy": "experienceFirst", "routes": routes}}


async def test_a_components_batch_update_is_recorded_as_its_difference(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    recorded: list[tuple[str, changes.Change]] = []
    async def sink(who: str, change: changes.Change) -> None:
        recorded.append((who, change))

    token = changes.COMPONENT.set(("steering", sink))
    try:
        [(created, _)] = await registry.batch_upsert([(SERVICE_ROUTE, route_object("a"))], trusted=True)
        assert recorded[0][1].verb == "create" and any(op["path"] == "/spec" for op in recorded[0][1].patch)
        # Read back from the store, then from the object the caller holds: the same one-site record.
        [(held, _)] = await registry.batch_upsert([(SERVICE_ROUTE, route_object("b"))], trusted=True)
        await registry.batch_upsert([(SERVICE_ROUTE, route_object("c"))], trusted=True,
                                    current={SERVICE_ROUTE.key("v.example"): copy.deepcopy(held)})
        for (who, change), now in zip(recorded[1:], ("b", "c"), strict=True):
            assert who == "steering" and change.verb == "update"
            assert change.patch == [{"op": "replace", "path": "/spec/routes/7/instances/0/cluster", "value": now}]
    finally:
        changes.COMPONENT.reset(token)
        await store.close()
