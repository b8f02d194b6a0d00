"""Collection subscriptions (C1): the interval math, validation, the stored set on both backends,
and the per-cluster pull schedule."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import ValidationError

from drods.members.agent import next_report_seconds
from drods.model.selector import LabelSelector
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.collectors import run_collectors
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import MetricsReport, Source
from drods.monitor.service import MonitorService, MonitorSettings
from drods.monitor.subscriptions import (
    SUBSCRIPTIONS_PREFIX,
    Subscription,
    SubscriptionBody,
    Subscriptions,
    builtin_subscriptions,
    decode,
    effective_interval,
    encode,
    subscriptions_of,
)
from drods.store import KeyValue, Store

T = TypeVar("T")


def cluster(name: str, **labels: str) -> ClusterInfo:
    return ClusterInfo(name=name, ready=True, prometheus=None, water_level_limit=None, labels=labels)


def settings(**kw: Any) -> MonitorSettings:
    return MonitorSettings.model_validate(kw)


async def eventually(check: Callable[[], Awaitable[T | None] | T | None], within_s: float = 10.0,
                     what: str = "") -> T:
    deadline = time.monotonic() + within_s
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s}s waiting for {what or check}")
        await asyncio.sleep(0.02)


# -- interval math ---------------------------------------------------------------------------


def test_effective_interval_is_the_fastest_matching_need_clamped() -> None:
    s = settings(collectIntervalSeconds=15, minCollectIntervalSeconds=2)
    subs = [
        Subscription("router", 5, names=frozenset({"x", "w"})),
        Subscription("edge-sla", 1, selector=LabelSelector(matchLabels={"tier": "edge"})),
        Subscription("reports", 30),  # slower than the default: no effect
        Subscription("both", 3, names=frozenset({"w"}), selector=LabelSelector(matchLabels={"tier": "prod"})),
    ]
    assert effective_interval(cluster("x"), subs, s).seconds == 5
    assert effective_interval(cluster("x"), subs, s).subscription == "router"
    edge = effective_interval(cluster("y", tier="edge"), subs, s)
    assert (edge.seconds, edge.subscription) == (2, "edge-sla")  # clamped up to the minimum
    z = effective_interval(cluster("z"), subs, s)
    assert (z.seconds, z.subscription) == (15, None)  # nobody asks for more than the default
    # Names and label selector must both match.
    assert effective_interval(cluster("w"), subs, s).subscription == "router"
    assert effective_interval(cluster("w", tier="prod"), subs, s).subscription == "both"
    assert effective_interval(cluster("q", tier="prod"), subs, s).seconds == 15
    # No subscriptions at all → the default.
    assert effective_interval(cluster("x"), [], s) == effective_interval(cluster("z"), subs, s)
    # Equal needs: the first name wins (stable answers across replicas).
    tie = [Subscription("b", 4), Subscription("a", 4)]
    assert effective_interval(cluster("x"), tie, s).subscription == "a"
    # A default below the minimum lowers the minimum (the default is never exceeded).
    fast = settings(collectIntervalSeconds=0.5, minCollectIntervalSeconds=2)
    assert effective_interval(cluster("x"), subs, fast).seconds == 0.5


def test_the_interval_says_a_reached_push_members_summary_keeps_its_own_cadence() -> None:
    # summaries follow members.summaryIntervalSeconds (docs/monitoring.md): the list must not suggest otherwise
    s = settings(collectIntervalSeconds=15, minCollectIntervalSeconds=2)
    subs = [Subscription("router", 5)]

    def member(**spec: object) -> ClusterInfo:
        return ClusterInfo(name="m", ready=True, prometheus=None, water_level_limit=None, spec=spec)

    reached = effective_interval(member(credentials={"kubeconfig": "…"}), subs, s)
    assert (reached.seconds, reached.subscription) == (5, "router")
    assert reached.not_applied is not None and "members.summaryIntervalSeconds" in reached.not_applied
    assert reached.to_view().notApplied == reached.not_applied
    for spec in ({"syncMode": "Pull", "credentials": {"kubeconfig": "…"}}, {"syncMode": "Push"}, {}):
        assert effective_interval(member(**spec), subs, s).not_applied is None, spec


def test_builtin_needs_come_from_the_settings() -> None:
    default = settings()
    names = {b.name: b.max_age_s for b in builtin_subscriptions(default)}
    assert names == {"scheduler": 15.0, "autoops": 60.0}  # sustainedSeconds 300 / 5
    assert effective_interval(cluster("x"), builtin_subscriptions(default), default).subscription is None

    quick = settings(sustainedSeconds=30)
    iv = effective_interval(cluster("x"), builtin_subscriptions(quick), quick)
    assert (iv.seconds, iv.subscription) == (6.0, "autoops")
    sched = settings(schedulerMaxAgeSeconds=4, autoopsMaxAgeSeconds=9)
    iv = effective_interval(cluster("x"), builtin_subscriptions(sched), sched)
    assert (iv.seconds, iv.subscription) == (4.0, "scheduler")
    off = settings(sustainedSeconds=30)
    assert [b.name for b in builtin_subscriptions(off, AutoOpsPolicy(enabled=False))] == ["scheduler"]
    assert all(b.builtin for b in builtin_subscriptions(default))


@pytest.mark.parametrize("body", [
    {"maxAgeSeconds": 0.5},  # below 1 s
    {"maxAgeSeconds": 3601},
    {"maxAgeSeconds": "5"},  # strict: no strings for numbers
    {"maxAgeSeconds": True},
    {"maxAgeSeconds": float("inf")},
    {"maxAgeSeconds": float("nan")},
    {},
    {"maxAgeSeconds": 5, "unknown": 1},
    {"maxAgeSeconds": 5, "name": "Not_A_Name"},
    {"maxAgeSeconds": 5, "ttlSeconds": 1},
    {"maxAgeSeconds": 5, "ttlSeconds": 2.5},
    {"maxAgeSeconds": 5, "reason": "x" * 1025},
    {"maxAgeSeconds": 5, "clusterSelector": {"names": "a"}},
    {"maxAgeSeconds": 5, "clusterSelector": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}},
    {"maxAgeSeconds": 5, "clusterSelector": {"cluster": ["a"]}},
])
def test_body_validation_is_strict(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SubscriptionBody.model_validate(body)


def test_codec_round_trip_and_malformed_documents_are_ignored() -> None:
    body = SubscriptionBody.model_validate({
        "maxAgeSeconds": 5, "reason": "router", "ttlSeconds": 30,
        "clusterSelector": {"names": ["b", "a"], "labelSelector": {"matchLabels": {"tier": "edge"}}}})
    sub = Subscription.from_body("router", body, owner="alice", updated_at=1_700_000_000.0)
    back = decode(KeyValue(SUBSCRIPTIONS_PREFIX + "router", encode(sub), 1, 1, 1))
    assert back == sub
    view = sub.to_view().model_dump(mode="json")
    assert view["clusterSelector"] == {"names": ["a", "b"], "labelSelector": {"matchLabels": {"tier": "edge"},
                                                                               "matchExpressions": []}}
    assert view["expiresAt"] == "2023-11-14T22:13:50Z" and view["builtin"] is False and view["setting"] is None
    for raw in (b"not json", json.dumps({"maxAgeSeconds": 0}).encode(), json.dumps([1]).encode()):
        assert decode(KeyValue(SUBSCRIPTIONS_PREFIX + "bad", raw, 1, 1, 1)) is None


def test_agents_read_the_interval_from_the_answer() -> None:
    assert next_report_seconds({"nextReportSeconds": 4.5}, 15) == 4.5
    assert next_report_seconds({"accepted": True}, 15) == 15
    assert next_report_seconds({"nextReportSeconds": True}, 15) == 15
    assert next_report_seconds({"nextReportSeconds": -1}, 15) == 15


# -- the stored set, both backends ----------------------------------------------------------


async def test_stored_subscriptions_drive_intervals_and_expire(store: Store) -> None:
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    s = settings(collectIntervalSeconds=15, minCollectIntervalSeconds=2)
    subs = Subscriptions(store, s)
    a, b = cluster("a"), cluster("b", tier="edge")
    async with subs.using():
        assert subs.interval_for(a).seconds == 15
        sub, created = await subs.put("router", SubscriptionBody(maxAgeSeconds=5), owner="alice")
        assert created and sub.owner == "alice"
        _, created = await subs.put("router", SubscriptionBody(maxAgeSeconds=4), owner="alice")
        assert not created
        await subs.put("edge", SubscriptionBody.model_validate(
            {"maxAgeSeconds": 3, "ttlSeconds": 2, "clusterSelector": {"labelSelector": {"matchLabels": {
                "tier": "edge"}}}}), owner="bob")
        # Renewed without a TTL: the old lease is dropped, the subscription stays.
        await subs.put("keep", SubscriptionBody(maxAgeSeconds=10, ttlSeconds=2), owner="carol")
        await subs.put("keep", SubscriptionBody(maxAgeSeconds=10), owner="carol")
        await eventually(lambda: subs.seconds_for(a) == 4 and subs.seconds_for(b) == 3, what="watch to deliver")
        assert [x.name for x in await subs.read()] == ["autoops", "edge", "keep", "router", "scheduler"]
        assert (await subs.get("scheduler")) is not None and (await subs.get("nope")) is None

        # The leased one lapses by itself (nobody renewed it); the other one is deleted.
        await eventually(lambda: subs.seconds_for(b) == 4, within_s=10, what="the lease to expire")
        assert await subs.get("edge") is None
        kept = await subs.get("keep")
        assert kept is not None and kept.ttl_s is None
        deleted = await subs.delete("router")
        assert deleted is not None and deleted.max_age_s == 4
        assert await subs.delete("router") is None
        await eventually(lambda: subs.interval_for(a).subscription == "keep", what="delete to be seen")
        assert subs.seconds_for(a) == 10
        await subs.delete("keep")
        await eventually(lambda: subs.interval_for(a).subscription is None, what="the last need to go")
        assert subs.seconds_for(a) == 15
    assert not subs.running


async def test_one_subscription_set_per_monitor_service(tmp_path: Path) -> None:
    from drods.store.sqlite import SqliteStore

    async with SqliteStore(str(tmp_path / "s.db")) as store:
        svc = MonitorService(store, tmp_path)
        subs = subscriptions_of(svc)
        assert subscriptions_of(svc) is subs
        assert subscriptions_of(MonitorService(store, tmp_path)) is not subs
        async with subs.using():
            async with subs.using():
                assert subs.running
            assert subs.running  # still one user
        assert not subs.running


# -- the pull schedule -------------------------------------------------------------------------


class _Sink:
    """Stands in for MonitorService: counts what the collectors hand in."""

    def __init__(self) -> None:
        self.ingested: list[str] = []
        self.failures: list[str] = []

    async def ingest(self, report: MetricsReport, source: Source = "push") -> None:
        self.ingested.append(report.cluster)

    async def record_collect_failure(self, cluster: str, source: str, error: str) -> None:
        self.failures.append(cluster)


class _Recorder:
    source: Source = "prometheus"

    def __init__(self) -> None:
        self.pulls: dict[str, list[float]] = {}
        self.blocked = asyncio.Event()
        self.in_flight: dict[str, int] = {}

    def handles(self, info: ClusterInfo) -> bool:
        return info.name != "ignored"

    async def collect(self, info: ClusterInfo) -> dict[str, Any] | None:
        self.pulls.setdefault(info.name, []).append(time.monotonic())
        self.in_flight[info.name] = self.in_flight.get(info.name, 0) + 1
        try:
            if info.name == "slow":
                await self.blocked.wait()  # never set: a member that hangs
            if info.name == "bad":
                raise RuntimeError("boom")
            return None
        finally:
            self.in_flight[info.name] -= 1

    async def aclose(self) -> None:
        return None

    def gaps(self, name: str) -> list[float]:
        t = self.pulls.get(name, [])
        return [b - a for a, b in zip(t, t[1:], strict=False)]


async def test_each_cluster_is_pulled_on_its_own_interval() -> None:
    rec, sink = _Recorder(), _Sink()
    infos = [cluster("fast"), cluster("default"), cluster("slow"), cluster("bad"), cluster("ignored")]
    need = {"fast": 0.1}
    task = asyncio.create_task(run_collectors(
        sink, lambda: [rec], lambda: infos, interval_s=0.6, timeout_s=30,
        interval_for=lambda c: need.get(c.name, 60.0)))  # 60 → capped at interval_s
    try:
        await eventually(lambda: len(rec.pulls.get("fast", [])) >= 5, within_s=5, what="five fast pulls")
        assert max(rec.gaps("fast")) < 0.35, rec.gaps("fast")
        # every 0.6 s as scheduled; a pull's task may start late on a loaded machine (the next on time),
        # so one gap can be short — never by the fast cluster's 0.1 s, and not on average
        await eventually(lambda: len(rec.pulls.get("default", [])) >= 4, within_s=5, what="four default pulls")
        default = rec.gaps("default")
        assert min(default) >= 0.3 and sum(default) / len(default) >= 0.5, default
        # The hanging cluster is pulled once and never twice at once; it delays nobody.
        assert len(rec.pulls["slow"]) == 1 and rec.in_flight["slow"] == 1
        assert "ignored" not in rec.pulls
        await eventually(lambda: len(sink.failures) >= 1, what="the failing pull to be recorded")

        # The need goes away: back to the default interval.
        del need["fast"]
        n = len(rec.pulls["fast"])
        await eventually(lambda: len(rec.pulls["fast"]) >= n + 2, within_s=5, what="two more pulls")
        assert rec.gaps("fast")[-1] >= 0.55, rec.gaps("fast")
        assert len(rec.pulls["slow"]) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rec.in_flight["slow"] == 0  # cancelled with the loop
