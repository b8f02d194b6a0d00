"""Collection subscriptions (C1) through the real HTTP API: CRUD, validation and roles on both store
backends, the interval handed to pushing agents, and a pull collector that speeds up for a need and
slows down again when the need is deleted or lapses."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import Source
from drods.monitor.subscriptions import subscriptions_of
from drods.store import Store
from drods.store.sqlite import SqliteStore
from tests.monitor_e2e.conftest import Clock, Mon, eventually, fast_settings, node_report, serve

DEFAULT_S = 2.0  # collectIntervalSeconds in these tests
SUBS = "/api/v1/monitor/subscriptions"


class Recorder:
    """A pull collector that only notes when each cluster was pulled."""

    source: Source = "prometheus"

    def __init__(self) -> None:
        self.pulls: dict[str, list[float]] = {}

    def handles(self, info: ClusterInfo) -> bool:
        return True

    async def collect(self, info: ClusterInfo) -> None:
        self.pulls.setdefault(info.name, []).append(time.monotonic())

    async def aclose(self) -> None:
        return None

    def after(self, name: str, t: float) -> list[float]:
        return [x for x in self.pulls.get(name, []) if x > t]


def _settings() -> Any:
    return fast_settings(collectIntervalSeconds=DEFAULT_S, minCollectIntervalSeconds=1.0)


@pytest.fixture
async def smon(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Mon]:
    """Monitoring over each store backend, default interval 2 s, minimum 1 s."""
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    async with serve(store, tmp_path / "data", _settings(), Clock()) as m:
        yield m


async def test_subscription_api_roles_validation_and_agent_interval(smon: Mon) -> None:
    m = smon
    await m.register("a", labels={"tier": "edge"})
    await m.register("b")
    now = m.clock()

    r = await m.report("a", role="agent-a", **node_report(40))
    assert r.status_code == 200 and r.json()["nextReportSeconds"] == DEFAULT_S
    assert {"accepted", "cluster", "waterLevel", "visibleWaterLevel", "clockSkewClamped", "published",
            "publishReason", "events"} <= r.json().keys()  # the existing fields stay

    async def listed_with_both() -> dict[str, Any] | None:
        # the intervals are per cluster the monitor knows, which it learns by watch
        r = await m.call("GET", SUBS, role="viewer")
        assert r.status_code == 200, r.text
        listed: dict[str, Any] = r.json()
        return listed if {"a", "b"} <= listed["intervals"].keys() else None

    body = await eventually(listed_with_both, what="both clusters in the intervals")
    assert [(x["name"], x["builtin"], x["setting"]) for x in body["items"]] == [
        ("autoops", True, "autoopsMaxAgeSeconds"), ("scheduler", True, "schedulerMaxAgeSeconds")]
    assert body["intervals"] == {"a": {"seconds": DEFAULT_S, "subscription": None, "notApplied": None},
                                 "b": {"seconds": DEFAULT_S, "subscription": None, "notApplied": None}}
    assert body["collectIntervalSeconds"] == DEFAULT_S and body["minCollectIntervalSeconds"] == 1.0

    edge = {"maxAgeSeconds": 1, "reason": "edge router needs live load",
            "clusterSelector": {"labelSelector": {"matchLabels": {"tier": "edge"}}}}
    # Roles: viewers and agents may not write, agents may not read, no token → 401.
    r = await m.call("PUT", f"{SUBS}/edge-router", role="viewer", json=edge)
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = await m.call("PUT", f"{SUBS}/edge-router", role="agent-a", json=edge)
    assert r.status_code == 403
    r = await m.call("GET", SUBS, role="agent-a")
    assert r.status_code == 403
    r = await m.client.get(SUBS)
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHENTICATED"

    r = await m.call("PUT", f"{SUBS}/edge-router", role="operator", json=edge)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["owner"] == "test-operator" and created["builtin"] is False and created["ttlSeconds"] is None
    assert created["maxAgeSeconds"] == 1 and created["expiresAt"] is None
    r = await m.call("PUT", f"{SUBS}/edge-router", role="operator", json=edge)
    assert r.status_code == 200  # replaced
    r = await m.call("PUT", SUBS, json={"name": "slow-b", "maxAgeSeconds": 30, "ttlSeconds": 600,
                                        "clusterSelector": {"names": ["b"]}})
    assert r.status_code == 201 and r.json()["expiresAt"] is not None
    r = await m.call("GET", f"{SUBS}/slow-b", role="viewer")
    assert r.status_code == 200 and r.json()["clusterSelector"] == {"names": ["b"], "labelSelector": None}

    # Validation: the project's error shape with field paths.
    for path, bad, field in [
        (f"{SUBS}/x", {"maxAgeSeconds": 0.5}, "maxAgeSeconds"),
        (f"{SUBS}/x", {"maxAgeSeconds": 3601}, "maxAgeSeconds"),
        (f"{SUBS}/x", {"maxAgeSeconds": "5"}, "maxAgeSeconds"),
        (f"{SUBS}/x", {"maxAgeSeconds": 5, "owner": "me"}, "owner"),
        (f"{SUBS}/x", {"maxAgeSeconds": 5, "name": "y"}, "name"),
        (f"{SUBS}/Bad_Name", {"maxAgeSeconds": 5}, "name"),
        (SUBS, {"maxAgeSeconds": 5}, "name"),
    ]:
        r = await m.call("PUT", path, json=bad)
        assert r.status_code == 422, (bad, r.text)
        err = r.json()
        assert err["code"] == "VALIDATION_FAILED" and err["message"], err
        assert err["details"]["fields"][0]["field"].endswith(field), (bad, err)
    r = await m.call("PUT", f"{SUBS}/x", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "MALFORMED_BODY"
    for method in ("PUT", "DELETE"):
        r = await m.call(method, f"{SUBS}/scheduler", json={"maxAgeSeconds": 5})
        assert r.status_code == 409 and r.json()["code"] == "SUBSCRIPTION_READ_ONLY", r.text
        assert r.json()["details"] == {"name": "scheduler", "setting": "schedulerMaxAgeSeconds"}
    r = await m.call("GET", f"{SUBS}/nope", role="viewer")
    assert r.status_code == 404 and r.json()["code"] == "SUBSCRIPTION_NOT_FOUND"

    # Each cluster's interval: a follows the edge need (1 s); b's own need is slower than the default.
    r = await m.call("GET", SUBS, role="viewer")
    assert r.json()["intervals"] == {"a": {"seconds": 1.0, "subscription": "edge-router", "notApplied": None},
                                     "b": {"seconds": DEFAULT_S, "subscription": None, "notApplied": None}}

    async def told(cluster: str, seconds: float, at: float) -> bool:
        r = await m.report(cluster, at=at, **node_report(40))
        assert r.status_code == 200, r.text
        return bool(r.json()["nextReportSeconds"] == seconds)

    # Agents are told (the API replica sees the subscription through its watch).
    t = iter(range(1, 1000))
    await eventually(lambda: told("a", 1.0, now + next(t)), what="agent of a told 1 s")
    assert await told("b", DEFAULT_S, now + 1)
    r = await m.report("a", at=now - 100, **node_report(40))
    assert r.status_code == 202 and "nextReportSeconds" not in r.json()  # unchanged: agents keep their interval

    r = await m.call("DELETE", f"{SUBS}/edge-router", role="operator")
    assert r.status_code == 200 and r.json()["name"] == "edge-router"
    r = await m.call("DELETE", f"{SUBS}/edge-router", role="operator")
    assert r.status_code == 404 and r.json()["code"] == "SUBSCRIPTION_NOT_FOUND"
    await eventually(lambda: told("a", DEFAULT_S, now + next(t)), what="agent of a told the default again")

    # Writes are audited like every other change.
    r = await m.call("GET", "/api/v1/audit")
    assert r.status_code == 200, r.text
    done = {(e["verb"], e["path"], e["subject"], e["result"]) for e in r.json()["items"]}
    assert ("PUT", f"{SUBS}/edge-router", "test-operator", 201) in done, done
    assert ("DELETE", f"{SUBS}/edge-router", "test-operator", 200) in done, done


async def test_a_collector_follows_the_fastest_need(tmp_path: Path) -> None:
    """sqlite only: the watch and lease behaviour under it runs on both backends in tests/monitor."""
    rec = Recorder()
    store = SqliteStore(str(tmp_path / "drods.db"))
    async with serve(store, tmp_path / "data", _settings(), Clock(), frozenset({Component.COLLECTORS}),
                     collectors=[rec]) as m:
        await m.register("a")
        await m.register("b")
        subs = subscriptions_of(m.svc)
        a, b = (await m.svc.cluster("a")), (await m.svc.cluster("b"))
        assert a is not None and b is not None
        await eventually(lambda: _async(rec.pulls.get("a") and rec.pulls.get("b")), what="first pulls")

        # a is asked for by name; b by a need that lapses unless renewed.
        r = await m.call("PUT", f"{SUBS}/fast-a", json={"maxAgeSeconds": 1, "clusterSelector": {"names": ["a"]}})
        assert r.status_code == 201, r.text
        r = await m.call("PUT", f"{SUBS}/fast-b", json={"maxAgeSeconds": 1, "ttlSeconds": 2,
                                                        "clusterSelector": {"names": ["b"]}})
        assert r.status_code == 201, r.text
        await eventually(lambda: _async(subs.seconds_for(a) == 1 and subs.seconds_for(b) == 1),
                         what="the collector's view to see both needs")
        seen = time.monotonic()
        await eventually(lambda: _async(len(rec.after("a", seen)) >= 2 and len(rec.after("b", seen)) >= 2),
                         what="two pulls of each at the faster interval")
        for name in ("a", "b"):
            p = rec.after(name, seen)
            assert p[1] - p[0] < 1.5, (name, p)

        # a's need is deleted, b's lapses: both back to the default interval.
        r = await m.call("DELETE", f"{SUBS}/fast-a")
        assert r.status_code == 200
        await eventually(lambda: _async(subs.seconds_for(a) == DEFAULT_S and subs.seconds_for(b) == DEFAULT_S),
                         within_s=10, what="deletion and expiry to reach the collector")
        r = await m.call("GET", f"{SUBS}/fast-b")
        assert r.status_code == 404
        gone = time.monotonic()
        await eventually(lambda: _async(len(rec.after("a", gone)) >= 2 and len(rec.after("b", gone)) >= 2),
                         within_s=10, what="two pulls of each at the default interval")
        for name in ("a", "b"):
            p = rec.after(name, gone)
            assert p[1] - p[0] >= DEFAULT_S - 0.05, (name, p)


async def _async(value: Any) -> Any:
    return value
