"""A fleet-wide pass looks at the keys changed since the last one, and at every key when it must."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from drods.controllers.remedy import RESYNC_SECONDS, Remedies
from drods.machinery.changed import ChangedKeys
from drods.model.kinds import CLUSTER, REMEDY


def test_changed_keys_then_everything_on_demand_and_at_each_resync() -> None:
    now = [0.0]
    changed = ChangedKeys(30.0, clock=lambda: now[0])
    every = ["a", "b", "c"]
    assert changed.take(lambda: every) == ["a", "b", "c"]  # the first pass sees everything
    assert changed.take(lambda: every) == []
    changed.mark("c")
    changed.mark("a")
    assert changed.take(lambda: every) == ["a", "c"]
    changed.everything()
    assert changed.take(lambda: every) == ["a", "b", "c"]
    now[0] = 29.0
    changed.mark("b")
    assert changed.take(lambda: every) == ["b"]
    now[0] = 30.0  # the resync: everything, whatever was marked
    changed.mark("b")
    assert changed.take(lambda: every) == ["a", "b", "c"]
    assert changed.take(lambda: every) == []


def _cluster(name: str, ready: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


class Patches:
    def __init__(self, cache: dict[str, Any]) -> None:
        self.cache = cache
        self.patched: list[str] = []

    async def patch(self, kind: Any, name: str, body: dict[str, Any], *_: Any, **__: Any) -> None:
        self.patched.append(name)
        self.cache[CLUSTER.key(name)]["status"]["remedyActions"] = body["status"]["remedyActions"]


async def test_remedies_look_at_changed_clusters_and_every_one_when_a_remedy_changes() -> None:
    now = [0.0]
    cache = {CLUSTER.key(f"c{i}"): _cluster(f"c{i}", "True") for i in range(5)}
    registry = Patches(cache)
    fleet = SimpleNamespace(clusters=SimpleNamespace(cache=cache), registry=registry)
    remedy = {"metadata": {"name": "r"}, "spec": {"decisionMatches": [{"clusterConditionMatch": {
        "conditionType": "Ready", "operator": "Equal", "conditionStatus": "False"}}], "actions": ["TrafficControl"]}}
    remedies = SimpleNamespace(cache={REMEDY.key("r"): remedy})
    r = Remedies(fleet, remedies, clock=lambda: now[0])  # type: ignore[arg-type]
    assert await r.tick() == []
    cache[CLUSTER.key("c3")]["status"]["conditions"][0]["status"] = "False"
    cache[CLUSTER.key("c1")]["status"]["conditions"][0]["status"] = "False"
    r.changed.mark(CLUSTER.key("c3"))  # c1's change not seen yet: not looked at
    assert await r.tick() == ["c3"]
    r.changed.everything()  # as a Remedy's change does
    assert await r.tick() == ["c1"]
    remedy["spec"]["actions"] = []
    now[0] = RESYNC_SECONDS  # nothing marked: the resync looks at every cluster
    assert await r.tick() == ["c1", "c3"]
    assert registry.patched == ["c3", "c1", "c1", "c3"]
