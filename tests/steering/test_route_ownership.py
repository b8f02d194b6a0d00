"""The steering controller owns its ServiceRoutes (one changed or deleted by someone else is put back,
with an Event), explains every route change against the pairs as evaluated at the time (the replaced
instance's own feasibility, metric and reason; the runner-up on the end-to-end metric), records a route
turning MAX and back, and says why a client site has no route."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.cli.explain import describe_decision
from drods.machinery.decision_log import decision_log
from drods.machinery.informer import Informer
from drods.machinery.tasks import stop_tasks
from drods.model.events import EVENT
from drods.model.keys import NETWORK_PREFIX, STATUS_PREFIX, status_key
from drods.model.kinds import BINDING, CLUSTER, SERVICE_REGISTRATION, SERVICE_ROUTE
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.registry.patch import MERGE_PATCH
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.steering.controller import SteeringController, SteeringInformers, route_revision
from drods.steering.settings import SteeringSettings
from drods.store import Store
from tests.monitor_e2e.conftest import eventually

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "video", "namespace": "default"}


def _load(load: float) -> bytes:
    return json.dumps({"status": {"cpu": {"capacity": 10.0, "used": 10.0 * load}}}).encode()


async def _fleet(store: Store, tmp_path: Path, placed: tuple[str, ...] = ("a", "b"),
                 sites: tuple[str, ...] = ("DFW",)) -> ObjectRegistry:
    """Clusters a and b at 20 %, 5 ms and 30 ms from DFW; the workload ``video`` placed on ``placed``,
    registered for ``sites`` with an SLA of 100 ms."""
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    for c in ("a", "b"):
        await registry.create(CLUSTER, {"metadata": {"name": c}, "spec": {}})
        await store.put(status_key(c), _load(0.2))
    await store.put(f"{NETWORK_PREFIX}DFW/a", json.dumps({"delayMs": 5.0}).encode())
    await store.put(f"{NETWORK_PREFIX}DFW/b", json.dumps({"delayMs": 30.0}).encode())
    await store.put(BINDING.key("video"), json.dumps({
        "metadata": {"name": "video"}, "spec": {"resource": REF},
        "status": {"placement": [{"cluster": c, "replicas": 1} for c in placed]}}).encode())
    await registry.create(SERVICE_REGISTRATION, {"metadata": {"name": "video", "namespace": "default"}, "spec": {
        "serviceId": "video.example", "workload": REF, "clientSites": list(sites), "sla": {"maxDelayMs": 100.0}}})
    return registry


@contextlib.asynccontextmanager
async def _running(store: Store, registry: ObjectRegistry, clock: Callable[[], float]
                   ) -> AsyncIterator[SteeringController]:
    """A steering controller on its own informers, the ServiceRoutes' among them (no coalescing)."""
    informers = SteeringInformers(*(Informer(store, p, decode_stored) for p in (
        SERVICE_REGISTRATION.key_prefix(), BINDING.key_prefix(), CLUSTER.key_prefix(), STATUS_PREFIX,
        NETWORK_PREFIX)), Informer(store, SERVICE_ROUTE.key_prefix(), route_revision))
    ctl = SteeringController(registry, informers, SteeringSettings(minIntervalSeconds=10.0, coalesceSeconds=0.0),
                             clock=clock)
    tasks = [asyncio.create_task(inf.run()) for inf in informers.all()] + [asyncio.create_task(ctl.run())]
    try:
        yield ctl
    finally:
        await stop_tasks(tasks)


async def _route(registry: ObjectRegistry) -> dict[str, Any] | None:
    return await registry.try_get(SERVICE_ROUTE, "video.example")


async def _serves(registry: ObjectRegistry, cluster: str) -> dict[str, Any] | None:
    obj = await _route(registry)
    routes = (obj or {}).get("spec", {}).get("routes") or []
    return obj if routes and [i["cluster"] for i in routes[0]["instances"]] == [cluster] else None


async def _decisions(store: Store, clock: Callable[[], float]) -> list[dict[str, Any]]:
    page = await decision_log(store, clock=clock).query(0.0, clock() + 3600.0, 100)
    return sorted(page.items, key=lambda d: str(d["time"]))


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_route_changed_or_deleted_by_someone_else_is_put_back(store: Store, tmp_path: Path) -> None:
    registry = await _fleet(store, tmp_path)
    async with _running(store, registry, lambda: 1000.0) as ctl:
        published = (await eventually(lambda: _serves(registry, "a"), what="the first route"))["spec"]
        await eventually(lambda: asyncio.sleep(0, ctl.route_objects.get(SERVICE_ROUTE.key("video.example"))))
        # an operator's patch, then a replace pointing DFW elsewhere: each is put back as published
        await registry.patch(SERVICE_ROUTE, "video.example", {"spec": {"changes": 999}}, MERGE_PATCH)

        async def as_published() -> dict[str, Any] | None:
            obj = await _route(registry)
            return obj if obj is not None and obj["spec"] == published else None

        await eventually(as_published, within_s=5.0, what="the patched route put back")
        forged = {**published, "routes": [{**published["routes"][0], "instances": [
            {"cluster": "b", "weight": 1.0, "metric": 35.0, "reason": "forged"}]}]}
        await registry.patch(SERVICE_ROUTE, "video.example", {"spec": forged}, MERGE_PATCH)
        await eventually(as_published, within_s=5.0, what="the replaced route put back")
        # deleted: back without any other event
        await registry.delete(SERVICE_ROUTE, "video.example")
        await eventually(as_published, within_s=5.0, what="the deleted route recreated")
        assert ctl.restored == 3

        async def told() -> list[dict[str, Any]]:
            events, _ = await registry.list(EVENT, "default")
            return [e for e in events if e["reason"] == "RouteRestored"
                    and e["involvedObject"]["name"] == "video.example" and "deleted" in e["message"]]

        assert "put back as the controller last published it" in (await eventually(told))[0]["message"]


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_route_change_names_the_replaced_instance_as_evaluated_then(store: Store, tmp_path: Path) -> None:
    """a's cluster gets busy (processing 5 → 50 ms): the route moves to b, and the decision's runner-up
    is a losing by 18.75 ms end to end (55 against 36.25) — not a winning by 25 ms of network delay.
    Then b's path breaks the SLA (150 ms): the replaced b is infeasible, MAX, with its own reason."""
    registry = await _fleet(store, tmp_path)
    now = [1000.0]
    async with _running(store, registry, lambda: now[0]):
        await eventually(lambda: _serves(registry, "a"), what="the first route")
        now[0] += 20.0  # past the minimum interval and the hold-down
        await store.put(status_key("a"), _load(0.9))
        await eventually(lambda: _serves(registry, "b"), what="the move to b")

        async def moved(n: int) -> list[dict[str, Any]] | None:
            found = [d for d in await _decisions(store, lambda: now[0]) if d["trigger"]["reason"] == "RouteChanged"]
            return found if len(found) >= n else None

        decision = (await eventually(lambda: moved(1), what="the decision"))[0]
        replaced = next(o for o in decision["options"] if not o["chosen"])
        assert (replaced["name"], replaced["feasible"], replaced["metric"]) == ("DFW → a", True, 55.0)
        assert replaced["reason"].startswith("lost by 18.8 ms end to end: 55.0 ms against 36.2 ms for DFW → b")
        ru = decision["runnerUp"]
        assert (ru["name"], ru["against"], ru["lostBy"]) == ("DFW → a", "DFW → b", 18.75)
        assert ru["differences"]["networkMs"] == -25.0 and ru["differences"]["processingMs"] == 43.75
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            describe_decision(decision)
        text = out.getvalue()
        assert "DFW → a" in text and "lost by 18.8 ms end to end" in text and "replaced:" not in text, text

        now[0] += 1.0  # within the minimum interval: an emergency moves at once
        await store.put(f"{NETWORK_PREFIX}DFW/b", json.dumps({"delayMs": 150.0}).encode())  # b breaks the SLA
        await eventually(lambda: _serves(registry, "a"), what="the move back to a")
        decision = (await eventually(lambda: moved(2), what="the second decision"))[-1]
        replaced = next(o for o in decision["options"] if not o["chosen"])
        assert (replaced["name"], replaced["feasible"], replaced["metric"]) == ("DFW → b", False, "MAX")
        assert replaced["reason"] == ("breaks the SLA: delay 156.2 ms > 100 ms "
                                      "(delay 156.2 ms = network 150.0 + processing 6.2)"), replaced["reason"]


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_route_turning_max_and_back_is_recorded(store: Store, tmp_path: Path) -> None:
    registry = await _fleet(store, tmp_path, placed=("a",))
    now = [1000.0]
    async with _running(store, registry, lambda: now[0]):
        await eventually(lambda: _serves(registry, "a"), what="the first route")

        async def metric(value: object) -> dict[str, Any] | None:
            obj = await _serves(registry, "a")
            return obj if obj is not None and obj["spec"]["routes"][0]["instances"][0]["metric"] == value else None

        now[0] += 5.0
        await store.put(f"{NETWORK_PREFIX}DFW/a", json.dumps({"delayMs": 150.0}).encode())
        await eventually(lambda: metric("MAX"), what="the MAX route")
        now[0] += 20.0
        await store.put(f"{NETWORK_PREFIX}DFW/a", json.dumps({"delayMs": 5.0}).encode())
        await eventually(lambda: metric(11.25), what="the route meeting the SLA again")

        async def summaries() -> list[str] | None:
            found = [d["summary"] for d in await _decisions(store, lambda: now[0])]
            return found if len(found) >= 3 else None

        assert await eventually(summaries, what="three decisions") == [
            "DFW: none → a", "DFW: a → a (MAX: no instance meets the SLA)", "DFW: a → a (meets the SLA again)"]


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_client_site_with_no_route_is_explained(store: Store, tmp_path: Path) -> None:
    registry = await _fleet(store, tmp_path, sites=("DFW", "NOWHERE"))
    async with _running(store, registry, lambda: 1000.0):
        async def message() -> str | None:
            obj = await registry.get(SERVICE_REGISTRATION, "video", "default")
            return (obj.get("status") or {}).get("message") or None

        text = await eventually(message, what="the registration's message")
        assert text == "no measurement from client site NOWHERE to any instance (a, b)"
        # measured now: the message goes
        await store.put(f"{NETWORK_PREFIX}NOWHERE/b", json.dumps({"delayMs": 40.0}).encode())

        async def cleared() -> bool:
            obj = await registry.get(SERVICE_REGISTRATION, "video", "default")
            return (obj.get("status") or {}).get("message") == ""

        await eventually(cleared, what="the message cleared")
