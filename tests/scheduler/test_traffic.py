"""Traffic affinity (H1): the stored graph's blend and decay, the score's golden values, skipping."""

from __future__ import annotations

import numpy as np
import pytest

from drods.model.cluster import NetworkProfile
from drods.model.traffic import TrafficReport, decay, merge_report, peers
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins.traffic_affinity import TrafficAffinity
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, task


def report(bps: float, src: str = "web", dst: str = "db") -> TrafficReport:
    return TrafficReport.model_validate({"edges": [{"from": {"namespace": "shop", "name": src},
                                                    "to": {"namespace": "shop", "name": dst},
                                                    "bytesPerSecond": bps, "requestsPerSecond": 1.0}]})


def test_graph_blends_reports_and_decays() -> None:
    g = merge_report(None, report(1000), now=0.0, half_life_s=100.0)
    assert g["edges"]["shop/web>shop/db"]["bytesPerSecond"] == 1000
    # a report one half-life later weighs as much as the old value
    g = merge_report(g, report(3000), now=100.0, half_life_s=100.0)
    assert g["edges"]["shop/web>shop/db"]["bytesPerSecond"] == pytest.approx(2000)
    # read two half-lives later: a quarter, in both directions
    p = peers(g, now=300.0)
    assert p["shop/web"]["shop/db"] == pytest.approx(500) and p["shop/db"]["shop/web"] == pytest.approx(500)
    # an edge decayed below 1 B/s is dropped on the next write
    g = merge_report(g, report(10, "a", "b"), now=100.0 + 100.0 * 12, half_life_s=100.0)
    assert list(g["edges"]) == ["shop/a>shop/b"]
    assert decay(8.0, 200.0, 100.0) == pytest.approx(2.0)


def fleet(snap: Snapshot) -> None:
    add(snap, "a", region="eu", zone="eu-1")
    add(snap, "b", region="eu", zone="eu-2")
    add(snap, "c", region="us", zone="us-1", network=NetworkProfile(latencyMs={"a": 40.0}))
    add(snap, "d", region="us", zone="us-1")


def test_score_golden(snap: Snapshot) -> None:
    fleet(snap)
    snap.traffic = {"shop/web": {"shop/db": 1000.0, "shop/cache": 500.0}}
    snap.workload_placements = {"shop/db": (("a", 3),), "shop/cache": (("c", 1), ("d", 1))}
    plugin = TrafficAffinity()
    info = analyse(Task(task(), name="web", workload="shop/web"))
    assert not plugin.skip(info, snap)
    s = plugin.score(info, snap, np.ones(4, dtype=bool))
    # cost a = 1000·0 + 500·(½·100 + ½·100) = 50000     (db on a; cache in another region)
    # cost b = 1000·10 + 50000 = 60000                   (db in the same region)
    # cost c = 1000·40 (latency c→a) + 500·(½·0 + ½·1) = 40250
    # cost d = 1000·100 + 500·(½·1 + ½·0) = 100250
    # score = 100·(max − cost)/(max − min), max − min = 60000
    assert s.tolist() == pytest.approx([83.75, 100 * 40250 / 60000, 100.0, 0.0])


def test_skipped_without_placed_peers(snap: Snapshot) -> None:
    fleet(snap)
    plugin = TrafficAffinity()
    assert plugin.skip(analyse(Task(task(), workload="shop/web")), snap)
    snap.traffic = {"shop/web": {"shop/db": 1000.0}}
    assert plugin.skip(analyse(Task(task(), workload="shop/web")), snap)  # db not placed yet
    assert plugin.skip(analyse(task()), snap)  # no workload name
    snap.workload_placements["shop/db"] = (("b", 1),)
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(task(replicas=1), workload="shop/web"), snap)
    assert r.placement_dict() == {"b": 1} and r.scores["TrafficAffinity"]["b"] == 100.0


# scheduler-plugins' NetworkOverhead score test (pkg/networkaware/networkoverhead, TestNetworkOverheadScore,
# AppGroup "basic", NetworkTopology "basic"): eight nodes n-1..n-8 become eight clusters; regions
# us-west-1 (zones Z1, Z2) and us-east-1 (Z3, Z4); zone costs Z1↔Z2 5 and Z3↔Z4 10 become measured
# latencies between the clusters, the region cost 20 is ``maxCost``, the same zone costs 1 and the
# same cluster 0. Allocated: p1 on n-2, p2 on n-5, p3 on n-1; p1 depends on p2, p2 on p3.
NO_ZONES = {"n-1": "Z1", "n-2": "Z1", "n-3": "Z2", "n-4": "Z2", "n-5": "Z3", "n-6": "Z3", "n-7": "Z4", "n-8": "Z4"}
NO_ZONE_COST = {("Z1", "Z2"): 5.0, ("Z3", "Z4"): 10.0}


def network_overhead_fleet(snap: Snapshot) -> None:
    for name, zone in NO_ZONES.items():
        region = "us-west-1" if zone in ("Z1", "Z2") else "us-east-1"
        lat = {other: cost for other, oz in NO_ZONES.items() for pair, cost in NO_ZONE_COST.items()
               if {zone, oz} == set(pair)}
        add(snap, name, region=region, zone=zone, network=NetworkProfile(latencyMs=lat))
    snap.workload_placements = {"default/p1": (("n-2", 1),), "default/p2": (("n-5", 1),),
                                "default/p3": (("n-1", 1),)}
    snap.traffic = {"default/p1": {"default/p2": 1.0}, "default/p2": {"default/p3": 1.0}}


@pytest.mark.parametrize(("pod", "want"), [
    ("p1", [0, 0, 0, 0, 100, 95, 50, 50]),     # "AppGroup: basic, p1 to allocate, 8 nodes to score"
    ("p2", [100, 95, 75, 75, 0, 0, 0, 0]),     # "AppGroup: basic, p2 to allocate, 8 nodes to score"
])
def test_network_overhead_worked_example(snap: Snapshot, pod: str, want: list[int]) -> None:
    network_overhead_fleet(snap)
    plugin = TrafficAffinity({"sameZoneCost": 1.0, "maxCost": 20.0})
    info = analyse(Task(task(), name=pod, workload=f"default/{pod}"))
    assert not plugin.skip(info, snap)
    assert plugin.score(info, snap, np.ones(8, dtype=bool)).tolist() == pytest.approx(want)


def test_network_overhead_no_dependency_scores_nothing(snap: Snapshot) -> None:
    """"p3 to allocate, no dependency": NetworkOverhead scores every node 0; here the score is left
    out of the decision altogether (skipped), which ranks the clusters the same way."""
    network_overhead_fleet(snap)
    assert TrafficAffinity().skip(analyse(Task(task(), name="p3", workload="default/p3")), snap)
