"""Users learned from demand: the decaying window, the floor, the hysteresis that lets a
burst pass, and what is written to the Binding — with an injected clock, no sleeping."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from drods.model import jsondoc
from drods.model.annotations import LEARNED_USERS, PLACEMENT_OFFERS, USERS_MOVED
from drods.model.keys import demand_key
from drods.steering.demand import DemandRecorder
from drods.steering.settings import UserLearning
from drods.steering.users import FORGET, SiteRates, UsersLearner, distance
from drods.store.sqlite import SqliteStore


def test_rates_decay_and_floor() -> None:
    r = SiteRates()
    r.observe({"p": {"a": 0}}, 0.0, tau=10.0)  # the baseline
    r.observe({"p": {"a": 100}}, 10.0, tau=10.0)  # 10/s for 10 s
    assert r.rates["a"] == pytest.approx(10.0 * (1 - 2.718281828 ** -1), rel=1e-6)
    r.observe({"p": {"a": 100, "b": 2}, "q": {"a": 5}}, 20.0, tau=10.0)
    shares = r.shares(floor=0.05, min_rate=0.01)
    assert shares is not None and set(shares) == {"a"}  # b is under 5 % of the rate
    assert r.shares(floor=0.0, min_rate=0.0) is not None and r.shares(floor=0.0, min_rate=1e6) is None
    r.observe({"p": {"a": 3}}, 30.0, tau=10.0)  # process p restarted: its 3 count as new
    assert r.last[("p", "a")] == 3
    assert distance({"a": 1.0}, {"b": 1.0}) == 1.0 and distance({"a": 0.5, "b": 0.5}, {"a": 1.0}) == 0.5


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def store(tmp_path: Any) -> Any:
    s = SqliteStore(str(tmp_path / "d.db"))
    yield s
    await s.close()


def informers(binding: dict[str, Any]) -> Any:
    reg = {"metadata": {"name": "shop", "namespace": "default"},
           "spec": {"serviceId": "shop.example", "sla": {"maxDelayMs": 80},
                    "workload": {"kind": "Deployment", "name": "shop", "namespace": "default"}}}
    return SimpleNamespace(bindings=SimpleNamespace(cache={"b": binding}),
                           registrations=SimpleNamespace(cache={"r": reg}))


async def test_a_move_is_written_after_the_settle_time_and_a_burst_is_not(store: SqliteStore) -> None:
    clock = Clock()
    binding: dict[str, Any] = {"metadata": {"name": "shop-b", "annotations": {}},
                               "spec": {"resource": {"kind": "Deployment", "name": "shop", "namespace": "default"}}}
    written: list[tuple[str, str, Mapping[str, str]]] = []

    async def reschedule(name: str, reason: str, annotations: Mapping[str, str]) -> None:
        written.append((name, reason, annotations))
        binding["metadata"]["annotations"].update(annotations)

    settings = UserLearning(windowSeconds=2.0, settleSeconds=10.0, pollSeconds=1.0, minRequestsPerSecond=0.1)
    learner = UsersLearner(store, reschedule, informers(binding), settings, clock=clock)
    rec = DemandRecorder(store, flush_seconds=0.0, clock=clock)
    counts = {"east": 0, "west": 0}

    async def tick(site: str, seconds: int) -> None:
        for _ in range(seconds):
            clock.t += 1.0
            counts[site] += 10
            await rec.count("shop.example", site, 10)
            await learner.step()

    await tick("east", 9)
    assert not written  # not yet settled
    await tick("east", 3)
    assert len(written) == 1
    name, reason, ann = written[0]
    doc = json.loads(ann[LEARNED_USERS])
    assert name == "shop-b" and reason.startswith(f"{USERS_MOVED}: service shop.example's requests now come from east")
    assert doc["sites"] == [{"site": "east", "weight": 1.0}] and doc["latencySLOMs"] == 80
    # a 4 s burst from west: it passes before the settle time → nothing written
    await tick("west", 4)
    await tick("east", 20)
    assert len(written) == 1
    # west for good: written once it held for the settle time
    await tick("west", 9)
    assert len(written) == 1
    await tick("west", 6)
    assert len(written) == 2 and json.loads(written[1][2][LEARNED_USERS])["sites"][0]["site"] == "west"
    assert "(were east 100%)" in written[1][1]
    stored = await store.get(demand_key("shop.example", rec.process))
    assert stored is not None and jsondoc.loads(stored.value)["counts"] == counts


async def test_a_bindings_learned_users_go_with_their_registration(store: SqliteStore) -> None:
    """A deleted ServiceRegistration leaves no learned users (and their SLO) steering its Binding's
    placement for ever: they are dropped, nothing moved; a live registration's stay."""
    doc = json.dumps({"sites": [{"site": "east", "weight": 1.0}], "latencySLOMs": 80, "serviceId": "shop.example"})
    binding: dict[str, Any] = {"metadata": {"name": "shop-b", "annotations": {LEARNED_USERS: doc}},
                               "spec": {"resource": {"kind": "Deployment", "name": "shop", "namespace": "default"}}}
    forgotten: list[str] = []

    async def forget(name: str) -> None:
        forgotten.append(name)
        binding["metadata"]["annotations"].pop(LEARNED_USERS, None)

    async def reschedule(name: str, reason: str, annotations: Mapping[str, str]) -> None:
        raise AssertionError("nothing is re-placed")

    inf = informers(binding)
    learner = UsersLearner(store, reschedule, inf, UserLearning(pollSeconds=1.0), clock=Clock(), forget=forget)
    await learner.step()
    await learner.step()
    assert not forgotten  # registered: kept
    inf.registrations.cache.clear()  # kubectl delete serviceregistration shop
    await learner.step()
    assert forgotten == ["shop-b"] and LEARNED_USERS not in binding["metadata"]["annotations"]
    await learner.step()
    assert forgotten == ["shop-b"]  # looked for once per registration gone, not every poll


async def test_a_bindings_placement_offers_go_with_their_registration(store: SqliteStore) -> None:
    """The clusters steering offered a Binding go with its registration too — with its learned users, or
    alone when its demand was too low to learn any — in the one write that forgets them, nothing re-placed.
    A Binding of a live registration keeps its offers."""
    doc = json.dumps({"sites": [{"site": "east", "weight": 1.0}], "latencySLOMs": 80, "serviceId": "shop.example"})
    ref = {"kind": "Deployment", "name": "shop", "namespace": "default"}
    both: dict[str, Any] = {"metadata": {"name": "shop-b", "annotations": {LEARNED_USERS: doc, PLACEMENT_OFFERS: "a"}},
                            "spec": {"resource": ref}}
    offers_only: dict[str, Any] = {"metadata": {"name": "cart-b", "annotations": {PLACEMENT_OFFERS: "a,b"}},
                                   "spec": {"resource": {**ref, "name": "cart"}}}
    kept: dict[str, Any] = {"metadata": {"name": "live-b", "annotations": {PLACEMENT_OFFERS: "c"}},
                            "spec": {"resource": {**ref, "name": "live"}}}
    bindings = {"shop-b": both, "cart-b": offers_only, "live-b": kept}

    async def forget(name: str) -> None:  # as the assembly's: a merge patch of `FORGET`
        annotations = bindings[name]["metadata"]["annotations"]
        for key in FORGET:
            annotations.pop(key, None)

    async def reschedule(name: str, reason: str, annotations: Mapping[str, str]) -> None:
        raise AssertionError("nothing is re-placed")

    inf = informers(both)
    inf.bindings.cache.update({"c": offers_only, "l": kept})
    cart = {"metadata": {"name": "cart", "namespace": "default"}, "spec": {"serviceId": "cart.example",
                                                                           "workload": {**ref, "name": "cart"}}}
    live = {"metadata": {"name": "live", "namespace": "default"}, "spec": {"serviceId": "live.example",
                                                                           "workload": {**ref, "name": "live"}}}
    inf.registrations.cache.update({"c": cart, "l": live})
    learner = UsersLearner(store, reschedule, inf, UserLearning(pollSeconds=1.0), clock=Clock(), forget=forget)
    await learner.step()
    assert both["metadata"]["annotations"].keys() == {LEARNED_USERS, PLACEMENT_OFFERS}
    assert offers_only["metadata"]["annotations"] == {PLACEMENT_OFFERS: "a,b"}
    del inf.registrations.cache["r"], inf.registrations.cache["c"]  # kubectl delete serviceregistration shop cart
    await learner.step()
    assert both["metadata"]["annotations"] == {} and offers_only["metadata"]["annotations"] == {}
    assert kept["metadata"]["annotations"] == {PLACEMENT_OFFERS: "c"}
    # one that came and went between two polls, its Binding offered a cluster meanwhile: its deletion is heard
    brief: dict[str, Any] = {"metadata": {"name": "brief-b", "annotations": {PLACEMENT_OFFERS: "d"}},
                             "spec": {"resource": {**ref, "name": "brief"}}}
    bindings["brief-b"] = inf.bindings.cache["b2"] = brief
    learner._on_registration("l", live, {**live, "status": {"phase": "Active"}})  # a status write: no reason
    await learner.step()
    assert brief["metadata"]["annotations"] == {PLACEMENT_OFFERS: "d"}  # no registration went: not looked for
    learner._on_registration("b2", {"metadata": {"name": "brief", "namespace": "default"}, "spec": {
        "serviceId": "brief.example", "workload": {**ref, "name": "brief"}}}, None)
    await learner.step()
    assert brief["metadata"]["annotations"] == {} and kept["metadata"]["annotations"] == {PLACEMENT_OFFERS: "c"}


async def test_a_registration_learns_users_only_for_a_workload_of_its_own_namespace(store: SqliteStore) -> None:
    """A registration stored before admission refused it, naming another namespace's workload, must not write
    learned users onto that workload's Binding; one naming none means its own namespace."""
    theirs = {"metadata": {"name": "deployment-default-shop", "annotations": {}},
              "spec": {"resource": {"kind": "Deployment", "name": "shop", "namespace": "default"}}}
    ours = {"metadata": {"name": "deployment-team-a-shop", "annotations": {}},
            "spec": {"resource": {"kind": "Deployment", "name": "shop", "namespace": "team-a"}}}

    def reg(**workload: str) -> dict[str, Any]:
        return {"metadata": {"name": "shop", "namespace": "team-a"},
                "spec": {"serviceId": "shop.example", "workload": {"kind": "Deployment", "name": "shop", **workload}}}

    async def reschedule(name: str, reason: str, annotations: Mapping[str, str]) -> None:
        raise AssertionError("not called here")

    for registration, expected in ((reg(namespace="default"), {}), (reg(), {"shop.example": ours})):
        inf = SimpleNamespace(bindings=SimpleNamespace(cache={"t": theirs, "o": ours}),
                              registrations=SimpleNamespace(cache={"r": registration}))
        learner = UsersLearner(store, reschedule, inf, UserLearning(), clock=Clock())
        assert {sid: b for sid, (b, _) in learner._services().items()} == expected
