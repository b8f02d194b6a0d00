"""Karmada ``pkg/util/helper/webstermethod_test.go`` (TestAllocateWebsterSeats), case by case.

The stored version read is the one whose "classic example, round 6" expects 2:2:1:1 (the
f8fdd02 expectations). Parties are clusters, votes are static weights, the seats already held
are the current placement and the new seats are added to it.
"""

from __future__ import annotations

import pytest

from tests.karmada.harness import differs, fleet, placed, schedule, static

VOTES = {"PartyA": 100000, "PartyB": 80000, "PartyC": 30000, "PartyD": 20000}
ROUNDS = [(1, (1, 0, 0, 0)), (2, (1, 1, 0, 0)), (3, (2, 1, 0, 0)), (4, (2, 1, 1, 0)),
          (5, (2, 2, 1, 0)), (6, (2, 2, 1, 1)), (7, (3, 2, 1, 1)), (8, (3, 3, 1, 1))]


def seats(votes: dict[str, int], new: int, initial: dict[str, int] | None = None) -> dict[str, int]:
    names = set(votes) | set(initial or {})
    snap = fleet(dict.fromkeys(sorted(names)))
    weights = {p: v for p, v in votes.items() if v > 0}
    total = new + sum((initial or {}).values())
    r = schedule(snap, total, rs=static(weights), current=initial)
    return placed(r)


@pytest.mark.parametrize(("new", "want"), ROUNDS, ids=[f"classic example, round {n}" for n, _ in ROUNDS])
def test_classic_example(new: int, want: tuple[int, ...]) -> None:
    got = seats(VOTES, new)
    assert [got.get(p, 0) for p in VOTES] == list(want)


def test_classic_example_round_6_after_a_scale_down_or_forced_reschedule() -> None:
    """The same tie rule when seats are taken back (8 → 6) and when a reschedule divides afresh."""
    snap = fleet(dict.fromkeys(VOTES))
    eight = placed(schedule(snap, 8, rs=static(VOTES)))
    want = {"PartyA": 2, "PartyB": 2, "PartyC": 1, "PartyD": 1}
    assert placed(schedule(snap, 6, rs=static(VOTES), current=eight)) == want
    assert placed(schedule(snap, 6, rs=static(VOTES), current=eight, rebalance=True)) == want


def test_empty_party_votes_expect_nil_result() -> None:
    r = schedule(fleet({}), 1, rs=static({"PartyA": 1}))
    assert r.phase == "Unschedulable" and r.placement == []


def test_party_votes_not_empty_new_seats_0_expect_all_seats_0() -> None:
    assert seats({"PartyA": 100, "PartyB": 200}, 0) == {}


def test_both_party_votes_and_new_seats_0_expect_nil_result() -> None:
    assert schedule(fleet({}), 0).placement == []


def test_tie_breaker_nil_break_tie_by_seats() -> None:
    assert seats({"PartyA": 3, "PartyB": 1}, 1, {"PartyA": 1}) == {"PartyA": 1, "PartyB": 1}


def test_tie_breaker_nil_break_tie_by_name() -> None:
    assert seats({"PartyA": 1, "PartyB": 1}, 1) == {"PartyA": 1}


def test_custom_tie_breaker_returns_true() -> None:
    """``a.Name < b.Name`` is DRO-DS's own order for static weights."""
    assert seats({"PartyA": 1, "PartyB": 1}, 1) == {"PartyA": 1}


def test_custom_tie_breaker_returns_false_not_configurable() -> None:
    """Karmada lets the caller reverse the order (PartyB wins); DRO-DS's order is fixed."""
    differs("D5")
    assert seats({"PartyA": 1, "PartyB": 1}, 1) == {"PartyA": 1}


def test_new_party_joins_only_new_parties_get_new_seats() -> None:
    assert seats({"NewParty1": 1, "NewParty2": 1, "OldParty": 0}, 2, {"OldParty": 0}) == {
        "NewParty1": 1, "NewParty2": 1}


def test_new_and_old_parties_compete_for_new_seats() -> None:
    """Karmada: NewParty 2, OldParty 1 (the tied second seat by name). DRO-DS gives an exact tie
    between equally-seated clusters to the one already running the workload (stability)."""
    differs("D5")
    assert seats({"OldParty": 1, "NewParty": 1}, 2, {"OldParty": 1}) == {"NewParty": 1, "OldParty": 2}


def test_initial_party_without_votes_gets_no_new_seats() -> None:
    assert seats({"PartyA": 100}, 2, {"PartyB": 3}) == {"PartyA": 2, "PartyB": 3}
