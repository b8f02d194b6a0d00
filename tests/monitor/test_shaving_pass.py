"""One peak-shaving pass in order (`drods.monitor.shaving`), as the descheduler and the simulator run it:
a Binding carries one plan's moves, a plan not carried out changes nothing, and the budget is paid back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.shaving import ShavingPass
from drods.scheduler.peakshave import Capacity, Holding, Shave

NAMES = ["a", "b", "c", "d"]
FLEET = Capacity(np.full(4, 100.0), np.full(4, 400.0))  # 1 core = 0.01 of a cluster's water level
LIMITS = np.full(4, 0.85)
OPEN = np.ones(4, dtype=bool)
POLICY = AutoOpsPolicy(peakshaveAfterSeconds=0, peakshaveReturn=False)


@dataclass
class Tokens:
    """A move budget that only counts."""

    left: int
    per_minute: int = 100

    def take(self, n: int) -> int:
        got = min(n, self.left)
        self.left -= got
        return got

    def give_back(self, n: int) -> None:
        self.left += n


def web() -> Holding:
    """20 replicas on a and 20 on b (0.50 of background each), c and d at 0.30 with nothing placed:
    the fleet's achievable level is 0.50, so a and b are both hot at 0.70."""
    return Holding("web", {0: 20, 1: 20}, 1.0, 1.0, OPEN.copy(), None, None)


def test_a_binding_both_hot_clusters_hold_is_moved_by_the_first_plan_only() -> None:
    levels, held = np.array([0.70, 0.70, 0.30, 0.30]), web()
    tokens = Tokens(100)
    done = ShavingPass.of(POLICY).run(NAMES, levels, LIMITS, OPEN, FLEET, [held], 0.0, lambda _: True, tokens)
    assert [(p.cluster, p.replicas) for p in done] == [(0, 20)]  # b's plan had only web, which a's moved
    assert held.placement == {1: 20, 2: 10, 3: 10}
    assert levels.tolist() == pytest.approx([0.50, 0.70, 0.40, 0.40])
    assert tokens.left == 80  # what the plan did not use was given back
    assert done[0].hot_since == 0.0 and done[0].as_json(NAMES)["hotSince"] == 0.0


def test_a_plan_not_carried_out_changes_nothing_and_leaves_its_binding_to_the_next_plan() -> None:
    levels, held = np.array([0.70, 0.70, 0.30, 0.30]), web()
    tokens = Tokens(100)
    offered: list[Shave] = []

    def refuse_the_first(plan: Shave) -> bool:
        offered.append(plan)
        return len(offered) > 1

    shaving = ShavingPass.of(POLICY)
    done = shaving.run(NAMES, levels, LIMITS, OPEN, FLEET, [held], 5.0, refuse_the_first, tokens)
    assert [p.cluster for p in offered] == [0, 1]
    assert [(p.cluster, p.replicas) for p in done] == [(1, 20)]  # a's moves did not happen: b's plan moves web
    assert held.placement == {0: 20, 2: 10, 3: 10}
    assert levels.tolist() == pytest.approx([0.70, 0.50, 0.40, 0.40])
    assert tokens.left == 80  # the refused plan's 20 came back
    assert shaving.watch.hot_since == {"a": 5.0, "b": 5.0}  # both were decided: each waits a window again


SEVERITY = AutoOpsPolicy(peakshaveAfterSeconds=1800, peakshaveSevereMargin=0.05, peakshaveSevereAfterSeconds=300,
                         peakshaveReturn=False)


def offered_at(shaving: ShavingPass, levels: np.ndarray, held: Holding, now: float) -> list[Shave]:
    return shaving.run(NAMES, levels, LIMITS, OPEN, FLEET, [held], now, lambda _: True, Tokens(100))


def test_a_cluster_far_above_the_achievable_level_is_shaved_after_the_shorter_window() -> None:
    levels, held = np.array([0.70, 0.70, 0.30, 0.30]), web()  # 0.20 above the achievable 0.50
    shaving = ShavingPass.of(SEVERITY)
    assert offered_at(shaving, levels, held, 0.0) == []
    assert offered_at(shaving, levels, held, 299.0) == []  # far above, but not yet for the shorter window
    (plan,) = offered_at(shaving, levels, held, 300.0)
    assert plan.cluster == 0 and plan.severe and plan.hot_since == 0.0
    assert plan.as_json(NAMES)["severe"] is True and plan.as_json(NAMES)["hotSince"] == 0.0
    assert levels[0] == pytest.approx(0.50)
    # shaved: both windows start again for it
    assert shaving.watch.hot_since["a"] == 300.0 and shaving.severe.hot_since.get("a", 300.0) == 300.0


def test_a_cluster_a_little_above_waits_the_whole_window_and_so_does_one_far_above_without_a_severe_margin() -> None:
    # 8 replicas on a over a background of 0.47: the achievable level is 0.505, a stands 0.045 above it
    mild = Holding("web", {0: 8}, 1.0, 1.0, OPEN.copy(), None, None)
    levels = np.array([0.55, 0.50, 0.47, 0.50])
    shaving = ShavingPass.of(SEVERITY)
    for now in (0.0, 300.0, 1799.0):
        assert offered_at(shaving, levels, mild, now) == []
    (plan,) = offered_at(shaving, levels, mild, 1800.0)
    assert plan.cluster == 0 and not plan.severe and "severe" not in plan.as_json(NAMES)

    levels, held = np.array([0.70, 0.70, 0.30, 0.30]), web()
    shaving = ShavingPass.of(SEVERITY.model_copy(update={"peakshaveSevereMargin": None}))
    for now in (0.0, 300.0, 1799.0):
        assert offered_at(shaving, levels, held, now) == []
    assert [p.cluster for p in offered_at(shaving, levels, held, 1800.0)] == [0]


def test_far_above_the_fleet_but_not_above_where_its_replicas_may_go_waits_the_whole_window() -> None:
    # a's replicas may use a and b only (their users' latency SLO, say), and b stands as high: the fleet's
    # achievable level is far lower, but moving early would only churn inside the region
    local = Holding("local", {0: 10}, 1.0, 1.0, np.array([True, True, False, False]), None, None)
    levels = np.array([0.80, 0.78, 0.30, 0.30])
    shaving = ShavingPass.of(SEVERITY)
    assert offered_at(shaving, levels, local, 0.0) == [] and offered_at(shaving, levels, local, 300.0) == []
    assert shaving.watch.hot_since == {"a": 0.0} and shaving.severe.hot_since == {}
