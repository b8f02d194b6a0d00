"""The steering controller over a real store: watch-triggered, and a status change re-evaluates only
the services it can affect now (the rest get a deadline or count their hold-down from it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.controllers.rescheduler import Rescheduler
from drods.machinery.informer import Informer
from drods.machinery.tasks import stop_tasks
from drods.model.annotations import LEARNED_USERS, PLACEMENT_OFFERS
from drods.model.keys import NETWORK_PREFIX, STATUS_PREFIX, status_key
from drods.model.kinds import BINDING, CLUSTER, SERVICE_REGISTRATION, SERVICE_ROUTE
from drods.model.reschedule import RescheduleHook, RescheduleRequest, RescheduleResult
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.steering.controller import Recomputation, SteeringController, SteeringInformers
from drods.steering.settings import SteeringSettings
from drods.store import Store
from tests.monitor_e2e.conftest import eventually


def doc(load: float) -> bytes:
    return json.dumps({"status": {"cpu": {"capacity": 10.0, "used": 10.0 * load}}}).encode()


def _running(store: Store, registry: ObjectRegistry, clock: Callable[[], float],
             placement: RescheduleHook | None = None) -> tuple[
        SteeringController, Callable[[int], Awaitable[Recomputation]], list[asyncio.Task[None]]]:
    """A steering controller running on its own informers (injected clock, no coalescing); ``after``
    waits for the recomputation that saw a store revision."""
    informers = SteeringInformers(*(Informer(store, p, decode_stored) for p in (
        SERVICE_REGISTRATION.key_prefix(), BINDING.key_prefix(), CLUSTER.key_prefix(), STATUS_PREFIX,
        NETWORK_PREFIX)))
    seen: list[Recomputation] = []
    changed = asyncio.Event()

    def observe(r: Recomputation) -> None:
        seen.append(r)
        changed.set()

    async def after(revision: int) -> Recomputation:
        async with asyncio.timeout(20):
            while not any(r.revision >= revision for r in seen):
                await changed.wait()
                changed.clear()
        return next(r for r in seen if r.revision >= revision)

    ctl = SteeringController(registry, informers, SteeringSettings(minIntervalSeconds=10.0, coalesceSeconds=0.0),
                             placement, clock=clock, observer=observe)
    tasks = [asyncio.create_task(inf.run()) for inf in informers.all()] + [asyncio.create_task(ctl.run())]
    return ctl, after, tasks


async def _two_clusters(store: Store, tmp_path: Path) -> ObjectRegistry:
    """Clusters a and b at 20 %, 5 ms and 30 ms from the client site DFW."""
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    for c in ("a", "b"):
        await registry.create(CLUSTER, {"metadata": {"name": c}, "spec": {}})
        await store.put(status_key(c), doc(0.2))
    await store.put(f"{NETWORK_PREFIX}DFW/a", json.dumps({"delayMs": 5.0}).encode())
    await store.put(f"{NETWORK_PREFIX}DFW/b", json.dumps({"delayMs": 30.0}).encode())
    return registry


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_only_affected_services_are_evaluated(store: Store, tmp_path: Path) -> None:
    registry = await _two_clusters(store, tmp_path)
    for name, placed in (("one", ["a", "b"]), ("two", ["b"])):
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"}
        body = {"metadata": {"name": name}, "spec": {"resource": ref},
                "status": {"placement": [{"cluster": c, "replicas": 1} for c in placed]}}
        await store.put(BINDING.key(name), json.dumps(body).encode())
        await registry.create(SERVICE_REGISTRATION, {"metadata": {"name": name, "namespace": "default"}, "spec": {
            "serviceId": f"{name}.example", "workload": ref, "clientSites": ["DFW"], "sla": {"maxDelayMs": 100.0}}})
    now = [1000.0]
    ctl, after, tasks = _running(store, registry, lambda: now[0])
    try:
        first = await after(await store.current_revision())
        assert first.evaluated == 2 and first.written == 2
        route = await registry.get(SERVICE_ROUTE, "one.example")
        assert route["spec"]["routes"][0]["instances"][0]["cluster"] == "a"
        # b gets worse: only "two" (served by b) is evaluated; "one" does not use b.
        r = await after(await store.put(status_key("b"), doc(0.6)))
        assert r.evaluated == 1
        # b gets better: "two" now; "one" (b is one of its instances) once b could be chosen.
        now[0] += 1.0
        r = await after(await store.put(status_key("b"), doc(0.1)))
        assert r.evaluated == 1 and ctl.recheck["one.example"] == pytest.approx(1011.0)
        # a saturates: "one" moves to b at once (its instance became unreachable).
        r = await after(await store.put(status_key("a"), doc(0.9999)))
        assert r.evaluated == 1 and r.written == 1
        route = await registry.get(SERVICE_ROUTE, "one.example")
        assert route["spec"]["routes"][0]["instances"][0]["cluster"] == "b"
    finally:
        await stop_tasks(tasks)


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_saturation_moving_many_services_publishes_every_route(store: Store, tmp_path: Path) -> None:
    """150 services on one favourite cluster: its saturation moves them all, published in batches
    committed while the next services are evaluated; none is lost, each route names the new cluster."""
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    for c, load in (("a", 0.1), ("b", 0.4)):
        await registry.create(CLUSTER, {"metadata": {"name": c}, "spec": {}})
        await store.put(status_key(c), doc(load))
    sites = [f"S{n:02d}" for n in range(20)]
    for site in sites:
        await store.put(f"{NETWORK_PREFIX}{site}/a", json.dumps({"delayMs": 10.0}).encode())
        await store.put(f"{NETWORK_PREFIX}{site}/b", json.dumps({"delayMs": 12.0}).encode())
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api", "namespace": "default"}
    await store.put(BINDING.key("api"), json.dumps({
        "metadata": {"name": "api"}, "spec": {"resource": ref},
        "status": {"placement": [{"cluster": c, "replicas": 1} for c in ("a", "b")]}}).encode())
    services = [f"svc-{n:03d}" for n in range(150)]
    await registry.batch_upsert([(SERVICE_REGISTRATION, {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "serviceId": f"{name}.example", "workload": ref, "clientSites": sites, "strategy": "resourceFirst",
        "sla": {"maxDelayMs": 100.0}}}) for name in services])
    _, after, tasks = _running(store, registry, lambda: 1000.0)
    try:
        assert (await after(await store.current_revision())).written == 150
        r = await after(await store.put(status_key("a"), doc(0.9999)))
        assert (r.evaluated, r.written) == (150, 150)
        routes, _ = await registry.list(SERVICE_ROUTE)
        assert sorted(o["metadata"]["name"] for o in routes) == [f"{name}.example" for name in services]
        for o in routes:
            assert {i["cluster"] for route in o["spec"]["routes"] for i in route["instances"]} == {"b"}
            assert [route["clientSite"] for route in o["spec"]["routes"]] == sites
        assert len({o["metadata"]["resourceVersion"] for o in routes}) > 1  # several transactions
    finally:
        await stop_tasks(tasks)


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_only_bindings_of_registered_workloads_wake_it(store: Store, tmp_path: Path) -> None:
    """The workloads' placements are indexed per Binding event: a Binding no registration names wakes
    nothing (100,000 of them changing would each have re-read them all), one that is named re-routes."""
    registry = await _two_clusters(store, tmp_path)

    def binding(name: str, placed: list[str]) -> bytes:
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"}
        return json.dumps({"metadata": {"name": name}, "spec": {"resource": ref},
                           "status": {"placement": [{"cluster": c, "replicas": 1} for c in placed]}}).encode()

    await store.put(BINDING.key("web"), binding("web", ["a"]))
    await registry.create(SERVICE_REGISTRATION, {"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "serviceId": "web.example", "clientSites": ["DFW"], "sla": {"maxDelayMs": 100.0},
        "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}}})
    ctl, after, tasks = _running(store, registry, lambda: 1000.0)
    try:
        await after(await store.current_revision())
        route = await registry.get(SERVICE_ROUTE, "web.example")
        assert [i["cluster"] for i in route["spec"]["routes"][0]["instances"]] == ["a"]
        count = ctl.recomputations
        await store.put(BINDING.key("batch"), binding("batch", ["a", "b"]))  # no registration names it
        bindings = ctl.inf.bindings

        async def seen() -> bool:
            return BINDING.key("batch") in bindings.cache

        await eventually(seen, what="the unnamed Binding in the cache")
        assert not ctl._dirty() and ctl.recomputations == count
        await after(await store.put(BINDING.key("web"), binding("web", ["b"])))  # the named one moves
        route = await registry.get(SERVICE_ROUTE, "web.example")
        assert [i["cluster"] for i in route["spec"]["routes"][0]["instances"]] == ["b"]
        await store.delete(BINDING.key("web"))
        await after(await store.current_revision())
        reg = await registry.get(SERVICE_REGISTRATION, "web", "default")
        assert reg["status"]["instances"] == [] and reg["status"]["binding"] is None
    finally:
        await stop_tasks(tasks)


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_a_binding_following_its_learned_users_is_offered_no_cluster(store: Store, tmp_path: Path) -> None:
    """One owner per Binding: DFW has no instance within the SLA (b is 30 ms away, a would serve it). The
    Binding following users learned for its service gets no offer and no reschedule (the scheduler's SLO
    filter had undone it); one without learned users, or declaring its users, is still offered a."""
    registry = await _two_clusters(store, tmp_path)
    for name, users in (("follow", False), ("plain", False), ("declared", True)):
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": "default"}
        spec: dict[str, Any] = {"resource": ref, "placement": {"users": [{"site": "DFW"}]} if users else {}}
        meta: dict[str, Any] = {"name": name}
        if name != "plain":
            meta["annotations"] = {LEARNED_USERS: json.dumps({"sites": [{"site": "DFW", "weight": 1.0}],
                                                              "latencySLOMs": 20.0, "serviceId": f"{name}.example"})}
        await store.put(BINDING.key(name), json.dumps({"metadata": meta, "spec": spec, "status": {
            "placement": [{"cluster": "b", "replicas": 1}]}}).encode())
        await registry.create(SERVICE_REGISTRATION, {"metadata": {"name": name, "namespace": "default"}, "spec": {
            "serviceId": f"{name}.example", "workload": ref, "clientSites": ["DFW"], "sla": {"maxDelayMs": 20.0}}})
    rescheduler = Rescheduler(registry, clock=lambda: 1000.0)
    asked: list[RescheduleRequest] = []

    async def placement(req: RescheduleRequest) -> RescheduleResult:
        asked.append(req)
        return await rescheduler(req)

    _, after, tasks = _running(store, registry, lambda: 1000.0, placement)
    try:
        await after(await store.current_revision())
        assert sorted((r.details["binding"], r.cluster) for r in asked) == [("declared", "a"), ("plain", "a")]
        for name, offered in (("follow", False), ("plain", True), ("declared", True)):
            b = await registry.get(BINDING, name)
            assert (PLACEMENT_OFFERS in b["metadata"].get("annotations", {})) is offered, name
            assert ("rescheduleTriggeredAt" in b["spec"]) is offered, name
        # an offer sent before steering's cache saw the learned users is refused where it is written
        late = await rescheduler(RescheduleRequest("offer", "a", "late", 0.0, 1.0,
                                                   {"binding": "follow", "serviceId": "follow.example"}))
        assert not late.accepted and "learned users" in late.message
        b = await registry.get(BINDING, "follow")
        assert PLACEMENT_OFFERS not in b["metadata"]["annotations"] and "rescheduleTriggeredAt" not in b["spec"]
    finally:
        await stop_tasks(tasks)
