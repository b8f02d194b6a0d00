"""Cost (F6): the price model, the Cost score (golden values), cost-first division, the bill."""

from __future__ import annotations

import numpy as np
import pytest

from drods.model.binding import NetworkRequirements, ReplicaRequirements, TargetCluster
from drods.model.cluster import CostModel
from drods.model.placement import Placement
from drods.scheduler import Profile, Scheduler, Snapshot
from drods.scheduler.cost_first import cheapest_fill
from drods.scheduler.plugins.cost import Cost
from drods.scheduler.pricing import hourly_cost, replica_price
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task


def fleet(snap: Snapshot) -> None:
    add(snap, "od", st=status(gpu=8), cost=CostModel(cpuCoreHour=0.04, memoryGiBHour=0.005, gpuHour=2.0,
                                                     gpuHourByModel={"A100": 3.0}, egressGiB=0.09))
    add(snap, "spot", st=status(gpu=8), cost=CostModel(cpuCoreHour=0.02, memoryGiBHour=0.002, gpuHour=1.0,
                                                       egressGiB=0.05, market="Spot"))
    add(snap, "free", st=status(gpu=8))  # no cost model


def test_replica_price_golden(snap: Snapshot) -> None:
    fleet(snap)
    spec = task(resources=ReplicaRequirements(cpu=2, memory=8, gpu=1, gpuModel="A100"),
                network=NetworkRequirements(egressGiBPerHour=10))
    info = analyse(spec)
    p = replica_price(info, snap)
    # od: 2*0.04 + 8*0.005 + 1*3.0 (A100 price) + 10*0.09 = 4.02 ; spot: 0.04+0.016+1.0+0.5 = 1.556
    assert p[0] == pytest.approx(4.02) and p[1] == pytest.approx(1.556) and np.isnan(p[2])
    # a spot risk premium weighs spot prices up, on-demand untouched
    q = replica_price(info, snap, spot_premium=0.5)
    assert q[0] == pytest.approx(4.02) and q[1] == pytest.approx(1.556 * 1.5)
    # the bill: 3 replicas on od + 2 on spot, unpriced cluster left out
    bill = hourly_cost(info, snap, np.array([0, 1, 2]), np.array([3, 2, 5]))
    assert bill == pytest.approx(3 * 4.02 + 2 * 1.556)


def test_cost_score_golden_and_skip(snap: Snapshot) -> None:
    plugin = Cost({"spotPremium": 0.0})
    add(snap, "x")
    info = analyse(task(cpu=1, mem=1))
    assert plugin.skip(info, snap)  # nobody has a price: skipped before any array work
    add(snap, "a", cost=CostModel(cpuCoreHour=0.10, memoryGiBHour=0.0))
    add(snap, "b", cost=CostModel(cpuCoreHour=0.05, memoryGiBHour=0.0))
    add(snap, "c", cost=CostModel(cpuCoreHour=0.02, memoryGiBHour=0.0))
    assert not plugin.skip(info, snap)
    s = plugin.score(info, snap, np.ones(snap.n, dtype=bool))
    # min-max over priced: a (0.10) → 0, b (0.05) → 100*(0.10-0.05)/0.08 = 62.5, c → 100; x neutral 50
    assert s.tolist() == pytest.approx([50.0, 0.0, 62.5, 100.0])


def test_cost_on_by_default_and_bill_in_result(snap: Snapshot) -> None:
    add(snap, "cheap", cost=CostModel(cpuCoreHour=0.01, memoryGiBHour=0.001))
    add(snap, "dear", cost=CostModel(cpuCoreHour=0.10, memoryGiBHour=0.01))
    prof = Profile.default()
    assert dict((p.name, w) for p, w in prof.scores)["Cost"] == 0.5
    r = Scheduler(prof, rng_seed=1).schedule(task(replicas=4), snap, name="ns/a")
    assert r.phase == "Scheduled" and "Cost" in r.scores
    bill = sum(t.replicas * (0.011 if t.cluster == "cheap" else 0.11) for t in r.placement)
    assert r.estimated_hourly_cost == pytest.approx(bill)


def test_cheapest_fill_up_and_down() -> None:
    caps = np.array([3.0, np.inf, 2.0, 5.0])
    price = np.array([1.0, 3.0, 0.5, np.nan])
    prefer = np.zeros(4)
    # from scratch: cheapest (2: cap 2), then 0 (cap 3), then 1; unpriced last
    assert cheapest_fill(7, caps, np.zeros(4, dtype=np.intp), price, prefer).tolist() == [3, 2, 2, 0]
    # scale-down from an overflowed placement: the dearest (and unpriced) shrink first
    cur = np.array([3, 2, 2, 1], dtype=np.intp)
    assert cheapest_fill(5, caps, cur, price, prefer).tolist() == [3, 0, 2, 0]
    # equal prices go by preference
    eq = np.array([1.0, 1.0])
    assert cheapest_fill(1, np.array([5.0, 5.0]), np.zeros(2, dtype=np.intp), eq,
                         np.array([0.0, 1.0])).tolist() == [0, 1]


def test_cost_first_takes_cheapest_under_the_water_level(snap: Snapshot) -> None:
    # cheap holds 4 more replicas below 85%: 10 cores at 45%, 1 core each; mid has room for the rest
    add(snap, "cheap", st=status(cpu=10, mem=100, cpu_used=4.5), cost=CostModel(cpuCoreHour=0.01))
    add(snap, "mid", st=status(cpu=100, mem=1000), cost=CostModel(cpuCoreHour=0.02))
    add(snap, "dear", st=status(cpu=100, mem=1000), cost=CostModel(cpuCoreHour=0.09))
    spec = task(replicas=10, cpu=1, mem=0, placement=Placement(costFirst=True))
    r = Scheduler(rng_seed=1).schedule(spec, snap, name="ns/a")
    assert r.division == "CostFirst"
    assert r.placement_dict() == {"cheap": 4, "mid": 6}
    assert r.estimated_hourly_cost == pytest.approx(4 * 0.01 + 6 * 0.02)
    blind = Scheduler(rng_seed=1).schedule(task(replicas=10, cpu=1, mem=0), snap, name="ns/b")
    assert blind.estimated_hourly_cost is not None and blind.estimated_hourly_cost > r.estimated_hourly_cost
    # scale down keeps the cheapest: the overflow on mid shrinks first
    cur = [TargetCluster(cluster="cheap", replicas=4), TargetCluster(cluster="mid", replicas=6)]
    down = Scheduler(rng_seed=1).schedule(task(replicas=5, cpu=1, mem=0, placement=Placement(costFirst=True)),
                                          snap, name="ns/a", current=cur)
    assert down.placement_dict() == {"cheap": 4, "mid": 1}
