"""Traffic rebalance verdict (H1): golden costs and scores, and each reason not to move."""

from __future__ import annotations

import pytest

from drods.model.binding import NetworkRequirements
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.rebalance import current_of, traffic_verdict
from tests.scheduler.conftest import add, status, task

MB = 1e6


def _fleet(snap: Snapshot) -> None:
    # a, b in eu (different zones: distance 10), c, d in us (distance 100); sites FRA (eu) and IAD (us)
    add(snap, "c", region="us", zone="us-a", st=status(cpu=100, mem=400, cpu_used=20),
        network={"identifier": "IAD", "latencyMs": {"FRA": 90.0}})
    add(snap, "d", region="us", zone="us-b", st=status(cpu=100, mem=400, cpu_used=20),
        network={"identifier": "IAD", "latencyMs": {"FRA": 90.0}})
    for nm in ("a", "b"):
        add(snap, nm, region="eu", zone=f"eu-{nm}", st=status(cpu=100, mem=400, cpu_used=20),
            network={"identifier": "FRA", "latencyMs": {"FRA": 2.0}})


def _db(snap: Snapshot, *, replicas: int = 2, **kw: object) -> Task:
    return Task(task(replicas=replicas, **kw), name="db", current=current_of(dict(snap.workload_placements["shop/db"])),
                workload="shop/db")


@pytest.fixture
def fleet(snap: Snapshot) -> Snapshot:
    _fleet(snap)
    snap.workload_placements = {"shop/db": (("a", 2),), "shop/web": (("c", 3),)}
    snap.traffic = {"shop/db": {"shop/web": 4 * MB}, "shop/web": {"shop/db": 4 * MB}}
    return snap


def test_a_callee_moves_to_the_caller_that_arrived_later(fleet: Snapshot) -> None:
    sched = Scheduler(Profile.default(), rng_seed=1)
    v = traffic_verdict(sched, _db(fleet), fleet, 0.4)
    assert v.move and v.placement == (("c", 2),) and v.peer == "shop/web"
    # golden: 4 MB/s × distance 100 (other region) → 0 on the caller's own cluster
    assert v.cost_before == pytest.approx(4e8) and v.cost_after == 0.0 and v.reduction == 1.0
    assert v.score_before == 0.0 and v.score_after == 100.0
    assert "4.00 MB/s" in v.reason and "100% less" in v.reason
    d = v.details()
    assert d["costReduction"] == 1.0 and d["placement"] == [{"cluster": "c", "replicas": 2}]


def test_the_threshold_is_on_the_share_of_the_cost_saved(fleet: Snapshot) -> None:
    # a one-replica callee; the caller runs half on b (same region as a: distance 10) and half on c
    # (100): from a the cost is 4 MB/s × (0.5 × 10 + 0.5 × 100) = 2.2e8; on b or c it is 2e8 — 9 % less
    fleet.workload_placements["shop/web"] = (("b", 1), ("c", 1))
    fleet.workload_placements["shop/db"] = (("a", 1),)
    sched = Scheduler(Profile.default(), rng_seed=1)
    v = traffic_verdict(sched, _db(fleet, replicas=1), fleet, 0.4)
    assert not v.move and v.cost_before == pytest.approx(2.2e8) and v.cost_after == pytest.approx(2e8)
    assert v.reduction == pytest.approx(1 / 11)
    assert traffic_verdict(Scheduler(Profile.default(), rng_seed=1), _db(fleet, replicas=1), fleet, 0.05).move


def test_a_callee_with_replicas_to_spare_keeps_one_beside_each_significant_peer(fleet: Snapshot) -> None:
    # db (2 replicas) runs on a beside its heavier peer cache (9 MB/s); web (4 MB/s, above a fifth of
    # the heaviest) runs on c in the other region: one replica each, every peer served beside it —
    # the cost counts each peer's traffic to its nearest copy: 4 MB/s × 100 → 0
    sched = Scheduler(Profile.default(), rng_seed=1)
    fleet.workload_placements["shop/cache"] = (("a", 1),)
    fleet.traffic["shop/db"]["shop/cache"] = 9 * MB
    v = traffic_verdict(sched, _db(fleet), fleet, 0.4)
    assert v.move and v.placement == (("a", 1), ("c", 1))
    assert v.cost_before == pytest.approx(4e8) and v.cost_after == 0.0
    # one replica cannot be beside both: it stays beside the heavier
    fleet.workload_placements["shop/db"] = (("a", 1),)
    v = traffic_verdict(sched, _db(fleet, replicas=1), fleet, 0.4)
    assert not v.move


def test_its_own_latency_need_keeps_it(fleet: Snapshot) -> None:
    need = NetworkRequirements(identifier="FRA", maxLatencyMs=50)
    v = traffic_verdict(Scheduler(Profile.default(), rng_seed=1), _db(fleet, network=need), fleet, 0.4)
    assert not v.move and "own constraints exclude every cluster its significant peers run on" in v.reason
    assert "c: latency to FRA above 50 ms" in v.reason


def test_no_move_beside_its_heaviest_peer_without_peers_or_without_the_plugin(fleet: Snapshot) -> None:
    sched = Scheduler(Profile.default(), rng_seed=1)
    # a much heavier peer already beside it keeps it where it is: web's 1 MB/s is under a fifth of 9 MB/s
    fleet.workload_placements["shop/cache"] = (("a", 1),)
    fleet.traffic["shop/db"] = {"shop/web": 1 * MB, "shop/cache": 9 * MB}
    v = traffic_verdict(sched, _db(fleet), fleet, 0.4)
    assert not v.move and v.reason == "it runs beside every significant peer (heaviest: shop/cache on a)"
    fleet.traffic = {}
    assert traffic_verdict(sched, _db(fleet), fleet, 0.4).reason == "no placed traffic peer"
    no_traffic = Scheduler(Profile.from_dict({"scores": {"LeastWaterLevel": 1.0}}), rng_seed=1)
    assert not traffic_verdict(no_traffic, _db(fleet), fleet, 0.4).move

