"""Failover asks once per binding and NotReady episode, and forgets an episode when the cluster is back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from drods.controllers.failover import Failover
from drods.controllers.settings import MemberSettings
from drods.model.kinds import BINDING, CLUSTER
from drods.model.timefmt import rfc3339_ms


def cluster(ready: bool, since: float) -> dict[str, Any]:
    return {"metadata": {"name": "c1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": rfc3339_ms(since)}]}}


def binding(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"placement": [{"cluster": "c1", "replicas": 2}], "scheduledTime": rfc3339_ms(0.0)}}


class Asked:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def failover(self, name: str, cluster: str, reason: str, before: list[str]) -> None:
        assert cluster == "c1"
        self.names.append(name)


async def test_one_request_per_binding_and_episode() -> None:
    now = [100.0]
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): cluster(False, 10.0)})
    bindings = SimpleNamespace(cache={BINDING.key(b): binding(b) for b in ("a", "b")})
    fleet = SimpleNamespace(clusters=clusters, bindings=bindings, by_cluster={"c1": {"a", "b"}})
    asked = Asked()
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), asked, clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == ["a", "b"]
    assert await failover.tick() == []  # asked already: the scheduler has not answered yet
    assert asked.names == ["a", "b"]

    clusters.cache[CLUSTER.key("c1")] = cluster(True, 120.0)  # back: the episode is over
    assert await failover.tick() == [] and failover.triggered == {}

    clusters.cache[CLUSTER.key("c1")] = cluster(False, 150.0)  # down again: a new episode
    now[0] = 170.0
    assert await failover.tick() == []  # within the toleration
    now[0] = 181.0
    assert await failover.tick() == ["a", "b"]
    assert asked.names == ["a", "b", "a", "b"]
