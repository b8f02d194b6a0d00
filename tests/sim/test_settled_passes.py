"""A sim's pass plans only the workloads whose inputs moved: a member holding many settled
Deployments does not re-plan them all on every change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.api.context import ApiContext
from drods.sim import kinds as K
from drods.sim import workloads as W
from drods.sim.config import NodePool, SimConfig
from drods.sim.controller import SimController
from drods.sim.kinds import SIM_KINDS
from drods.sim.registry import SimRegistry
from drods.store import open_store


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                         "name": "c", "image": "app:1", "resources": {"requests": {"cpu": "10m"}}}]}}}}


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimController]:
    store = open_store(f"sqlite://{tmp_path / 'sim.db'}")
    ctx = ApiContext.build(store, tmp_path, kinds=SIM_KINDS)
    registry = SimRegistry(ctx.store, ctx.registry.secrets, ctx.registry.admission)
    cfg = SimConfig(name="s", pools=[NodePool(count=2, cpu=8, memory=32 << 30)], state_dir=tmp_path)
    controller = SimController(registry, ctx.store, cfg)
    await controller.bootstrap()
    await controller.start_informer()
    try:
        yield controller
    finally:
        await store.close()


async def settle(sim: SimController, passes: int = 6) -> None:
    for _ in range(passes):
        await sim.reconcile_once()


def ready(sim: SimController, name: str) -> int:
    d = sim.objects.cache.get(K.DEPLOYMENT.key(name, "default")) or {}
    return int((d.get("status") or {}).get("readyReplicas") or 0)


async def test_settled_deployments_are_not_planned_again_until_they_or_their_pods_change(
        sim: SimController, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(5):
        await sim.registry.create(K.DEPLOYMENT, deployment(f"app-{i}", 2))
    await settle(sim)
    assert [ready(sim, f"app-{i}") for i in range(5)] == [2] * 5

    planned: list[str] = []
    real = W.plan_deployment

    def counting(d: dict[str, Any], pods: list[dict[str, Any]], now: str) -> W.Plan:
        planned.append(d["metadata"]["name"])
        return real(d, pods, now)

    monkeypatch.setattr(W, "plan_deployment", counting)
    await sim.reconcile_once()
    assert planned == []  # nothing moved: nothing planned

    current = await sim.registry.get(K.DEPLOYMENT, "app-3", "default")
    await sim.registry.put_object(K.DEPLOYMENT, {**current, "spec": {**current["spec"], "replicas": 4}},
                                  resource_version=current["metadata"]["resourceVersion"])
    await settle(sim)
    assert set(planned) == {"app-3"}  # only the one that changed
    assert ready(sim, "app-3") == 4

    planned.clear()
    pod = next(p for k, p in sim.objects.cache.items() if k.startswith(K.POD.key_prefix("default"))
               and p["metadata"]["name"].startswith("app-1-"))
    await sim.registry.delete(K.POD, pod["metadata"]["name"], "default")  # a pod of a settled one goes
    await settle(sim)
    assert set(planned) == {"app-1"}
    assert ready(sim, "app-1") == 2
