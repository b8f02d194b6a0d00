"""Placement that follows the users, end to end: a real HTTP control plane (scheduler,
detector, steering and its users learner) with three clusters at measured distances — their
latency to three client sites pushed as C2 network status ("reported"), their load through
``PUT /api/v1/metrics`` (the scheduler-e2e ``Plane``; no member Kubernetes is involved in this
decision path). Client demand is the flows resolved per client site; it moves from one site to
another, and the replicas follow within the configured window — and do not follow a burst shorter
than it. Every wait is a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.model.annotations import LEARNED_USERS, RESCHEDULE_REASON
from drods.monitor.service import MonitorSettings
from drods.steering.settings import SteeringSettings, UserLearning
from drods.store.sqlite import SqliteStore
from tests.scheduler_e2e.conftest import Plane, eventually, fast_settings, placement, serve

SETTLE_S = 4.0  # the learner's hysteresis: a move must hold this long
LEARNING = UserLearning(windowSeconds=0.5, settleSeconds=SETTLE_S, pollSeconds=0.2, floor=0.05,
                        minRequestsPerSecond=0.5)
# client site → cluster → one-way delay (ms): each site has its own cluster, the others far
DISTANCES = {"east": {"c-east": 4.0, "c-west": 70.0, "c-far": 170.0},
             "west": {"c-east": 70.0, "c-west": 4.0, "c-far": 150.0},
             "far": {"c-east": 170.0, "c-west": 150.0, "c-far": 4.0}}
REGISTRATION = {
    "apiVersion": "multicluster.io/v1alpha1", "kind": "ServiceRegistration",
    "metadata": {"name": "shop", "namespace": "default"},
    "spec": {"serviceId": "shop.example", "clientSites": ["east", "west", "far"],
             "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop", "namespace": "default"},
             "sla": {"maxDelayMs": 100}, "statusIntervalSeconds": 5},
}
REGS = "/apis/multicluster.io/v1alpha1/namespaces/default/serviceregistrations"
RESOLVE = "/api/v1/steering/services/shop.example/resolve?clientSite={site}&flow={site}-1"


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    # one backend: what this path stores (demand counts, a Binding's annotations) is plain keys and
    # objects the store conformance suite covers on both
    store = SqliteStore(str(tmp_path / "drods.db"))
    data = tmp_path / "data"
    data.mkdir()
    steering = SteeringSettings(minIntervalSeconds=0.5, coalesceSeconds=0.02, users=LEARNING)
    monitoring = MonitorSettings.model_validate({"rateMinIntervalSeconds": 0.0, "flushIntervalSeconds": 0.05})
    async with serve(store, data, components=frozenset({Component.STEERING}), monitoring=monitoring,
                     steering=steering, settings=fast_settings(users_min_gain_ms=5.0)) as p:
        yield p
    await store.close()


class Demand:
    """Clients resolving flows, ~20 requests a second, from whichever site ``site`` names now."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.site = "east"
        self.errors: list[str] = []

    async def run(self) -> None:
        while True:
            r = await self.plane.call("GET", RESOLVE.format(site=self.site), role="viewer")
            if r.status_code != 200:
                self.errors.append(r.text)
            await asyncio.sleep(0.05)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Demand]:
        task = asyncio.create_task(self.run())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def binding(plane: Plane, name: str = "shop") -> dict[str, Any]:
    r = await plane.call("GET", f"/apis/multicluster.io/v1alpha1/bindings/{name}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def majority(obj: dict[str, Any]) -> str | None:
    pl = placement(obj.get("status") or {"placement": []})
    return max(pl, key=lambda c: pl[c]) if pl else None


async def follows(plane: Plane, site: str, cluster: str, within_s: float, name: str = "shop") -> dict[str, Any]:
    async def ok() -> dict[str, Any] | None:
        obj = await binding(plane, name)
        last[0] = obj
        users = (obj.get("status") or {}).get("users") or {}
        sites = [u.get("site") for u in users.get("sites") or []]
        return obj if users.get("source") == "learned" and sites == [site] and majority(obj) == cluster else None

    last: list[Any] = [None]
    try:
        return await eventually(ok, within_s, f"the replicas to follow the users to {site} ({cluster})")
    except AssertionError as e:
        kvs, _ = await plane.store.range("/steering/demand/")
        raise AssertionError(f"{e}: {json.dumps(last[0], indent=1)[:3000]} demand={[kv.value for kv in kvs]}") from None


async def users_cell(plane: Plane, name: str = "shop") -> Any:
    """The binding's USERS cell in `drods get bindings -o wide` (the Table's priority-1 columns)."""
    r = await plane.call("GET", "/apis/multicluster.io/v1alpha1/bindings",
                         headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    cols = [(c["name"], c["priority"]) for c in r.json()["columnDefinitions"]]
    assert ("Users", 1) in cols
    row = next(x for x in r.json()["rows"] if x["cells"][0] == name)
    return row["cells"][[c for c, _ in cols].index("Users")]


async def setup(plane: Plane) -> None:
    for name in ("c-east", "c-west", "c-far"):
        await plane.cluster(name, 10.0)
    await plane.seen("c-east", "c-west", "c-far")
    measured = [{"from": site, "to": c, "delayMs": ms, "source": "probe"}
                for site, row in DISTANCES.items() for c, ms in row.items()]
    r = await plane.call("PUT", "/api/v1/network/status", json={"measurements": measured})
    assert r.status_code == 200, r.text
    st = await plane.place({"name": "shop", "replicas": 4, "resources": {"cpu": 1},
                            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop",
                                         "namespace": "default"}})
    assert "users" not in st  # nobody is known to use it yet
    assert await users_cell(plane) == "none"
    r = await plane.call("POST", REGS, json=REGISTRATION)
    assert r.status_code == 201, r.text

    async def routed() -> bool:
        r = await plane.call("GET", RESOLVE.format(site="east"), role="viewer")
        return r.status_code == 200

    await eventually(routed, 15.0, "the service to be routed")


async def test_replicas_follow_moving_demand_but_not_a_burst(plane: Plane) -> None:
    await setup(plane)
    async with Demand(plane).running() as demand:
        # Learned from demand: all from east → the replicas gather near east (the far cluster,
        # 170 ms away, is beyond the registration's 100 ms SLA threshold).
        obj = await follows(plane, "east", "c-east", within_s=SETTLE_S + 15.0)
        st = obj["status"]
        assert st["users"]["latencySLOMs"] == 100
        assert st["users"]["latencyMs"]["c-east"] == 4.0 and "c-far" not in placement(st)
        learned = json.loads(obj["metadata"]["annotations"][LEARNED_USERS])
        assert learned["sites"] == [{"site": "east", "weight": 1.0}] and learned["serviceId"] == "shop.example"
        first_time = st["scheduledTime"]

        # A burst from west shorter than the window moves nothing.
        demand.site = "west"
        await asyncio.sleep(1.0)
        demand.site = "east"
        deadline = time.monotonic() + SETTLE_S + 2.0
        while time.monotonic() < deadline:
            obj = await binding(plane)
            assert majority(obj) == "c-east", obj["status"]
            assert obj["status"]["scheduledTime"] == first_time, "a burst re-placed the workload"
            await asyncio.sleep(0.2)

        # Demand moves to west for good: after the window the replicas follow, not before.
        demand.site = "west"
        moved_at = time.monotonic()
        obj = await follows(plane, "west", "c-west", within_s=SETTLE_S + 15.0)
        assert time.monotonic() - moved_at >= SETTLE_S
        reason = obj["metadata"]["annotations"][RESCHEDULE_REASON]
        assert reason.startswith("users moved: service shop.example's requests now come from west 100%"), reason
        assert "follow them" in obj["status"]["message"], obj["status"]["message"]
        assert obj["status"]["users"]["latencyMs"]["c-west"] == 4.0
    assert not demand.errors, demand.errors[:3]
    assert await users_cell(plane) == "learned:west=1"
    # The registration goes: what was learned is forgotten, nothing re-placed, and the table says the
    # last decision's users are no longer being learned (they stayed "learned" with no hint they were gone).
    placed = (await binding(plane))["status"]
    r = await plane.call("DELETE", f"{REGS}/shop")
    assert r.status_code == 200, r.text

    async def forgotten() -> dict[str, Any] | None:
        obj = await binding(plane)
        return obj if LEARNED_USERS not in (obj["metadata"].get("annotations") or {}) else None

    obj = await eventually(forgotten, 15.0, "the learned users to be forgotten")
    assert obj["status"]["users"]["source"] == "learned"  # the last decision's users, as it made it
    assert obj["status"]["scheduledTime"] == placed["scheduledTime"] and placement(obj["status"]) == placement(placed)
    assert await users_cell(plane) == "learned(forgotten):west=1"
