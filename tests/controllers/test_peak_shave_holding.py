"""A peak-shave pass reads every Binding: what each may move is worked out once per placement policy; a
Binding is moved by one plan a pass."""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.controllers.peak_shave import LatencyView, PeakShaver
from drods.model.cluster import ClusterSpec, NetworkProfile
from drods.monitor.autoops import AutoOpsPolicy
from drods.scheduler.arrays import BoolArr
from drods.scheduler.peakshave import Capacity, Shave
from drods.scheduler.selection import ClusterFacts, ClusterSelection

NAMES = ["east-1", "east-2", "west-1"]
SPECS = [ClusterSpec(region=n.split("-")[0]) for n in NAMES]
FACTS = [ClusterFacts.of(n, {}, s) for n, s in zip(NAMES, SPECS, strict=True)]
INDEX = {n: i for i, n in enumerate(NAMES)}


def binding(name: str, placement: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 4, "resources": {"cpu": 0.5, "memory": 1.0}}
    if placement is not None:
        spec["placement"] = placement
    return {"metadata": {"name": name}, "spec": spec,
            "status": {"placement": [{"cluster": "east-1", "replicas": 4}]}}


def test_bindings_of_one_policy_share_its_allowed_clusters() -> None:
    shaver = PeakShaver(None, None, AutoOpsPolicy(), None)  # type: ignore[arg-type]
    masks: dict[ClusterSelection, BoolArr] = {}
    east = {"clusterAffinity": {"clusterNames": ["east-1", "east-2"]}}
    a, b, c = (shaver.holding(binding(n, p), INDEX, SPECS, FACTS, masks)
               for n, p in (("a", None), ("b", None), ("c", east)))
    assert a is not None and b is not None and c is not None
    assert len(masks) == 2  # two policies, each matched against the clusters once
    assert a.allowed is b.allowed
    assert a.allowed.tolist() == [True, True, True]
    assert c.allowed.tolist() == [True, True, False]
    alone = shaver.holding(binding("c", east), INDEX, SPECS, FACTS)  # without the pass's memo: the same answer
    assert alone is not None and np.array_equal(alone.allowed, c.allowed)


def test_slo_guard_reads_measured_latency_first_then_declared_then_local() -> None:
    names = ["east-1", "west-1", "west-2", "far-1"]
    specs = [ClusterSpec(region="east"), ClusterSpec(region="west", network=NetworkProfile(latencyMs={"east": 40})),
             ClusterSpec(region="west", network=NetworkProfile(latencyMs={"east": 40})), ClusterSpec(region="far")]
    index = {n: i for i, n in enumerate(names)}
    facts = [ClusterFacts.of(n, {}, s) for n, s in zip(names, specs, strict=True)]
    shaver = PeakShaver(None, None, AutoOpsPolicy(), None)  # type: ignore[arg-type]
    # measured: west-2 is 180 ms from the east users (declared 40), far-1 is 30 ms (declared: unknown)
    shaver.latencies = LatencyView.of(names, specs, {("west-2", "east"): 180.0, ("far-1", "east"): 30.0})
    users = {"users": [{"region": "east"}], "latencySLOMs": 100}
    h = shaver.holding(binding("web", users), index, specs, facts)
    assert h is not None and h.latency is not None and h.slo_ms == 100
    assert h.latency.tolist() == [0.0, 40.0, 180.0, 30.0]
    assert h.targets().tolist() == [True, True, False, True]
    declared = PeakShaver(None, None, AutoOpsPolicy(), None)  # type: ignore[arg-type]
    d = declared.holding(binding("web", users), index, specs, facts)  # nothing measured: far-1 is unknown
    assert d is not None and d.latency is not None
    assert np.isnan(d.latency[3]) and d.latency[:3].tolist() == [0.0, 40.0, 40.0]
    # users without an SLO: their latencies still steer the moves (and the returns); no cluster is out of bounds
    free = shaver.holding(binding("web", {"users": [{"region": "east"}]}), index, specs, facts)
    assert free is not None and free.slo_ms is None and free.latency is not None
    assert free.latency.tolist() == [0.0, 40.0, 180.0, 30.0]
    assert free.targets().tolist() == [True, True, True, True]
    assert shaver.holding(binding("web"), index, specs, facts).latency is None  # type: ignore[union-attr]


def test_a_pass_with_no_measured_level_reads_no_binding() -> None:
    """In a failure storm no cluster reports: the pass ends before reading a Binding (it read every
    one from the store each minute, ~200 MB of stored values at once at 100,000)."""
    import asyncio
    from types import SimpleNamespace

    class Unread:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the pass read the Bindings ({name})")

    details = {n: {"active": False, "waterLevel": None} for n in NAMES}
    svc = SimpleNamespace(fleet=SimpleNamespace(realtime=lambda _age: ({}, details)),
                          settings=SimpleNamespace(activeMaxAgeSeconds=60.0), clock=lambda: 100.0)
    shaver = PeakShaver(svc, Unread(), AutoOpsPolicy(enabled=True, peakshave=True), Unread())  # type: ignore[arg-type]
    shaver.shaving.watch.hot_since["east-1"] = 40.0
    assert asyncio.run(shaver.run(lambda *_: asyncio.sleep(0))) == []
    assert shaver.shaving.watch.hot_since == {}  # nothing is hot: a cluster's damping window starts again


def test_a_binding_that_places_nothing_holds_nothing() -> None:
    shaver = PeakShaver(None, None, AutoOpsPolicy(), None)  # type: ignore[arg-type]
    unplaced = {**binding("a"), "status": {"phase": "Unschedulable", "placement": []}}
    assert shaver.holding(unplaced, INDEX, SPECS, FACTS) is None
    gone_cluster = {**binding("b"), "status": {"placement": [{"cluster": "elsewhere", "replicas": 2}]}}
    assert shaver.holding(gone_cluster, INDEX, SPECS, FACTS) is None


def test_bindings_with_the_same_users_share_one_latency_array() -> None:
    """The return pass works out each users' demand once (`homeward` keys on the shared array)."""
    shaver = PeakShaver(None, None, AutoOpsPolicy(), None)  # type: ignore[arg-type]
    users = {"users": [{"region": "east"}], "latencySLOMs": 100}
    a, b = (shaver.holding(binding(n, users), INDEX, SPECS, FACTS) for n in ("a", "b"))
    other = shaver.holding(binding("c", {"users": [{"region": "west"}], "latencySLOMs": 100}), INDEX, SPECS, FACTS)
    assert a is not None and b is not None and other is not None
    assert a.latency is b.latency and other.latency is not a.latency
    assert a.latency is not None and a.latency[:2].tolist() == [0.0, 0.0] and np.isnan(a.latency[2])


DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                 "weightPreference": {"dynamicWeight": "WaterLevel"}}}


def bound(name: str, placed: dict[str, int]) -> dict[str, Any]:
    """A Binding of 1-core replicas divided by water level, placed as ``placed``."""
    return {"metadata": {"name": name},
            "spec": {"replicas": sum(placed.values()), "resources": {"cpu": 1.0, "memory": 1.0}, "placement": DIVIDED},
            "status": {"placement": [{"cluster": c, "replicas": k} for c, k in placed.items()]}}


def one_pass(levels: dict[str, float], bindings: list[dict[str, Any]], hot: list[str], **policy: Any) -> list[Shave]:
    """The descheduler's pass over 64-core clusters limited at 0.8, ``hot`` hot for longer than the window."""
    import asyncio
    from types import SimpleNamespace

    names = sorted(levels)

    class Pass(PeakShaver):
        def fleet(self, details: Any) -> Any:
            specs = [ClusterSpec() for _ in names]
            return (names, np.array([levels[n] for n in names]), np.full(len(names), 0.8),
                    Capacity(np.full(len(names), 64.0), np.full(len(names), 256.0)), specs,
                    [ClusterFacts.of(n, {}, s) for n, s in zip(names, specs, strict=True)])

        async def _bindings(self) -> list[Any]:
            return bindings

    async def no_pairs(_prefix: str) -> tuple[list[Any], int]:
        return [], 0

    details = {n: {"active": True, "waterLevel": levels[n]} for n in names}
    svc = SimpleNamespace(fleet=SimpleNamespace(realtime=lambda _age: ({}, details)),
                          settings=SimpleNamespace(activeMaxAgeSeconds=60.0), clock=lambda: 100.0)
    shaver = Pass(svc, SimpleNamespace(store=SimpleNamespace(range=no_pairs)),  # type: ignore[arg-type]
                  AutoOpsPolicy(enabled=True, peakshave=True, peakshaveAfterSeconds=30.0, peakshaveReturn=False,
                                **policy), None)
    shaver.shaving.watch.hot_since.update({c: 0.0 for c in hot})
    executed: list[str] = []

    async def execute(cluster: str, reason: str, details: dict[str, Any]) -> None:
        executed.append(cluster)

    plans = asyncio.run(shaver.run(execute))
    assert executed == [names[p.cluster] for p in plans]
    return plans


def test_a_binding_on_two_hot_clusters_is_moved_by_one_plan_of_the_pass() -> None:
    """A Binding carries one plan's moves (an annotation the rescheduler sets): a second plan of the
    same pass naming it would overwrite the first's before the scheduler read them, and the first
    cluster's Rebalance would record moves that never happen. c and d are both hot with web on both:
    c's plan (the hotter, first) moves web; d's moves only api, web's turn there is a later pass."""
    # d must lose 3 replicas (to c's background, 0.713): api's 1 then web's 2, but web is c's plan's
    plans = one_pass({"a": 0.62, "b": 0.62, "c": 0.76, "d": 0.75},
                     [bound("web", {"a": 3, "b": 3, "c": 3, "d": 3}), bound("api", {"d": 1})], ["c", "d"],
                     peakshaveMinGain=0.01)
    assert {"abcd"[p.cluster]: {m.workload for m in p.moves} for p in plans} == {"c": {"web"}, "d": {"api"}}


def test_a_receiving_cluster_keeps_the_headroom_under_its_limit() -> None:
    """One at its limit is a noise step from a breach: c (0.90, web's 6 replicas) may give to a only
    while a stays ``peakshaveHeadroom`` under its 0.8 limit. a at 0.76 takes two replicas (1/64 each) up
    to 0.791 without headroom, none under 0.77."""
    levels, web = {"a": 0.76, "c": 0.90}, bound("web", {"c": 6})
    plans = one_pass(levels, [web], ["c"], peakshaveHeadroom=0.0)
    assert [(m.target, m.replicas) for p in plans for m in p.moves] == [(0, 2)]
    assert one_pass(levels, [web], ["c"]) == []  # the default headroom, 0.03
    assert one_pass({**levels, "a": 0.70}, [web], ["c"])[0].moves[0].replicas == 4  # 0.70 + 4/64 ≤ 0.77
