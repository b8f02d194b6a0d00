"""The peak-shaving decision (`drods.scheduler.peakshave`): the margin, the damping window, the
budget, the minimum gain and the latency SLO guard; and replicas returned near their users."""

from __future__ import annotations

import numpy as np
import pytest

from drods.scheduler.peakshave import (
    Capacity,
    Holding,
    Hot,
    PeakWatch,
    Shave,
    fleet_level,
    homeward,
    hot_clusters,
    returns,
    room_for_returns,
    shave,
)

N = 3
FLEET = Capacity(np.full(N, 100.0), np.full(N, 400.0))  # 1 core = 0.01 of a cluster's water level
LIMITS = np.full(N, 0.85)
OPEN = np.ones(N, dtype=bool)
AT_050 = Hot(0.50, 0.52)  # shave to 0.50, fill others up to 0.52


def holding(name: str, placement: dict[int, int], *, latency: list[float] | None = None,
            slo: float | None = None, allowed: list[bool] | None = None) -> Holding:
    return Holding(name, placement, 1.0, 1.0, np.array(allowed or [True] * N),
                   None if latency is None else np.array(latency), slo)


def test_a_cluster_above_the_achievable_level_by_more_than_the_margin_is_hot() -> None:
    # cluster 0: background 0.50 + 20 replicas (0.20) = 0.70; the others 0.40 and 0.40 with nothing placed
    levels = np.array([0.70, 0.40, 0.40])
    hs = [holding("web", {0: 20})]
    hot = hot_clusters(levels, FLEET.cpu, OPEN, hs, margin=0.02)
    # the 20 cores fill the three backgrounds (0.50, 0.40, 0.40) to (20 + 10) / 300 + 0.40 = 0.50
    assert list(hot) == [0]
    assert hot[0].target == pytest.approx(0.50) and hot[0].ceiling == pytest.approx(0.52)
    assert hot_clusters(levels, FLEET.cpu, OPEN, hs, margin=0.25) == {}  # 0.70 ≤ 0.50 + 0.25


def test_a_cluster_is_shaved_to_the_fleets_level_its_bound_workloads_to_their_own() -> None:
    # users near clusters 0 and 1 only (SLO): their achievable level there is (20 cores + 0.5 + 0.4) → 0.55
    levels = np.array([0.70, 0.40, 0.20])
    bound = holding("web", {0: 20}, latency=[5.0, 5.0, 300.0], slo=150.0)
    hot = hot_clusters(levels, FLEET.cpu, OPEN, [bound], margin=0.02)
    # the whole fleet's fill would be 0.433, but cluster 0 cannot go below its own background
    assert hot[0].target == pytest.approx(0.50)
    assert hot[0].ceiling == pytest.approx(0.55 + 0.02)
    plan = shave(0, hot[0], levels, LIMITS, OPEN, FLEET, [bound], min_gain=0.01, budget=100)
    assert plan is not None and {m.target for m in plan.moves} == {1}
    assert plan.after == pytest.approx(0.55)  # no lower than the cluster it gives to: both at 0.55
    assert plan.replicas == 15


def test_a_cluster_that_holds_only_its_own_background_is_not_hot() -> None:
    levels = np.array([0.80, 0.30, 0.30])
    assert hot_clusters(levels, FLEET.cpu, OPEN, [holding("web", {1: 2})], margin=0.02) == {}


def test_shaving_moves_the_fewest_replicas_to_the_lowest_clusters_down_to_the_achievable_level() -> None:
    levels = np.array([0.70, 0.40, 0.40])
    big = Holding("big", {0: 10}, 2.0, 1.0, OPEN.copy())  # 0.02 per replica: moved first
    hs = [holding("web", {0: 10}), big]
    plan = shave(0, AT_050, levels, LIMITS, OPEN, FLEET, hs, min_gain=0.01, budget=100)
    assert plan is not None
    assert plan.before == pytest.approx(0.70)
    assert plan.after == pytest.approx(0.50)
    assert plan.replicas == 10  # ten of the big replicas, none of the small
    assert {m.workload for m in plan.moves} == {"big"}
    assert plan.placements["big"] == {1: 5, 2: 5}
    assert levels.tolist() == pytest.approx([0.50, 0.50, 0.50])  # updated for the next cluster's plan
    doc = plan.as_json(["a", "b", "c"])
    assert doc["waterLevelBefore"] == 0.7 and doc["waterLevelAfter"] == 0.5 and doc["achievableLevel"] == 0.5
    assert doc["targets"]["b"] == {"waterLevelBefore": 0.4, "waterLevelAfter": 0.5}
    assert "0.700" in plan.reason("a") and "0.500" in plan.reason("a")


def test_the_budget_caps_the_moves() -> None:
    levels = np.array([0.70, 0.40, 0.40])
    plan = shave(0, AT_050, levels, LIMITS, OPEN, FLEET, [holding("web", {0: 20})], min_gain=0.01, budget=3)
    assert plan is not None and plan.replicas == 3
    assert plan.after == pytest.approx(0.67)
    assert shave(0, AT_050, levels.copy(), LIMITS, OPEN, FLEET, [holding("web", {0: 20})], min_gain=0.01,
                 budget=0) is None


def test_a_workload_an_earlier_plan_of_the_pass_moved_is_left_to_it() -> None:
    # its Binding carries one plan's moves: a second plan naming it would overwrite the first's
    levels = np.array([0.70, 0.40, 0.40])
    hs = [holding("web", {0: 20}), holding("api", {0: 20})]
    plan = shave(0, AT_050, levels, LIMITS, OPEN, FLEET, hs, min_gain=0.01, budget=100, leave={"api"})
    assert plan is not None and {m.workload for m in plan.moves} == {"web"} and plan.after == pytest.approx(0.50)
    assert shave(0, AT_050, np.array([0.70, 0.40, 0.40]), LIMITS, OPEN, FLEET, hs, min_gain=0.01, budget=100,
                 leave={"web", "api"}) is None


def test_a_plan_that_gains_less_than_the_minimum_is_dropped_and_changes_nothing() -> None:
    levels = np.array([0.70, 0.40, 0.40])
    before = levels.copy()
    # 4 replicas: 0.04 < 0.05
    plan = shave(0, AT_050, levels, LIMITS, OPEN, FLEET, [holding("web", {0: 20})], min_gain=0.05, budget=4)
    assert plan is None
    assert levels.tolist() == before.tolist()


def test_a_move_never_takes_a_replica_beyond_the_latency_slo() -> None:
    levels = np.array([0.70, 0.40, 0.40])
    # cluster 1 is 200 ms from the users (SLO 150), cluster 2 unknown: no move is allowed
    far = holding("web", {0: 20}, latency=[5.0, 200.0, float("nan")], slo=150.0)
    assert shave(0, AT_050, levels, LIMITS, OPEN, FLEET, [far], min_gain=0.01, budget=100) is None
    # within the SLO: only there, and no further than the receiving cluster stays under the margin
    near = holding("web", {0: 20}, latency=[5.0, 90.0, 200.0], slo=150.0)
    plan = shave(0, AT_050, levels, LIMITS, OPEN, FLEET, [near], min_gain=0.01, budget=100)
    assert plan is not None
    assert {m.target for m in plan.moves} == {1}
    assert plan.placements["web"][1] == 12  # cluster 1 up to 0.52 = the achievable level + the margin
    assert plan.after == pytest.approx(0.58)


def test_without_a_latency_slo_a_move_goes_nearest_the_users_and_an_unknown_cluster_comes_last() -> None:
    """Users known, no SLO: no cluster is out of bounds, yet replicas fill the cluster nearest their users
    (up to the ceiling, 0.52) before a farther one takes any; without users the two take turns."""
    def plan_for(latency: list[float] | None, levels: list[float]) -> dict[int, int]:
        plan = shave(0, AT_050, np.array(levels), LIMITS, OPEN, FLEET, [holding("web", {0: 20}, latency=latency)],
                     min_gain=0.01, budget=100)
        assert plan is not None
        return plan.placements["web"]

    assert plan_for([5.0, 20.0, 200.0], [0.70, 0.40, 0.40]) == {1: 12, 2: 8}
    assert plan_for(None, [0.70, 0.40, 0.40]) == {1: 10, 2: 10}
    # cluster 1's latency unknown: it is allowed (no SLO), after the known one however low it stands
    assert plan_for([5.0, float("nan"), 200.0], [0.70, 0.30, 0.45]) == {2: 7, 1: 13}
    # nothing known anywhere: the lowest first, as without users
    assert plan_for([5.0, float("nan"), float("nan")], [0.70, 0.45, 0.40]) == {0: 2, 1: 7, 2: 11}


def test_the_placement_policy_and_closed_clusters_are_respected() -> None:
    levels = np.array([0.70, 0.40, 0.40])
    only_2 = holding("web", {0: 20}, allowed=[True, False, True])
    closed = np.array([True, True, False])
    assert shave(0, AT_050, levels, LIMITS, closed, FLEET, [only_2], min_gain=0.01, budget=100) is None


def test_a_receiving_cluster_never_goes_past_its_limit_nor_above_the_source() -> None:
    levels = np.array([0.90, 0.84, 0.84])
    plan = shave(0, Hot(0.50, 1.0), levels, LIMITS, OPEN, FLEET, [holding("web", {0: 20})], min_gain=0.01,
                 budget=100)
    assert plan is not None
    assert max(a for _, a in plan.targets.values()) <= 0.85 + 1e-9
    assert plan.replicas == 2


def test_the_damping_window_needs_a_cluster_hot_that_long_in_a_row() -> None:
    watch = PeakWatch(after_s=600.0)
    assert watch.observe({"a", "b"}, 0.0) == []
    assert watch.observe({"a", "b"}, 599.0) == []
    assert watch.observe({"a"}, 300.0 + 300.0) == ["a"]  # b cooled off: forgotten
    assert watch.observe({"a", "b"}, 700.0) == ["a"]  # b starts again
    watch.shaved("a", 700.0)
    assert watch.observe({"a", "b"}, 1200.0) == []
    assert watch.observe({"a", "b"}, 1300.0) == ["a", "b"]


# users next to cluster 0; clusters 1 and 2 at 90 and 200 ms, all within a 250 ms SLO
AWAY = [5.0, 90.0, 200.0]


def back(levels: np.ndarray, web: Holding, *, min_gain_ms: float = 20.0, budget: int = 100,
         receivers: np.ndarray = OPEN) -> list[Shave]:
    level = fleet_level(levels, FLEET.cpu, OPEN, [web])
    return homeward(levels, LIMITS, receivers, FLEET, [web], level=level, margin=0.02, min_gain_ms=min_gain_ms,
                    budget=budget)


def test_replicas_away_from_their_users_go_back_while_the_near_cluster_stays_under_the_achievable_level() -> None:
    # backgrounds 0.30 / 0.50 / 0.50: the 20 cores fill cluster 0 up to 0.50, the achievable level
    levels = np.array([0.30, 0.60, 0.60])
    plans = back(levels, holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0))
    assert len(plans) == 1
    plan = plans[0]
    # the farthest first, and cluster 0 no higher than the achievable level - the margin
    assert plan.cluster == 0 and plan.kind == "return"
    assert sorted((m.source, m.replicas) for m in plan.moves) == [(1, 8), (2, 10)]
    assert plan.placements["web"] == {0: 18, 1: 2}
    assert plan.before == pytest.approx(0.30) and plan.after == pytest.approx(0.48)
    assert plan.achievable == pytest.approx(0.50)
    assert levels.tolist() == pytest.approx([0.48, 0.52, 0.50])
    doc = plan.as_json(["a", "b", "c"])
    assert doc["kind"] == "return" and "targets" not in doc
    assert doc["sources"]["c"] == {"waterLevelBefore": 0.6, "waterLevelAfter": 0.5}
    assert plan.reason("a").startswith("peak shave a: 18 replica(s) back near their users from 2 cluster(s)")


def test_a_return_must_gain_the_minimum_latency_and_stay_within_the_budget() -> None:
    def web() -> Holding:
        return holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0)

    plans = back(np.array([0.30, 0.60, 0.60]), web(), min_gain_ms=100.0)
    assert [(m.source, m.replicas) for m in plans[0].moves] == [(2, 10)]  # 90 → 5 ms gains only 85
    assert sum(p.replicas for p in back(np.array([0.30, 0.60, 0.60]), web(), budget=3)) == 3
    assert back(np.array([0.30, 0.60, 0.60]), web(), budget=0) == []


def test_replicas_go_back_near_their_users_without_a_latency_slo() -> None:
    plans = back(np.array([0.30, 0.60, 0.60]), holding("web", {1: 10, 2: 10}, latency=AWAY))
    assert [(p.cluster, p.replicas) for p in plans] == [(0, 18)]


def test_a_workloads_replicas_go_to_one_cluster_a_pass() -> None:
    # clusters 0 and 1 both next to the users, both with room for 8 under 0.40 - 0.02 (the water fills
    # them to 0.40; cluster 2's own 0.50 does not raise the level replicas return under)
    levels = np.array([0.30, 0.30, 0.70])
    plans = back(levels, holding("web", {2: 20}, latency=[5.0, 5.0, 200.0], slo=250.0))
    assert [(p.cluster, p.replicas) for p in plans] == [(0, 8)]


@pytest.mark.parametrize("levels, web, receivers", [
    # cluster 0 already at the achievable level (0.50): inside the band, it takes nothing back
    ([0.50, 0.50, 0.50], holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0), OPEN),
    # no users: nothing is away from them
    ([0.30, 0.60, 0.60], holding("web", {1: 10, 2: 10}), OPEN),
    # the near cluster beyond the placement policy, or of unknown latency where the replicas are
    ([0.30, 0.60, 0.60], holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0, allowed=[False, True, True]), OPEN),
    ([0.30, 0.60, 0.60], holding("web", {1: 10, 2: 10}, latency=[5.0, float("nan"), float("nan")], slo=250.0),
     OPEN),
    # the near cluster has not had room for the damping window
    ([0.30, 0.60, 0.60], holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0), np.array([False, True, True])),
])
def test_nothing_returns_without_room_users_or_a_known_gain(levels: list[float], web: Holding,
                                                          receivers: np.ndarray) -> None:
    before = np.array(levels)
    work = before.copy()
    assert back(work, web, receivers=receivers) == []
    assert work.tolist() == before.tolist()


def test_a_cluster_receives_only_once_it_has_had_room_for_the_damping_window() -> None:
    watch, names = PeakWatch(after_s=600.0), ["a", "b", "c"]
    cool, warm = np.array([0.30, 0.60, 0.60]), np.array([0.55, 0.60, 0.60])
    assert not room_for_returns(watch, names, cool, OPEN, 0.50, 0.02, 0.0).any()
    assert not room_for_returns(watch, names, cool, OPEN, 0.50, 0.02, 599.0).any()
    assert room_for_returns(watch, names, cool, OPEN, 0.50, 0.02, 600.0).tolist() == [True, False, False]
    # a dip that ends starts the window again
    assert not room_for_returns(watch, names, warm, OPEN, 0.50, 0.02, 700.0).any()
    assert not room_for_returns(watch, names, cool, OPEN, 0.50, 0.02, 800.0).any()
    assert not room_for_returns(watch, names, cool, np.array([False, True, True]), 0.50, 0.02, 2000.0).any()


def test_a_cluster_that_received_waits_another_window_before_it_receives_again() -> None:
    """The levels the next pass reads may not show the replicas it took yet."""
    watch, names = PeakWatch(after_s=600.0), ["a", "b", "c"]
    levels = np.array([0.30, 0.60, 0.60])
    web = holding("web", {1: 10, 2: 10}, latency=AWAY, slo=250.0)

    def pass_at(now: float) -> int:
        plans = returns(watch, names, levels, LIMITS, OPEN, FLEET, [web], leave=set(), margin=0.02,
                        min_gain_ms=20.0, budget=3, now=now)
        for plan in plans:
            web.placement = plan.placements["web"]
        return sum(p.replicas for p in plans)

    assert pass_at(0.0) == 0  # a has room, not yet for the window
    assert pass_at(600.0) == 3
    assert pass_at(700.0) == 0  # still room, but a received: another window first
    assert pass_at(1200.0) == 3
    assert web.placement == {0: 6, 1: 10, 2: 4}
    # a Binding the pass just shaved is left alone
    assert returns(watch, names, levels, LIMITS, OPEN, FLEET, [web], leave={"web"}, margin=0.02, min_gain_ms=20.0,
                   budget=3, now=1800.0) == []
