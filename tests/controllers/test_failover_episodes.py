"""Failover asks once per binding and NotReady episode, and forgets an episode when the cluster is back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from drods.controllers.failover import EVICTIONS_IN_FLIGHT, Failover, taint_toleration_seconds
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.settings import MemberSettings
from drods.errors import Conflict
from drods.model.annotations import FAILED_OVER_FROM, moved_away_from
from drods.model.kinds import BINDING, CLUSTER
from drods.model.timefmt import rfc3339_ms
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store.sqlite import SqliteStore
from tests.controllers.kept_state import KeptState


def cluster(ready: bool, since: float) -> dict[str, Any]:
    return {"metadata": {"name": "c1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": rfc3339_ms(since)}]}}


# a Ready cluster beside the NotReady ones: with none Ready, failover holds (test_failover_hold.py)
READY_TOO = {CLUSTER.key("ready"): cluster(True, 0.0)}


def binding(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"placement": [{"cluster": "c1", "replicas": 2}], "scheduledTime": rfc3339_ms(0.0)}}


class Asked:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def failover(self, name: str, cluster: str, reason: str) -> None:
        assert cluster == "c1"
        self.names.append(name)


async def test_one_request_per_binding_and_episode() -> None:
    now = [100.0]
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): cluster(False, 10.0), **READY_TOO})
    bindings = SimpleNamespace(cache={BINDING.key(b): binding(b) for b in ("a", "b")})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"a", "b"}})
    asked = Asked()
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), asked, clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == ["a", "b"]
    assert await failover.tick() == []  # asked already: the scheduler has not answered yet
    assert asked.names == ["a", "b"]

    clusters.cache[CLUSTER.key("c1")] = cluster(True, 120.0)  # back: the episode is over
    assert failover.observe(CLUSTER.key("c1"), None, clusters.cache[CLUSTER.key("c1")])  # wakes the pass that ends it
    assert await failover.tick() == [] and failover.triggered == {}

    clusters.cache[CLUSTER.key("c1")] = cluster(False, 150.0)  # down again: a new episode
    assert failover.observe(CLUSTER.key("c1"), None, clusters.cache[CLUSTER.key("c1")])
    now[0] = 170.0
    assert await failover.tick() == []  # within the toleration
    now[0] = 181.0
    assert await failover.tick() == ["a", "b"]
    assert asked.names == ["a", "b", "a", "b"]


async def test_a_no_execute_taint_evicts_what_does_not_tolerate_it() -> None:
    """Karmada's NoExecute eviction (a ClusterTaintPolicy's taint, or one set by hand): a binding without
    a matching toleration leaves at once, one with ``tolerationSeconds`` when they run out, one with a
    toleration without seconds stays; the taint's removal ends the episode."""
    now = [100.0]
    tainted = cluster(True, 0.0)
    tainted["spec"] = {"taints": [{"key": "maintenance", "value": "kernel", "effect": "NoExecute",
                                   "timeAdded": rfc3339_ms(90.0)},
                                  {"key": "gpu", "effect": "NoSchedule"}]}
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): tainted})
    patient, forever, wrong = binding("patient"), binding("forever"), binding("wrong-value")
    patient["spec"] = {"placement": {"clusterTolerations": [
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}}
    forever["spec"] = {"placement": {"clusterTolerations": [{"key": "maintenance", "operator": "Exists"}]}}
    wrong["spec"] = {"placement": {"clusterTolerations": [{"key": "maintenance", "value": "disk"}]}}
    bindings = SimpleNamespace(cache={BINDING.key(b["metadata"]["name"]): b
                                      for b in (binding("plain"), patient, forever, wrong)})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {
        "plain", "patient", "forever", "wrong-value"}})
    reasons: list[tuple[str, str]] = []

    class Recorded(Asked):
        async def binding(self, name: str, reason: str) -> None:
            reasons.append((name, reason))

    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), Recorded(), clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == ["plain", "wrong-value"]
    assert reasons[0] == ("plain", "taint maintenance=kernel:NoExecute on cluster c1 (not tolerated)")
    now[0] = 149.0  # the toleration counts from the taint's timeAdded (90 + 60)
    assert await failover.tick() == []
    now[0] = 151.0
    assert await failover.tick() == ["patient"]
    assert reasons[-1] == ("patient", "taint maintenance=kernel:NoExecute on cluster c1 (toleration 60s)")
    tainted["spec"] = {"taints": []}  # removed: the episode is over
    assert failover.observe(CLUSTER.key("c1"), None, tainted)
    assert await failover.tick() == [] and failover.triggered == {}


async def test_karmadas_never_fail_over_tolerations_keep_a_binding_on_a_not_ready_cluster() -> None:
    """Karmada's idiom: tolerate ``cluster.karmada.io/not-ready`` and ``/unreachable`` (NoExecute, no
    seconds) and the binding never fails over; DRO-DS's not-ready taint is the same condition."""
    now = [100.0]
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): cluster(False, 10.0), **READY_TOO})
    never, limited = binding("never"), binding("limited")
    never["spec"] = {"placement": {"clusterTolerations": [
        {"key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]}}
    limited["spec"] = {"placement": {"clusterTolerations": [
        {"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 120}]}}
    bindings = SimpleNamespace(cache={BINDING.key(b["metadata"]["name"]): b
                                      for b in (binding("plain"), never, limited)})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"plain", "never", "limited"}})
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), Asked(), clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == ["plain"]
    now[0] = 131.0  # the Karmada key's 120 s count, not the default 30 s
    assert await failover.tick() == ["limited"]
    now[0] = 10_000.0
    assert await failover.tick() == []


def test_the_shortest_matching_toleration_seconds_count_for_a_no_execute_taint() -> None:
    """Karmada's GetMinTolerationTime (the scheduler's filter uses the same rule): a matching toleration
    without seconds does not extend one with seconds."""
    taint = {"key": "maintenance", "effect": "NoExecute"}
    both = {"spec": {"placement": {"clusterTolerations": [
        {"key": "maintenance", "operator": "Exists"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 25},
        {"key": "maintenance", "operator": "Exists", "tolerationSeconds": 40}]}}}
    assert taint_toleration_seconds(both, taint) == 25
    forever = {"spec": {"placement": {"clusterTolerations": [{"key": "maintenance", "operator": "Exists"}]}}}
    assert taint_toleration_seconds(forever, taint) is None
    assert taint_toleration_seconds({"spec": {}}, taint) == 0


class CountedReads(dict[str, Any]):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)


async def test_a_pass_looks_at_the_clusters_that_may_evict_only() -> None:
    """At 10,000 members a cluster reports every few seconds; each report woke a pass over every cluster
    (most of a 2-core control plane's event loop). A healthy cluster's report wakes nothing now, and a
    pass reads the clusters that are NotReady or NoExecute-tainted."""
    now = [100.0]
    clusters = SimpleNamespace(cache=CountedReads({CLUSTER.key(f"h{i}"): cluster(True, 0.0) for i in range(1000)}))
    clusters.cache[CLUSTER.key("c1")] = cluster(False, 10.0)
    bindings = SimpleNamespace(cache={BINDING.key("a"): binding("a")})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"a"}})
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), Asked(), clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == ["a"] and failover.suspects == {"c1"}
    assert not failover.observe(CLUSTER.key("h7"), None, cluster(True, 0.0))  # a healthy report: no pass
    clusters.cache.reads = 0
    assert await failover.tick() == []
    assert clusters.cache.reads == 0  # c1's one binding asked for already: nothing to look at
    tainted = cluster(True, 0.0)
    tainted["spec"] = {"taints": [{"key": "maintenance", "effect": "NoExecute", "timeAdded": rfc3339_ms(100.0)}]}
    clusters.cache[CLUSTER.key("h7")] = tainted
    assert failover.observe(CLUSTER.key("h7"), None, tainted) and failover.suspects == {"c1", "h7"}
    del clusters.cache[CLUSTER.key("h7")]
    assert failover.observe(CLUSTER.key("h7"), tainted, None) and failover.suspects == {"c1"}


def test_a_taint_eviction_is_an_eviction_decision() -> None:
    from drods.model.decision import EVICTION, from_schedule

    entry = {"scheduleType": "RescheduleTriggered", "binding": "web",
             "trigger": {"reason": "taint maintenance=kernel:NoExecute on cluster c1 (not tolerated)"}}
    assert from_schedule(entry)["type"] == EVICTION


async def test_a_pass_asks_for_many_bindings_at_once() -> None:
    """Each request is a write that waits for its commit: a pass keeps up to EVICTIONS_IN_FLIGHT of them
    in flight (a storm of 100,000 bindings one write at a time moved ~100 a second), asks for each binding
    once, and asks again next pass for one whose write failed."""
    names = [f"b{i:03d}" for i in range(100)]
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): cluster(False, 10.0), **READY_TOO})
    bindings = SimpleNamespace(cache={BINDING.key(b): binding(b) for b in names})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": set(names)})

    class Slow(Asked):
        def __init__(self) -> None:
            super().__init__()
            self.in_flight = self.most = 0
            self.refuse = {"b007"}

        async def failover(self, name: str, cluster: str, reason: str) -> None:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await asyncio.sleep(0.001)
            self.in_flight -= 1
            if name in self.refuse:
                self.refuse.discard(name)
                raise Conflict("lost the race 30 times")
            self.names.append(name)

    asked = Slow()
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), asked, clock=lambda: 100.0)  # type: ignore[arg-type]
    moved = await failover.tick()
    assert asked.most == EVICTIONS_IN_FLIGHT
    assert sorted(moved) == sorted(asked.names) == [n for n in names if n != "b007"]
    assert await failover.tick() == ["b007"]  # the failed write, asked again; nothing asked twice
    assert sorted(asked.names) == names



async def test_within_the_toleration_a_pass_reads_no_binding_until_one_runs_out() -> None:
    """In a storm 10,000 clusters turn NotReady one after another and each wakes a pass: a pass that read
    every binding of every NotReady cluster held the event loop until the clusters' own health writes lagged.
    A NotReady cluster's heartbeat wakes nothing; a pass reads a cluster's bindings when it changed, when a
    binding placed there changed, or when the next toleration there runs out."""
    now = [20.0]
    down = cluster(False, 10.0)
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): down, **READY_TOO})
    patient = binding("patient")
    patient["spec"] = {"placement": {"clusterTolerations": [
        {"key": "cluster.multicluster.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 90}]}}
    bindings = SimpleNamespace(cache=CountedReads({BINDING.key("a"): binding("a"), BINDING.key("patient"): patient}))
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"a", "patient"}})
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), Asked(), clock=lambda: now[0])  # type: ignore[arg-type]
    assert await failover.tick() == [] and bindings.cache.reads == 2
    beat = cluster(False, 10.0)
    beat["status"]["conditions"][0]["message"] = "no successful probe since …"
    assert not failover.observe(CLUSTER.key("c1"), down, beat)  # a heartbeat: the same episode
    shorter = cluster(False, 10.0)
    shorter["metadata"]["annotations"] = {"multicluster.io/toleration-seconds": "5"}
    assert failover.observe(CLUSTER.key("c1"), down, shorter)  # its own toleration changed: looked at again
    assert failover.observe(CLUSTER.key("c1"), shorter, down)
    await failover.tick()
    bindings.cache.reads = 0
    now[0] = 39.0
    assert await failover.tick() == [] and bindings.cache.reads == 0  # nothing runs out before 40
    now[0] = 40.0
    assert await failover.tick() == ["a"] and bindings.cache.reads == 3  # both looked at, "a" again at its turn
    bindings.cache.reads = 0
    now[0] = 60.0
    assert await failover.tick() == [] and bindings.cache.reads == 0  # "patient" at 100
    newcomer = binding("b")
    bindings.cache[BINDING.key("b")] = newcomer
    fleet.by_cluster["c1"].add("b")
    assert failover.observe_binding(newcomer)  # placed on c1: c1 is looked at again
    assert not failover.observe_binding(binding("elsewhere") | {"status": {"placement": [{"cluster": "c2"}]}})
    assert await failover.tick() == ["b"]
    now[0] = 100.0
    assert await failover.tick() == ["patient"]


async def test_a_binding_failed_over_from_two_clusters_in_one_pass_remembers_both(tmp_path: Path) -> None:
    """Each move is written over the Binding as stored, not the copy the pass found (an informer may lag
    behind the first write): a binding on two clusters that went down together remembers both, and so
    is offered neither back by a fleet change, only by fail-back."""
    registry = ObjectRegistry(SqliteStore(str(tmp_path / "db")), SecretBox(load_or_create_key(tmp_path / "k")))
    found = binding("a")
    found["status"]["placement"] = [{"cluster": "c1", "replicas": 1}, {"cluster": "c2", "replicas": 1}]
    await registry.create(BINDING, {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
                                    "metadata": {"name": "a"}, "spec": {"replicas": 2}})
    down = {n: {**cluster(False, 10.0), "metadata": {"name": n}} for n in ("c1", "c2")}
    clusters = SimpleNamespace(cache={**{CLUSTER.key(n): c for n, c in down.items()}, **READY_TOO})
    bindings = SimpleNamespace(cache={BINDING.key("a"): found})  # never told of the writes
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"a"}, "c2": {"a"}})
    # two of three clusters down is a small fleet's mass disruption, which halts failover by default
    settings = MemberSettings(tolerationSeconds=30, unhealthyClusterThreshold=1)
    failover = Failover(fleet, settings, Rescheduler(registry), clock=lambda: 100.0)  # type: ignore[arg-type]
    assert await failover.tick() == ["a", "a"]
    written = await registry.get(BINDING, "a")
    assert written["metadata"]["annotations"][FAILED_OVER_FROM] == "c1,c2"
    assert moved_away_from(written) == {"c1", "c2"}
    await registry.store.close()


async def test_a_binding_deleted_before_its_turn_is_not_asked_for() -> None:
    clusters = SimpleNamespace(cache={CLUSTER.key("c1"): cluster(False, 10.0), **READY_TOO})
    bindings = SimpleNamespace(cache={BINDING.key(b): binding(b) for b in ("a", "b")})
    fleet = SimpleNamespace(store=KeptState(), clusters=clusters, bindings=bindings,
                            by_cluster={"c1": {"a", "b"}})

    class DeletesB(Asked):
        async def failover(self, name: str, cluster: str, reason: str) -> None:
            await super().failover(name, cluster, reason)
            bindings.cache.pop(BINDING.key("b"), None)  # deleted while "a" was asked for

    asked = DeletesB()
    failover = Failover(fleet, MemberSettings(tolerationSeconds=30), asked, clock=lambda: 100.0)  # type: ignore[arg-type]
    assert await failover.tick() == ["a"]
    assert asked.names == ["a"]
