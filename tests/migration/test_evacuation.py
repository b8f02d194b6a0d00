"""Automatic operations (A4): evacuating a cluster moves a StatefulSet that declares a migration hook
with a MigrationPlan (no target: the controller picks one) instead of a plain re-placement, and
everything else as before — over a real registry and store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from drods.api.context import ApiContext
from drods.controllers.rescheduler import Rescheduler
from drods.model.annotations import MIGRATION_HOOK, RESCHEDULE_REASON
from drods.model.kinds import BINDING, MIGRATION_PLAN, by_kind
from drods.model.reschedule import RescheduleRequest
from drods.store.sqlite import SqliteStore

STS = by_kind("apps/v1", "StatefulSet")
HOOK = {"command": {"image": "busybox", "command": ["true"]}}


def _binding(name: str, kind: str, workload: str, replicas: int) -> dict[str, Any]:
    api = "apps/v1"
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding", "metadata": {"name": name},
            "spec": {"resource": {"apiVersion": api, "kind": kind, "namespace": "shop", "name": workload},
                     "replicas": replicas},
            "status": {"phase": "Running", "placement": [{"cluster": "hot", "replicas": replicas}]}}


async def test_evacuation_migrates_hooked_statefulsets(tmp_path: Path) -> None:
    assert STS is not None
    ctx = ApiContext.build(SqliteStore(str(tmp_path / "drods.db")), tmp_path)
    reg = ctx.registry
    try:
        for name, hook in (("db", HOOK), ("cache", None)):
            meta: dict[str, Any] = {"name": name, "namespace": "shop"}
            if hook:
                meta["annotations"] = {MIGRATION_HOOK: json.dumps(hook)}
            await reg.create(STS, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
                                   "spec": {"replicas": 3}})
        for b in (_binding("statefulset-shop-db", "StatefulSet", "db", 3),
                  _binding("statefulset-shop-cache", "StatefulSet", "cache", 2)):
            await reg.create(BINDING, b)
        result = await Rescheduler(reg, clock=lambda: 1_800_000_000.0)(
            RescheduleRequest("evacuate", "hot", "water level 0.97 for 300 s", 1.0, 1.0))
        assert result.accepted and set(result.bindings) == {"statefulset-shop-db", "statefulset-shop-cache"}
        plans, _ = await reg.list(MIGRATION_PLAN, "shop")
        assert len(plans) == 1
        spec = plans[0]["spec"]
        assert spec["workloadRef"]["name"] == "db" and spec["sourceCluster"] == "hot"
        assert spec["trigger"] == "Automatic" and "targetCluster" not in spec and spec["hook"] == HOOK
        assert "water level 0.97" in spec["reason"]
        db = await reg.get(BINDING, "statefulset-shop-db")
        assert not (db["spec"].get("rescheduleTriggeredAt"))  # moved by the plan, not re-placed
        cache = await reg.get(BINDING, "statefulset-shop-cache")
        assert cache["spec"]["rescheduleTriggeredAt"] and "evacuate hot" in cache["metadata"]["annotations"][
            RESCHEDULE_REASON]
        # evacuating again while the plan runs starts no second plan
        await Rescheduler(reg)(RescheduleRequest("evacuate", "hot", "again", 1.0, 1.0))
        assert len((await reg.list(MIGRATION_PLAN, "shop"))[0]) == 1
    finally:
        await ctx.store.close()
