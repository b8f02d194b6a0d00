"""The health controller's checks across a fleet: bounded in flight, none starved."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from drods.controllers.health import ClusterHealth, _Health
from drods.controllers.settings import MemberSettings


class _Held(ClusterHealth):
    """Checks that wait until released, counting how many are in flight."""

    def __init__(self, settings: MemberSettings, clusters: int) -> None:
        super().__init__(fleet=None, settings=settings, monitor=None)  # type: ignore[arg-type]
        self.clusters = clusters
        self.in_flight = 0
        self.most = 0
        self.checked: set[str] = set()
        self.release = asyncio.Event()
        self.started = asyncio.Event()  # set when as many checks as allowed are in flight
        self.all_checked = asyncio.Event()

    async def check(self, name: str) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight == self.settings.probeConcurrency:
            self.started.set()
        try:
            await self.release.wait()
            self.checked.add(name)
            if len(self.checked) == self.clusters:
                self.all_checked.set()
        finally:
            self.in_flight -= 1


async def test_checks_in_flight_are_bounded_and_every_cluster_is_checked() -> None:
    health = _Held(MemberSettings(probeConcurrency=3, probeIntervalSeconds=60), clusters=10)
    loops = [asyncio.create_task(health._loop(f"c{i}")) for i in range(10)]
    try:
        await asyncio.wait_for(health.started.wait(), 5)
        for _ in range(20):  # every other loop gets its turn to try
            await asyncio.sleep(0)
        assert health.in_flight == 3 and health.most == 3, "more checks in flight than probeConcurrency"
        health.release.set()
        await asyncio.wait_for(health.all_checked.wait(), 5)
        assert health.most == 3
    finally:
        for t in loops:
            t.cancel()
        await asyncio.gather(*loops, return_exceptions=True)


def test_probe_concurrency_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        MemberSettings(probeConcurrency=0)


class _Client:
    """A member client whose last answer the test sets; counts the health probes sent to it."""

    def __init__(self) -> None:
        self.probes = 0
        self.last_success: float | None = None

    @property
    def state(self) -> SimpleNamespace:
        return SimpleNamespace(last_success=self.last_success)

    async def probe(self) -> str:
        self.probes += 1
        self.last_success = time.time()
        return "v1.30.0"


def _fleet(clients: _Client | dict[str, _Client], **more: object) -> SimpleNamespace:
    """A fleet whose clients are ``clients`` (one for every cluster, or one per name)."""

    async def get(name: str) -> tuple[_Client, None]:
        return (clients[name] if isinstance(clients, dict) else clients), None

    return SimpleNamespace(clients=SimpleNamespace(get=get), **more)


async def test_a_member_that_answered_another_call_this_interval_is_not_probed_again() -> None:
    client = _Client()
    fleet = _fleet(client)
    health = ClusterHealth(fleet=fleet, settings=MemberSettings(probeIntervalSeconds=5,  # type: ignore[arg-type]
                                                                summaryIntervalSeconds=3600), monitor=None)
    health.state["c1"] = st = _Health(first_seen=time.time(), summarised=time.time())
    await health._probe("c1", st)
    assert client.probes == 1 and st.version == "v1.30.0"  # the first check always probes
    client.last_success = time.time() - 1.0  # an apply answered a second ago
    st.last_ok = None
    await health._probe("c1", st)
    assert client.probes == 1 and st.last_ok is not None, "the recent answer counts as the probe"
    client.last_success = time.time() - 6.0  # nothing answered this interval
    await health._probe("c1", st)
    assert client.probes == 2
    # a clock far from the client's (a test's injected one) never takes its answers for probes
    health.clock = lambda: 1_000.0
    st.summarised = 1_000.0
    client.last_success = time.time()
    await health._probe("c1", st)
    assert client.probes == 3


class _Summarised(_Client):
    def follow_pods(self) -> None:
        return None

    async def summary(self) -> object:
        return object()


class _NoFeed(ClusterHealth):
    async def _feed(self, name: str, summary: object) -> None:  # type: ignore[override]
        return None


async def test_clusters_joined_together_are_summarised_at_their_own_places_in_the_round() -> None:
    """The first summary at once; the next at a point of the interval of the cluster's own, so a
    fleet that joined together is not summarised all at once every interval."""
    clients: dict[str, _Client] = {f"c{i}": _Summarised() for i in range(40)}
    now = 1_000.0
    health = _NoFeed(fleet=_fleet(clients),  # type: ignore[arg-type]
                     settings=MemberSettings(summaryIntervalSeconds=10), monitor=None, clock=lambda: now)
    for name in clients:
        health.state[name] = _Health(first_seen=now)
        await health._probe(name, health.state[name])
    due = sorted(st.summarised + 10 - now for st in health.state.values())
    assert all(st.summary is not None for st in health.state.values())  # each summarised at once
    assert due[0] >= 0.0 and due[-1] <= 10.0 and due[-1] - due[0] > 5.0, due


async def test_summaries_come_every_interval_not_a_probe_later() -> None:
    """Probes every 5 s, summaries every 10 s: the summary's time was taken after its own call, so the probe
    10 s on found 9.7 s and waited to 15 s (walkthrough AG)."""
    now = [1_000.0]

    class _Slow(_Summarised):
        async def summary(self) -> object:
            now[0] += 0.3  # the summary's own calls take a moment
            return object()

    health = _NoFeed(fleet=_fleet(_Slow()),  # type: ignore[arg-type]
                     settings=MemberSettings(summaryIntervalSeconds=10, probeIntervalSeconds=5), monitor=None,
                     clock=lambda: now[0])
    st = health.state["c1"] = _Health(first_seen=now[0])
    await health._probe("c1", st)
    start = st.summarised = now[0]  # past the first summary's place in the round: the steady cadence from here
    summaries = []
    for i in range(12):  # a minute of probe rounds, each on its own schedule
        now[0] = start + 5.0 * (i + 1)
        before = st.summarised
        await health._probe("c1", st)
        if st.summarised != before:
            summaries.append(now[0])
    assert len(summaries) == 6, summaries


async def test_the_not_ready_taint_lands_with_the_transition_in_the_same_write() -> None:
    """The taint goes with the Ready condition in one write on the revision read: a patch after it, on the
    informer's copy, lost its compare-and-swap (the taint came a probe interval later), and a fleet of
    10,000 returning wrote each cluster twice, the scheduler seeing each Ready a write before it could use it."""
    stale = {"metadata": {"name": "c1", "resourceVersion": "5"},
             "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
             "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady"}]}}
    writes: list[dict[str, object]] = []
    patches: list[dict[str, object]] = []

    async def update_status(_kind: object, name: str, status: dict[str, object], *,
                            resource_version: int, spec: dict[str, object] | None = None) -> dict[str, object]:
        assert resource_version == 5
        writes.append({"status": status, "spec": spec})
        return {**stale, "metadata": {"name": name, "resourceVersion": "6"}, "status": status,
                "spec": spec or stale["spec"]}

    async def patch(_kind: object, _name: str, body: dict[str, object], _type: object) -> None:
        patches.append(body)

    async def no_client(_name: str) -> tuple[None, str]:
        return None, "no endpoint"

    fleet = SimpleNamespace(cluster=lambda _name: stale, clients=SimpleNamespace(get=no_client),
                            registry=SimpleNamespace(update_status=update_status, patch=patch))
    now = 1_000.0
    health = ClusterHealth(fleet=fleet, settings=MemberSettings(notReadyGraceSeconds=15),  # type: ignore[arg-type]
                           monitor=None, clock=lambda: now)
    health.state["c1"] = _Health(first_seen=now - 20.0)
    await health.check("c1")
    (write,) = writes
    assert patches == []
    assert [t["key"] for t in write["spec"]["taints"]] == ["x", "cluster.multicluster.io/not-ready"]  # type: ignore[index]
    assert [c["status"] for c in write["status"]["conditions"]] == ["False"]  # type: ignore[index]


async def test_a_member_that_hangs_turns_not_ready_when_its_grace_runs_out() -> None:
    """A partition: no answer and no refusal. The probe is given up at the grace's end and the condition is
    judged then, not when the client's own timeouts end (25-33 s to NotReady with an 8 s grace, walkthrough AJ)."""
    written: list[str] = []

    class _Hangs(_Client):
        async def probe(self) -> str:
            await asyncio.Event().wait()  # never answers
            return "never"

    class _Recorded(ClusterHealth):
        async def _write(self, name: str, obj: object, st: _Health, ready: str, *_a: object) -> None:
            written.append(ready)

    obj = {"metadata": {"name": "c1"}, "spec": {},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady"}]}}
    fleet = _fleet(_Hangs(), cluster=lambda _name: obj)
    health = _Recorded(fleet=fleet, settings=MemberSettings(notReadyGraceSeconds=1.0,  # type: ignore[arg-type]
                                                            probeIntervalSeconds=0.2), monitor=None)
    health.state["c1"] = _Health(first_seen=time.time() - 5.0, last_ok=time.time() - 0.6, version="v1.30.0")
    started = time.monotonic()
    await asyncio.wait_for(health.check("c1"), 5.0)  # the client's own timeouts would take 10 s and more
    assert time.monotonic() - started < 2.0
    assert written == ["False"], written
    assert "no answer within the grace" in (health.state["c1"].last_error or "")


async def test_an_answer_that_stands_for_the_probe_counts_from_when_it_was_heard() -> None:
    """An apply answered 4 s ago stands for this interval's probe — but the grace runs from that answer,
    not from now: a member partitioned just after it would otherwise get a probe interval more."""
    client = _Client()
    fleet = _fleet(client)
    health = ClusterHealth(fleet=fleet, settings=MemberSettings(probeIntervalSeconds=5,  # type: ignore[arg-type]
                                                                summaryIntervalSeconds=3600), monitor=None)
    health.state["c1"] = st = _Health(first_seen=time.time(), summarised=time.time(), version="v1.30.0")
    client.last_success = heard = time.time() - 4.0
    await health._probe("c1", st)
    assert client.probes == 0 and st.last_ok == heard
