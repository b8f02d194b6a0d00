"""Placement that follows the users: ``placement.users`` / ``latencySLOMs``, the
UserLatency score and UserLatencySLO filter, division by the users' shares, the explanation."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from drods.model.binding import TargetCluster
from drods.model.cluster import NetworkProfile
from drods.model.placement import Placement
from drods.scheduler import Profile, Scheduler, Snapshot
from drods.scheduler.plugins.user_distance import expected_latency, latency_matrix
from drods.scheduler.task import Task, analyse
from drods.scheduler.user_division import latency_bands
from drods.scheduler.users import UserDemand
from tests.scheduler.conftest import add, status, task

# region → latency (ms) from each cluster's profile; two clusters per region
LAT = {"eu": {"eu": 5, "us": 90, "ap": 220}, "us": {"eu": 90, "us": 5, "ap": 160},
       "ap": {"eu": 220, "us": 160, "ap": 5}}


def fleet(snap: Snapshot, used: dict[str, float] | None = None) -> None:
    for region in LAT:
        for i in range(2):
            name = f"{region}-{i}"
            add(snap, name, region=region, network=NetworkProfile(latencyMs=LAT[region]),
                st=status(cpu_used=(used or {}).get(name, 10.0)))


def by_region(pairs: tuple[tuple[str, int], ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c, k in pairs:
        out[c[:2]] = out.get(c[:2], 0) + k
    return out


def test_users_field_contract() -> None:
    pl = Placement.model_validate({"users": [{"region": "eu", "weight": 3}, {"site": "LHR"}], "latencySLOMs": 80})
    assert [(u.kind, u.place, u.weight) for u in pl.users] == [("region", "eu", 3.0), ("site", "LHR", 1.0)]
    for bad in ({"users": [{"region": "eu", "site": "x"}]}, {"users": [{"weight": 1}]},
                {"users": [{"region": "eu", "weight": 0}]}, {"users": [{"region": "eu"}, {"region": "eu"}]},
                {"users": [{"site": "LHR"}, {"site": "lhr"}]}, {"users": [{"site": "LHR"}, {"city": "LHR"}]},
                {"latencySLOMs": 0}, {"users": [{"region": "eu", "extra": 1}]}):
        with pytest.raises(ValidationError):
            Placement.model_validate(bad)
    info = analyse(task(placement=Placement.model_validate({"users": [{"region": "eu", "weight": 3},
                                                                      {"region": "us", "weight": 1}]})))
    assert info.users is not None and info.users.source == "declared"
    assert [u.share for u in info.users.shares] == [0.75, 0.25]
    assert analyse(task()).users is None  # no users: the plugins skip


def test_declared_users_take_precedence_over_learned() -> None:
    learned = UserDemand.of([("site", "x", 1.0)], "learned")
    declared = task(placement=Placement.model_validate({"users": [{"city": "Paris"}]}))
    assert analyse(Task(declared, users=learned)).users.source == "declared"  # type: ignore[union-attr]
    assert analyse(Task(task(), users=learned, latency_slo_ms=50.0)).users == learned
    assert analyse(Task(task(), latency_slo_ms=50.0)).latency_slo_ms == 50.0


def test_replicas_go_to_the_users_region_and_the_decision_says_why(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    spec = task(replicas=6, placement=Placement.model_validate({"users": [{"region": "ap"}], "latencySLOMs": 100}))
    res = sched.schedule(spec, snap, name="w")
    assert res.phase == "Scheduled" and by_region(res.pairs) == {"ap": 6}
    users = res.analysis["users"]
    assert users["source"] == "declared" and users["sites"] == [{"region": "ap", "weight": 1.0}]
    assert users["latencyMs"] == {c: 5.0 for c, _ in res.pairs} and users["latencySLOMs"] == 100
    assert "beyond the users' latency SLO of 100 ms (220 ms from the nearest user place)" in res.reasons["eu-0"]


def test_shares_divide_the_replicas(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    spec = task(replicas=10, placement=Placement.model_validate(
        {"users": [{"region": "eu", "weight": 6}, {"region": "us", "weight": 4}], "latencySLOMs": 100}))
    res = sched.schedule(spec, snap, name="w")
    assert by_region(res.pairs) == {"eu": 6, "us": 4}
    # each chosen cluster's latency is from the users it is nearest (its own region's), not an average
    # over the users of the other region too
    users = res.analysis["users"]
    assert users["latencyMs"] == {c: 5.0 for c, _ in res.pairs}
    assert users["latencyFrom"] == {c: c.split("-")[0] for c, _ in res.pairs}


def test_full_region_overflows_to_the_nearest_beyond_the_slo_and_says_so(snap: Snapshot) -> None:
    # ap is nearly full (85 % limit): the rest must go beyond the SLO, nearest (us, 160 ms) first
    fleet(snap, used={"ap-0": 83.0, "ap-1": 83.0, "eu-0": 20.0, "eu-1": 20.0, "us-0": 20.0, "us-1": 20.0})
    sched = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatencySLO": {"headroom": 0}}}), rng_seed=7)
    spec = task(replicas=10, placement=Placement.model_validate({"users": [{"region": "ap"}], "latencySLOMs": 100}))
    res = sched.schedule(spec, snap, name="w")
    placed = by_region(res.pairs)
    assert res.placed == 10 and placed["ap"] == 4 and placed.get("us", 0) == 6 and "eu" not in placed
    assert "only 4 of the 10 replicas to place fit within 100 ms" in res.analysis["users"]["latencySLO"]
    assert res.message.endswith(res.analysis["users"]["latencySLO"])  # the status and explain say it too
    # an SLO without users known is said to wait for them, not dropped in silence
    alone = sched.schedule(task(replicas=2, placement=Placement.model_validate({"latencySLOMs": 30})), snap, name="x")
    assert alone.phase == "Scheduled" and "latency SLO 30 ms not applied: no users known yet" in alone.message


def test_users_region_keeps_headroom_below_its_limit_while_beyond_the_slo_has_room(snap: Snapshot) -> None:
    """At its limit a cluster is one step of its background's noise from breaching the water-level SLA:
    within the SLO, replicas fill to the limit less the headroom (0.03) while a cluster beyond it has room
    under its own, and the decision says so; only when none has do they use the last of it."""
    fleet(snap, used={"ap-0": 80.0, "ap-1": 80.0, "eu-0": 20.0, "eu-1": 20.0, "us-0": 20.0, "us-1": 20.0})
    sched = Scheduler(Profile.default(), rng_seed=7)
    spec = task(replicas=10, placement=Placement.model_validate({"users": [{"region": "ap"}], "latencySLOMs": 100}))
    res = sched.schedule(spec, snap, name="w")
    assert res.placed == 10 and by_region(res.pairs) == {"ap": 4, "us": 6}  # ap to 82 %, not 85 %
    assert ("only 4 of the 10 replicas to place fit within 100 ms of the users under the water-level limit "
            "less its headroom of 0.03") in res.message
    # what fits under the headroom within the SLO is placed whole there: nothing beyond it
    res = sched.schedule(task(replicas=4, placement=spec.placement), snap, name="v")
    assert by_region(res.pairs) == {"ap": 4} and "latencySLO" not in res.analysis["users"]
    # beyond the SLO every cluster is as high: the users' region takes the last of its room, to the limit
    full = Snapshot()
    fleet(full, used={"ap-0": 80.0, "ap-1": 80.0, "eu-0": 84.0, "eu-1": 84.0, "us-0": 84.0, "us-1": 84.0})
    res = sched.schedule(spec, full, name="w")
    assert res.placed == 10 and by_region(res.pairs) == {"ap": 10}
    # headroom 0: the users' region fills to its limit first, as before the headroom
    to_limit = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatencySLO": {"headroom": 0}}}), rng_seed=7)
    assert by_region(to_limit.schedule(spec, snap, name="w").pairs) == {"ap": 10}
    for bad in (-0.1, 0.5, "x", True):
        with pytest.raises(ValueError, match="headroom"):
            Profile.from_dict({"pluginArgs": {"UserLatencySLO": {"headroom": bad}}})


def test_users_no_feasible_cluster_is_near_are_named_though_others_are_served(snap: Snapshot) -> None:
    """Half the users (ap) have no cluster within the SLO, the other half (eu) have room: the filter
    passes the eu clusters and the decision said nothing of ap's users."""
    fleet(snap)
    sched = Scheduler(Profile.default(), rng_seed=7)
    spec = task(replicas=4, placement=Placement.model_validate(
        {"users": [{"region": "eu"}, {"region": "ap"}], "latencySLOMs": 100,
         "clusterAffinity": {"clusterNames": ["eu-0", "eu-1", "us-0", "us-1"]}}))
    res = sched.schedule(spec, snap, name="w")
    assert res.placed == 4 and set(by_region(res.pairs)) == {"eu"}, res.pairs
    said = ("no feasible cluster is within 100 ms of the users at region ap (50% of them): they are served "
            "from beyond it")
    assert res.analysis["users"]["latencySLO"] == said and res.message.endswith(said), res.message
    both = sched.schedule(task(replicas=4, placement=Placement.model_validate(
        {"users": [{"region": "eu"}, {"region": "ap"}], "latencySLOMs": 100})), snap, name="v")
    assert "latencySLO" not in both.analysis["users"], both.analysis["users"]  # ap's own clusters are feasible


def test_existing_replicas_beyond_the_slo_stay_until_a_rebalance(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    spec = task(replicas=4, placement=Placement.model_validate({"users": [{"region": "ap"}], "latencySLOMs": 100}))
    cur = [TargetCluster(cluster="eu-0", replicas=4)]
    kept = sched.schedule(Task(spec, name="w", current=cur), snap)
    assert dict(kept.pairs) == {"eu-0": 4}  # the filter limits growth only: nothing moves by itself
    moved = sched.schedule(Task(spec, name="w", current=cur, rebalance=True), snap)
    assert by_region(moved.pairs) == {"ap": 4}
    # the spec changed (declared users or SLO): what is now beyond the SLO leaves, as for an affinity
    changed = sched.schedule(Task(spec, name="w", current=cur, placement_changed=True), snap)
    assert by_region(changed.pairs) == {"ap": 4}


def test_score_is_neutral_where_latency_is_unknown_and_measured_wins(snap: Snapshot) -> None:
    fleet(snap)
    add(snap, "dark", region="mars")  # no profile, no measurement
    users = UserDemand.of([("region", "eu", 1.0)], "learned")
    assert users is not None
    exp = expected_latency(latency_matrix(snap, users), users.weights)
    assert exp[snap.index["eu-0"]] == 5.0 and exp[snap.index["ap-0"]] == 220.0 and np.isnan(exp[snap.index["dark"]])
    profile = Profile.from_dict({"filters": [], "scores": {"UserLatency": 1.0},
                                 "pluginArgs": {"UserLatency": {"referenceMs": 200, "unknownScore": 40}}})
    res = Scheduler(profile, rng_seed=1).schedule(Task(task(replicas=1), name="w", users=users), snap)
    raw = res.score_arrays
    assert res.pairs and raw  # the only chosen cluster is the nearest
    assert res.pairs[0][0].startswith("eu")
    plugin = Scheduler(profile).profile.scores[0][0]
    s = plugin.score(analyse(Task(task(), users=users)), snap, np.ones(snap.n, dtype=bool))
    assert s[snap.index["dark"]] == 40.0 and s[snap.index["eu-0"]] == pytest.approx(100 * (1 - 5 / 200))
    # a measured pair (C2 network status) overrides the declared profile
    snap.set_network_pair("ap-0", "eu", 12.0, None)
    exp = expected_latency(latency_matrix(snap, users), users.weights)
    assert exp[snap.index["ap-0"]] == 12.0


def test_users_a_cluster_is_not_measured_from_weigh_as_neutral_in_its_score(snap: Snapshot) -> None:
    # near measured only from its own city's quarter of the users scored as if all of them were there
    # (walkthrough AL): the other three quarters now weigh as unknownScore
    add(snap, "near-dfw", st=status(cpu_used=10.0))
    add(snap, "near-lhr", st=status(cpu_used=10.0))
    snap.set_network_pair("near-dfw", "DFW", 3.0, None)
    snap.set_network_pair("near-lhr", "DFW", 84.0, None)
    snap.set_network_pair("near-lhr", "LHR", 4.0, None)
    users = UserDemand.of([("site", "LHR", 3.0), ("site", "DFW", 1.0)], "declared")
    assert users is not None
    profile = Profile.from_dict({"filters": [], "scores": {"UserLatency": 1.0},
                                 "pluginArgs": {"UserLatency": {"referenceMs": 120, "unknownScore": 50}}})
    plugin = Scheduler(profile).profile.scores[0][0]
    s = plugin.score(analyse(Task(task(), users=users)), snap, np.ones(snap.n, dtype=bool))
    lhr = 100 * (1 - (0.75 * 4 + 0.25 * 84) / 120)
    assert s[snap.index["near-lhr"]] == pytest.approx(lhr)
    assert s[snap.index["near-dfw"]] == pytest.approx(0.25 * 100 * (1 - 3 / 120) + 0.75 * 50)
    assert s[snap.index["near-lhr"]] > s[snap.index["near-dfw"]]


def test_a_cordoned_cluster_within_the_slo_is_no_room_and_the_rest_go_beyond_it(snap: Snapshot,
                                                                                 sched: Scheduler) -> None:
    # the only cluster within the SLO cordoned (no new placements): a scale-up had stayed pending with
    # "can hold no more" (walkthrough AL); the SLO gives way and the decision says so
    fleet(snap)
    spec = task(replicas=6, placement=Placement.model_validate({"users": [{"region": "ap"}], "latencySLOMs": 100}))
    first = sched.schedule(spec, snap, name="w")
    assert by_region(first.pairs) == {"ap": 6}
    for c in ("ap-0", "ap-1"):
        add(snap, c, region="ap", network=NetworkProfile(latencyMs=LAT["ap"]), st=status(cpu_used=10.0),
            unschedulable=True)
    cur = [TargetCluster(cluster=c, replicas=k) for c, k in first.pairs]
    res = sched.schedule(task(replicas=10, placement=spec.placement), snap, name="w", current=cur)
    assert res.placed == 10 and by_region(res.pairs)["ap"] == 6 and by_region(res.pairs).get("us", 0) == 4
    assert "only 0 of the 4 replicas to place fit within 100 ms" in res.analysis["users"]["latencySLO"]


def test_latency_bands() -> None:
    assert latency_bands(np.array([5.0, 12.0, 90.0, np.nan, 30.0])).tolist() == [0, 0, 2, 3, 1]
    # closed above: a cluster exactly the band's width from the nearest is in its band
    assert latency_bands(np.array([0.0, 20.0, 20.5])).tolist() == [0, 0, 1]
    assert latency_bands(np.array([5.0, 90.0, 100.0]), near_ms=100.0).tolist() == [0, 0, 0]


def test_near_ms_lets_the_water_level_decide_within_the_slo(snap: Snapshot, sched: Scheduler) -> None:
    # users in eu, SLO 100 ms: us (90 ms) is within it and much quieter than eu
    fleet(snap, used={"eu-0": 60.0, "eu-1": 60.0, "us-0": 10.0, "us-1": 10.0, "ap-0": 10.0, "ap-1": 10.0})
    spec = task(replicas=10, placement=Placement.model_validate({"users": [{"region": "eu"}], "latencySLOMs": 100}))
    to_caps = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatency": {"nearCeilingMargin": None}}}), rng_seed=7)
    nearest_first = by_region(to_caps.schedule(spec, snap, name="w").pairs)
    assert nearest_first == {"eu": 10}  # the default band (20 ms) with no ceiling: eu fills first while it has room
    # with the default ceiling (the bands' mean level + 0.03) eu, far above it, takes none while us has room
    assert by_region(sched.schedule(spec, snap, name="w").pairs) == {"us": 10}
    within = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatency": {"nearMs": 100}}}), rng_seed=7)
    balanced = by_region(within.schedule(spec, snap, name="w").pairs)
    # one band up to the SLO: the quieter us clusters take a part (the score still leans to eu), ap
    # (beyond the SLO) none
    assert balanced.get("us", 0) > 0 and sum(balanced.values()) == 10 and "ap" not in balanced, balanced
    for bad in (0, -5, "near", True):
        with pytest.raises(ValueError, match="nearMs"):
            Profile.from_dict({"pluginArgs": {"UserLatency": {"nearMs": bad}}})


def test_a_nearer_band_fills_only_to_the_mean_plus_the_margin_while_a_farther_one_within_the_slo_has_room(
        snap: Snapshot, sched: Scheduler) -> None:
    # users in eu, SLO 100 ms: us (90 ms) within it, ap (220 ms) not; 1-core replicas on 100-core clusters
    spec = task(replicas=10, placement=Placement.model_validate({"users": [{"region": "eu"}], "latencySLOMs": 100}))
    ceiling = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatency": {"nearCeilingMargin": 0.05}}}), rng_seed=7)
    off = Scheduler(Profile.from_dict({"pluginArgs": {"UserLatency": {"nearCeilingMargin": None}}}), rng_seed=7)
    # eu at 0.25, us at 0.20: the group's mean is 0.225, eu fills to 0.275 (2 replicas each), the rest to us
    fleet(snap, used={"eu-0": 25.0, "eu-1": 25.0, "us-0": 20.0, "us-1": 20.0, "ap-0": 5.0, "ap-1": 5.0})
    held = ceiling.schedule(spec, snap, name="w")
    assert by_region(held.pairs) == {"eu": 4, "us": 6}
    assert held.analysis["users"]["nearCeiling"] == ("the users' nearest clusters were filled no higher than water "
                                                     "level 0.28 (their group's mean + 0.05); the rest went to "
                                                     "clusters farther within the SLO")
    to_caps = off.schedule(spec, snap, name="w")
    assert by_region(to_caps.pairs) == {"eu": 10} and "nearCeiling" not in to_caps.analysis["users"]
    # eu already above the mean + the margin: all to us; eu the cooler: all to eu, as without a ceiling
    for used, where in (({"eu-0": 40.0, "eu-1": 40.0}, {"us": 10}), ({"us-0": 50.0, "us-1": 50.0}, {"eu": 10})):
        s = Snapshot()
        fleet(s, used={"eu-0": 20.0, "eu-1": 20.0, "us-0": 20.0, "us-1": 20.0, **used})
        res = ceiling.schedule(spec, s, name="w")
        assert by_region(res.pairs) == where
        assert ("nearCeiling" in res.analysis["users"]) == ("us" in where)  # said only when it held eu back
    for bad in (-0.1, "high", True):
        with pytest.raises(ValueError, match="nearCeilingMargin"):
            Profile.from_dict({"pluginArgs": {"UserLatency": {"nearCeilingMargin": bad}}})


def test_a_place_no_cluster_has_a_latency_from_is_named_in_the_decision(snap: Snapshot, sched: Scheduler) -> None:
    # a misspelt site weighs as neutral; the decision says so instead of placing in silence
    fleet(snap)
    spec = task(replicas=4, placement=Placement.model_validate(
        {"users": [{"region": "eu", "weight": 3}, {"site": "ATLANTIS", "weight": 1}]}))
    res = sched.schedule(spec, snap, name="w")
    assert res.phase == "Scheduled"
    assert res.analysis["users"]["unknownPlaces"] == [{"site": "ATLANTIS", "weight": 0.25}]
    known = sched.schedule(task(replicas=4, placement=Placement.model_validate({"users": [{"region": "eu"}]})),
                           snap, name="v")
    assert "unknownPlaces" not in known.analysis["users"]


def test_a_city_or_region_is_matched_without_case_a_site_as_written(snap: Snapshot, sched: Scheduler) -> None:
    # the clusters say LHR; a user who writes lhr means it (validation already compares places so)
    fleet(snap)
    add(snap, "lhr-0", region="eu", city="LHR", network=NetworkProfile(latencyMs=LAT["eu"]),
        st=status(cpu_used=30.0))
    for users in ([{"city": "lhr"}], [{"city": "LHR"}]):
        res = sched.schedule(task(replicas=3, placement=Placement.model_validate(
            {"users": users, "latencySLOMs": 4})), snap, name="w")
        assert res.phase == "Scheduled" and dict(res.pairs) == {"lhr-0": 3}, users
        assert "unknownPlaces" not in res.analysis["users"]
    res = sched.schedule(task(replicas=2, placement=Placement.model_validate({"users": [{"region": "AP"}]})),
                         snap, name="v")
    assert by_region(res.pairs) == {"ap": 2} and "unknownPlaces" not in res.analysis["users"]
    res = sched.schedule(task(replicas=2, placement=Placement.model_validate({"users": [{"site": "lhr"}]})),
                         snap, name="s")
    assert res.analysis["users"]["unknownPlaces"] == [{"site": "lhr", "weight": 1.0}]


def test_an_slo_for_users_no_latency_is_known_from_says_so_and_filters_nothing(snap: Snapshot,
                                                                             sched: Scheduler) -> None:
    """It said "only 0 of 3 replicas fit within 50 ms … the rest go to the nearest clusters beyond it":
    nothing was near or far, the latency was unknown."""
    fleet(snap)
    res = sched.schedule(task(replicas=3, placement=Placement.model_validate(
        {"users": [{"region": "mars-1"}], "latencySLOMs": 50})), snap, name="w")
    assert res.phase == "Scheduled" and sum(n for _, n in res.pairs) == 3
    said = res.analysis["users"]["latencySLO"]
    assert said == "no latency is known from the users at region mars-1 (100% of them) to any feasible cluster: " \
                   "the 50 ms SLO cannot be judged for them", said
    assert "fit within" not in res.message


def test_with_no_cluster_within_the_slo_the_overflow_goes_nearest_first_however_busy(snap: Snapshot) -> None:
    """Every cluster is beyond a 3 ms SLO: the replicas go to the users' nearest clusters while they have
    room, even where those stand above the others' mean level (the near-ceiling rule shares a group's
    replicas among bands *within* the SLO; beyond it, nearest first is all there is)."""
    fleet(snap, used={"us-0": 45.0, "us-1": 45.0, "eu-0": 10.0, "eu-1": 10.0, "ap-0": 10.0, "ap-1": 10.0})
    sched = Scheduler(Profile.default(), rng_seed=7)
    res = sched.schedule(task(replicas=2, placement=Placement.model_validate(
        {"users": [{"region": "us"}], "latencySLOMs": 3})), snap, name="w")
    assert res.phase == "Scheduled" and by_region(res.pairs) == {"us": 2}, res.pairs
    assert "nearCeiling" not in res.analysis["users"], res.analysis["users"]
