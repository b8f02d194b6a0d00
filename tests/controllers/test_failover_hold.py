"""No failover while no cluster is Ready: the control plane more likely lost every member than they all
failed, and there is nowhere to go; once one is Ready, the NotReady clusters' tolerations start again. While
most of the fleet is NotReady, failovers go at a slow pace (none on a small fleet)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from drods.controllers.failover import Failover
from drods.controllers.settings import MemberSettings
from drods.machinery import metrics
from drods.model.kinds import BINDING, CLUSTER
from drods.model.timefmt import rfc3339_ms
from drods.store import Store
from drods.store.sqlite import SqliteStore
from tests.controllers.kept_state import KeptState
from tests.monitor_e2e.conftest import eventually


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


def plane(clusters: dict[str, dict[str, Any]], placed: dict[str, str], now: list[float],
          store: Store | KeptState | None = None, **settings: Any) -> tuple[Failover, Asked]:
    fleet = SimpleNamespace(
        store=store if store is not None else KeptState(),
        clusters=SimpleNamespace(cache={CLUSTER.key(n): c for n, c in clusters.items()}),
        bindings=SimpleNamespace(cache={BINDING.key(b): binding(b, c) for b, c in placed.items()}),
        by_cluster={c: {b for b, on in placed.items() if on == c} for c in clusters})
    asked = Asked()
    return Failover(fleet, MemberSettings(tolerationSeconds=30, **settings), asked,  # type: ignore[arg-type]
                    clock=lambda: now[0]), asked


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


@pytest.fixture
async def kept(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The store successive leaders share."""
    store = SqliteStore(str(tmp_path / "drods.db"))
    yield store
    await store.close()


def leader(store: Store, now: list[float], a_ready_since: float | None = None) -> tuple[Failover, Asked]:
    """A leader of a and b, each with a binding: b NotReady since 100, a too or Ready since ``a_ready_since``."""
    a = cluster("a", "False", 100.0) if a_ready_since is None else cluster("a", "True", a_ready_since)
    return plane({"a": a, "b": cluster("b", "False", 100.0)}, {"on-a": "a", "on-b": "b"}, now, store)


async def test_a_new_leader_counts_the_tolerations_from_the_end_of_its_predecessors_hold(kept: Store) -> None:
    """The hold's end is kept in the store: a leader taking over 10 s after it does not move b off at once."""
    now = [1000.0]
    first, _ = leader(kept, now)
    assert await first.tick() == [] and first.holding
    now[0] = 2000.0
    turn(first, "a", cluster("a", "True", 2000.0))
    assert await first.tick() == [] and not first.holding

    now[0] = 2010.0  # the first leader is gone; the next finds a Ready and b NotReady since 100
    second, asked = leader(kept, now, a_ready_since=2000.0)
    assert await second.tick() == [] and not second.holding
    now[0] = 2029.0
    assert await second.tick() == []
    now[0] = 2030.5
    assert await second.tick() == ["on-b"] and asked.moves == [("on-b", "b")]


async def test_a_new_leader_finding_its_predecessor_held_and_the_fleet_back_counts_from_its_own_start(
        kept: Store) -> None:
    """The leader died in the hold and a came back before the next one started: when the hold ended is not
    known, so b's toleration counts from the new leader's first pass."""
    now = [1000.0]
    first, _ = leader(kept, now)
    assert await first.tick() == [] and first.holding

    now[0] = 3000.0
    second, asked = leader(kept, now, a_ready_since=2500.0)
    assert await second.tick() == [] and not second.holding and second.resumed_at == 3000.0
    now[0] = 3029.0
    assert await second.tick() == []
    now[0] = 3030.5
    assert await second.tick() == ["on-b"] and asked.moves == [("on-b", "b")]

    now[0] = 3040.0  # and the one after it knows that hold ended at 3000
    third, _ = leader(kept, now, a_ready_since=2500.0)
    await third.tick()
    assert third.resumed_at == 3000.0 and not third.holding


def fleet_of(ready: int, down: int, since: float = 100.0) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """``ready`` Ready clusters and ``down`` NotReady ones, a binding on each of those (``on-dN``)."""
    clusters = {f"r{i}": cluster(f"r{i}", "True", 0.0) for i in range(ready)}
    clusters |= {f"d{i}": cluster(f"d{i}", "False", since) for i in range(down)}
    return clusters, {f"on-d{i}": f"d{i}" for i in range(down)}


async def test_most_of_a_large_fleet_not_ready_fails_over_at_the_secondary_rate() -> None:
    """8 of 12 NotReady (over 55 %, more than 10 clusters): 0.1 binding a second, the oldest due first."""
    now = [1000.0]
    failover, asked = plane(*fleet_of(4, 8), now)
    assert await failover.tick() == ["on-d0"] and failover.paced == "slowed" and len(failover.waiting) == 7
    now[0] = 1005.0
    assert await failover.tick() == []
    now[0] = 1010.0
    assert await failover.tick() == ["on-d1"]
    now[0] = 1040.0  # a burst of one: not three at once after a quiet half-minute
    assert await failover.tick() == ["on-d2"]

    turn(failover, "d3", cluster("d3", "True", 1040.0))  # back: its binding no longer waits; 7 of 12 still over
    now[0] = 1050.0
    assert await failover.tick() == ["on-d4"]
    for name in ("d0", "d5", "d6", "d7"):
        turn(failover, name, cluster(name, "True", 1050.0))
    now[0] = 1050.5  # 3 of 12 NotReady, each already moved off: nothing left waiting, the pace full again
    assert await failover.tick() == [] and failover.paced == "full" and not failover.waiting
    assert [b for b, _ in asked.moves] == ["on-d0", "on-d1", "on-d2", "on-d4"]


async def test_most_of_a_small_fleet_not_ready_halts_failover_until_fewer_are() -> None:
    now = [1000.0]
    failover, asked = plane(*fleet_of(1, 2), now)
    for t in (1000.0, 2000.0, 5000.0):
        now[0] = t
        assert await failover.tick() == [] and failover.paced == "halted"
    turn(failover, "d0", cluster("d0", "True", 5000.0))  # 1 of 3: the other's toleration ran out long ago
    assert await failover.tick() == ["on-d1"] and asked.moves == [("on-d1", "d1")] and not failover.waiting


async def test_a_configured_rate_paces_a_healthy_fleets_failovers() -> None:
    now = [1000.0]
    clusters, _ = fleet_of(10, 1)
    failover, asked = plane(clusters, {f"w{i}": "d0" for i in range(5)}, now, evictionRate=2.0)
    assert await failover.tick() == ["w0", "w1"] and failover.paced == "limited"
    now[0] = 1000.5
    assert await failover.tick() == ["w2"]
    now[0] = 1010.0
    assert await failover.tick() == ["w3", "w4"] and not failover.waiting


async def test_a_no_execute_taint_evicts_at_once_while_failover_is_halted() -> None:
    now = [1000.0]
    taint = {"key": "maintenance", "effect": "NoExecute", "timeAdded": rfc3339_ms(900.0)}
    clusters, placed = fleet_of(1, 2)
    clusters["d0"] = cluster("d0", "False", 100.0, [taint])
    failover, asked = plane(clusters, placed, now)
    assert await failover.tick() == ["on-d0"] and failover.paced == "halted"
    assert asked.moves == [("on-d0", "d0")]


async def test_a_hold_drops_the_waiting_failovers_and_they_count_from_its_end() -> None:
    now = [1000.0]
    failover, asked = plane(*fleet_of(5, 7), now)
    assert await failover.tick() == ["on-d0"] and len(failover.waiting) == 6
    for i in range(5):
        turn(failover, f"r{i}", cluster(f"r{i}", "False", 1001.0))
    now[0] = 1100.0
    assert await failover.tick() == [] and failover.holding and not failover.waiting
    turn(failover, "r0", cluster("r0", "True", 1100.0))  # 11 of 12 NotReady: slowed, tolerations from now
    assert await failover.tick() == [] and not failover.holding
    now[0] = 1129.0
    assert await failover.tick() == []
    now[0] = 1130.5
    assert len(await failover.tick()) == 1 and failover.paced == "slowed" and len(asked.moves) == 2


async def test_the_failovers_waiting_their_turn_show_as_the_failover_queue_depth() -> None:
    m = metrics.ReconcileMetrics()
    failover, _ = plane(*fleet_of(4, 8), [1000.0])  # the clock stands still: one handed on, seven wait
    fleet = failover.fleet
    fleet.synced = asyncio.Event()
    fleet.synced.set()
    for informer in (fleet.clusters, fleet.bindings):
        informer.on_change = lambda handler: (lambda: None)

    async def run() -> None:
        metrics.CURRENT.set(m)  # as the manager sets it for its runnables
        await failover.run()

    def depth() -> float | None:
        return m.registry.get_sample_value("drods_workqueue_depth", {"controller": "failover"})

    task = asyncio.create_task(run())
    try:
        async def seven() -> bool:
            return depth() == 7

        await eventually(seven, what="seven failovers waiting")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert depth() is None
