"""No failover while no cluster is Ready: the control plane more likely lost every member than they all
failed, and there is nowhere to go; once one is Ready, the NotReady clusters' tolerations start again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from drods.controllers.failover import Failover
from drods.controllers.settings import MemberSettings
from drods.model.kinds import BINDING, CLUSTER
from drods.model.timefmt import rfc3339_ms


def cluster(name: str, status: str, since: float, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": taints or []}, "status": {"conditions": [
        {"type": "Ready", "status": status, "lastTransitionTime": rfc3339_ms(since)}]}}


def binding(name: str, on: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"placement": [{"cluster": on, "replicas": 2}], "scheduledTime": rfc3339_ms(0.0)}}


class Asked:
    def __init__(self) -> None:
        self.moves: list[tuple[str, str]] = []

    async def failover(self, name: str, cluster: str, reason: str) -> None:
        self.moves.append((name, cluster))

    async def binding(self, name: str, reason: str) -> None:  # a taint's eviction
        self.moves.append((name, reason.split(" on cluster ")[1].split()[0]))


def plane(clusters: dict[str, dict[str, Any]], placed: dict[str, str], now: list[float]) -> tuple[Failover, Asked]:
    fleet = SimpleNamespace(
        clusters=SimpleNamespace(cache={CLUSTER.key(n): c for n, c in clusters.items()}),
        bindings=SimpleNamespace(cache={BINDING.key(b): binding(b, c) for b, c in placed.items()}),
        by_cluster={c: {b for b, on in placed.items() if on == c} for c in clusters})
    asked = Asked()
    return Failover(fleet, MemberSettings(tolerationSeconds=30), asked, clock=lambda: now[0]), asked  # type: ignore[arg-type]


def turn(failover: Failover, name: str, obj: dict[str, Any]) -> None:
    """What the cluster informer does: the cache changes, then the handler sees it."""
    cache = failover.fleet.clusters.cache
    key = CLUSTER.key(name)
    old = cache.get(key)
    cache[key] = obj
    failover.observe(key, old, obj)


async def test_nothing_fails_over_while_no_cluster_is_ready_and_tolerations_restart_once_one_is() -> None:
    now = [1000.0]
    failover, asked = plane({"a": cluster("a", "False", 100.0), "b": cluster("b", "False", 100.0),
                             "c": cluster("c", "Unknown", 100.0)},
                            {"on-a": "a", "on-b": "b"}, now)
    assert await failover.tick() == [] and failover.holding  # long past their 30 s: held all the same
    now[0] = 2000.0
    assert await failover.tick() == [] and asked.moves == []

    turn(failover, "a", cluster("a", "True", 2000.0))  # one member back: b's toleration starts now, not at 100
    assert await failover.tick() == [] and not failover.holding
    now[0] = 2029.0
    assert await failover.tick() == []  # b may be coming back too: not moved within its toleration
    now[0] = 2030.5
    assert await failover.tick() == ["on-b"] and asked.moves == [("on-b", "b")]


async def test_a_member_back_within_the_restarted_toleration_is_not_moved_off() -> None:
    now = [500.0]
    failover, asked = plane({"a": cluster("a", "False", 100.0), "b": cluster("b", "False", 100.0)},
                            {"on-a": "a", "on-b": "b"}, now)
    assert await failover.tick() == []
    turn(failover, "a", cluster("a", "True", 500.0))
    assert await failover.tick() == []
    now[0] = 520.0
    turn(failover, "b", cluster("b", "True", 520.0))  # back 20 s after the first: its copies stay where they are
    now[0] = 600.0
    assert await failover.tick() == [] and asked.moves == [] and failover.triggered == {}


async def test_a_single_members_fleet_never_fails_over_for_not_ready() -> None:
    now = [100.0]
    failover, asked = plane({"only": cluster("only", "False", 0.0)}, {"w": "only"}, now)
    for t in (100.0, 1000.0, 10_000.0):
        now[0] = t
        assert await failover.tick() == []
    assert asked.moves == [] and failover.holding


async def test_while_held_a_no_execute_taint_still_evicts() -> None:
    """A taint is somebody's decision to empty the cluster, not a silence the hold second-guesses."""
    now = [1000.0]
    taint = {"key": "maintenance", "effect": "NoExecute", "timeAdded": rfc3339_ms(900.0)}
    failover, asked = plane({"a": cluster("a", "False", 100.0, [taint]), "b": cluster("b", "False", 100.0)},
                            {"on-a": "a", "on-b": "b"}, now)
    assert await failover.tick() == ["on-a"] and failover.holding
    assert asked.moves == [("on-a", "a")]


async def test_with_one_cluster_ready_the_others_fail_over_as_ever() -> None:
    now = [1000.0]
    failover, asked = plane({"a": cluster("a", "False", 100.0), "b": cluster("b", "True", 0.0)},
                            {"on-a": "a", "on-b": "b"}, now)
    assert await failover.tick() == ["on-a"] and not failover.holding
