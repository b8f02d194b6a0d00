"""Events as ``kubectl describe`` reads them: each scheduling decision leaves one on the workload it
places (Karmada's ``ScheduleBindingSucceed`` / ``ScheduleBindingFailed``), found by the field selector
kubectl sends, written in the decision's own transaction under a lease of the events' TTL."""

from __future__ import annotations

from typing import Any

from drods.model.events import EVENT
from tests.scheduler_e2e.conftest import Plane, eventually, placement
from tests.scheduler_e2e.test_detector import DEPLOYMENTS, RPP, deployment

EVENTS = "/api/v1/namespaces/default/events"


def policy(name: str, workload: str, clusters: list[str]) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": name},
            "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload,
                                          "namespace": "default"},
                     "targetClusters": [{"selectorType": "name", "values": clusters}]}}


async def _described(plane: Plane, name: str) -> list[dict[str, Any]]:
    """The events ``kubectl describe deployment NAME`` asks for (its field selector, as kubectl sends it)."""
    dep = (await plane.call("GET", f"{DEPLOYMENTS}/{name}")).json()
    selector = (f"involvedObject.name={name},involvedObject.namespace=default,involvedObject.kind=Deployment,"
                f"involvedObject.uid={dep['metadata']['uid']}")
    r = await plane.call("GET", EVENTS, params={"fieldSelector": selector, "limit": "500"})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def test_each_decision_leaves_an_event_on_its_workload(plane: Plane) -> None:
    await plane.cluster("east", 30)
    await plane.cluster("west", 60)
    await plane.seen("east", "west")
    for name, clusters in (("web", ["east", "west"]), ("lost", ["nowhere"])):
        assert (await plane.call("POST", DEPLOYMENTS, json=deployment(name, 4))).status_code == 201
        assert (await plane.call("POST", RPP, json=policy(f"{name}-pp", name, clusters))).status_code == 201

    got = placement(await plane.decided("deployment-default-web"))

    async def events_of(name: str) -> list[dict[str, Any]] | None:
        return await _described(plane, name) or None

    placed = await eventually(lambda: events_of("web"), what="web's scheduling event")
    ev = placed[-1]
    assert (ev["type"], ev["reason"], ev["count"]) == ("Normal", "ScheduleBindingSucceed", 1), ev
    result = ", ".join(f"{c}:{n}" for c, n in sorted(got.items()))
    assert ev["message"].startswith(f"Binding has been scheduled successfully. Result: {{{result}}}."), ev["message"]
    assert ev["source"] == {"component": "drods-scheduler"} and ev["involvedObject"]["kind"] == "Deployment"

    refused = await eventually(lambda: events_of("lost"), what="lost's scheduling event")
    assert (refused[-1]["type"], refused[-1]["reason"]) == ("Warning", "ScheduleBindingFailed"), refused[-1]
    assert "nowhere" in refused[-1]["message"], refused[-1]["message"]

    # kept for the events' TTL: the store drops them with their lease, no job prunes them
    kvs, _ = await plane.store.range(EVENT.key_prefix("default"))
    assert kvs and all(kv.lease != 0 for kv in kvs)
    bad = await plane.call("GET", EVENTS, params={"fieldSelector": "involvedObject.colour=red"})
    assert bad.status_code == 400 and "field label not supported" in bad.json()["message"], bad.text
