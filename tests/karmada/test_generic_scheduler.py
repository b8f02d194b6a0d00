"""Karmada ``pkg/scheduler/core/generic_scheduler_test.go`` (stored version 0372cabb):
Test_EvenDistributionOfReplicas, the acceptance cases of karmada-io/karmada#4220 for static
weights — a first decision, then a change (replicas, weights, clusters) from each possible
previous result.
"""

from __future__ import annotations

import pytest

from tests.karmada.harness import differs, fleet, placed, schedule, static

NAMES = ["member1", "member2", "member3", "member4"]


def parse(s: str) -> dict[str, int]:
    return {NAMES[i]: int(v) for i, v in enumerate(s.split(":")) if int(v) > 0}


def show(p: dict[str, int], n: int) -> str:
    return ":".join(str(p.get(NAMES[i], 0)) for i in range(n))


def decide(n: int, weights: list[int], replicas: int, previous: str = "") -> str:
    snap = fleet(dict.fromkeys(NAMES[:n]))
    rs = static({NAMES[i]: w for i, w in enumerate(weights)})
    return show(placed(schedule(snap, replicas, rs=rs, current=parse(previous) if previous else None)), n)


@pytest.mark.parametrize(("name", "n", "weights", "replicas", "transitions"), [
    ("replica 3, static weighted 1:1", 2, [1, 1], 3, {"": ["1:2", "2:1"]}),
    ("replica 3, static weighted 1:1:1, change replicas from 3 to 5, before change", 3, [1, 1, 1], 3,
     {"": ["1:1:1"]}),
    ("replica 3, static weighted 1:1:1, change replicas from 3 to 5, after change", 3, [1, 1, 1], 5,
     {"1:1:1": ["2:2:1", "2:1:2", "1:2:2"]}),
    ("replica 7, static weighted 2:1:1:1, change replicas from 7 to 8, before change", 4, [2, 1, 1, 1], 7,
     {"": ["3:2:1:1", "3:1:2:1", "3:1:1:2"]}),
    ("replica 6, static weighted 1:1:1:1, before change", 4, [1, 1, 1, 1], 6,
     {"": ["2:2:1:1", "2:1:2:1", "2:1:1:2", "1:2:2:1", "1:2:1:2", "1:1:2:2"]}),
    ("replica 5, static weighted 1:1:1, add a new cluster, before change", 3, [1, 1, 1], 5,
     {"": ["2:2:1", "2:1:2", "1:2:2"]}),
    ("replica 6, static weighted 1:1:1:1, remove a cluster and change static weight to 1:1:1, after change", 3,
     [1, 1, 1], 6, {"2:2:1:1": ["2:2:2"], "2:1:2:1": ["2:2:2"], "1:2:2:1": ["2:2:2"]}),
])
def test_even_distribution(name: str, n: int, weights: list[int], replicas: int,
                           transitions: dict[str, list[str]]) -> None:
    for previous, wants in transitions.items():
        # a removed cluster stays in the previous result; its replicas are placed again
        got = decide(n, weights, replicas, previous)
        assert got in wants, (previous or "new", got)


def test_7_to_8_replicas_2_1_1_1_is_webster() -> None:
    """Karmada expects the added replica on member1 (4:2:1:1 — 8 × 2/5 = 3.2 for member1).
    Webster gives it to a weight-1 cluster holding one replica (signpost 1/1.5 > 2/3.5): 3:2:2:1."""
    differs("D9")
    assert decide(4, [2, 1, 1, 1], 8, "3:2:1:1") == "3:2:2:1"
    assert decide(4, [2, 1, 1, 1], 8, "3:1:1:2") == "3:2:1:2"


def test_9_replicas_2_1_1_1_and_down_to_8_is_webster() -> None:
    """Karmada expects 4:2:2:1 (and, down to 8, a replica taken from a weight-1 cluster);
    Webster gives 3:2:2:2 from scratch and, down from 4:2:2:1, takes member1's fourth replica
    (its signpost 2/3.5 is the lowest held)."""
    differs("D9")
    assert decide(4, [2, 1, 1, 1], 9) == "3:2:2:2"
    assert decide(4, [2, 1, 1, 1], 8, "4:2:2:1") == "3:2:2:1"
    assert decide(4, [2, 1, 1, 1], 8, "4:1:2:2") == "3:1:2:2"


def test_weight_change_alone_moves_nothing() -> None:
    """Karmada re-divides 6 replicas when weights go from 1:1:1:1 to 2:1:1:1 (→ 3:1:1:1).
    DRO-DS keeps a placement whose replica count did not change (no churn); a reschedule
    (S11) or a replica change divides by the new weights."""
    differs("D2")
    for prev in ["2:2:1:1", "2:1:2:1", "1:1:2:2"]:
        assert decide(4, [2, 1, 1, 1], 6, prev) == prev
    snap = fleet(dict.fromkeys(NAMES))
    fresh = schedule(snap, 6, rs=static({"member1": 2, "member2": 1, "member3": 1, "member4": 1}),
                     current=parse("2:2:1:1"), rebalance=True)
    assert show(placed(fresh), 4) == "3:1:1:1"


def test_new_cluster_alone_moves_nothing() -> None:
    """Karmada moves one replica to a newly added member4 (weights 1:1:1:1, still 5 replicas);
    DRO-DS leaves 2:2:1 where it runs until the count changes or a reschedule is asked for."""
    differs("D2")
    assert decide(4, [1, 1, 1, 1], 5, "2:2:1") == "2:2:1:0"
    assert decide(4, [1, 1, 1, 1], 6, "2:2:1") == "2:2:1:1"
