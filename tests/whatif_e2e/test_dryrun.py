"""W1 through the running control plane: a dry run answers exactly what the scheduler then does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.store.sqlite import SqliteStore
from tests.monitor_e2e.conftest import eventually
from tests.scheduler_e2e.conftest import Plane, placement, serve

VOLATILE = ("time", "scheduler", "generation", "timingsMs", "scheduleType")


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """One backend is enough here: what is under test is the scheduler's decision, not the store."""
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data") as p:
        yield p


async def fleet(plane: Plane) -> None:
    # equal water levels: ties are broken by the scheduler's seeded RNG, so the RNG state must match
    for name in ("a", "b", "c", "d"):
        await plane.cluster(name, 50, {"tier": "prod"}, region="eu" if name in "ab" else "us")
    await plane.seen("a", "b", "c", "d")


def stable(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in VOLATILE}


async def whatif(plane: Plane, body: dict[str, Any], expect: int = 200) -> dict[str, Any]:
    r = await plane.call("POST", "/api/v1/whatif", json=body, role="viewer")
    assert r.status_code == expect, r.text
    return r.json()  # type: ignore[no-any-return]


async def test_dry_run_is_what_the_scheduler_then_does(plane: Plane) -> None:
    await fleet(plane)
    snap = plane.scheduler.cache.snap
    version = snap.version
    rng_state = plane.scheduler.scheduler.rng.bit_generator.state
    for i, replicas in enumerate((5, 3, 7)):
        body = {"name": f"web-{i}", "replicas": replicas, "resources": {"cpu": 1, "memory": 2}}
        dry = await whatif(plane, {"binding": body})
        assert snap.version == version and plane.scheduler.scheduler.rng.bit_generator.state == rng_state, \
            "a dry run must not touch the live snapshot or RNG"
        r = await plane.call("GET", "/api/v1/bindings")
        assert [b["id"] for b in r.json()["items"]] == [f"web-{j}" for j in range(i)], "nothing is stored"
        st = await plane.place(body)
        assert st["phase"] == dry["phase"] == "Scheduled"
        assert placement(st) == {p["cluster"]: p["replicas"] for p in dry["placement"]}
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": f"web-{i}"})
        real = r.json()["items"][0]
        assert stable(dry["explanation"]) == stable(real)
        assert dry["explanation"]["scheduler"] == "whatif" and set(dry["explanation"]) == set(real)
        version = snap.version
        rng_state = plane.scheduler.scheduler.rng.bit_generator.state

    # an existing binding is answered as a change of itself: a scale keeps what it has and adds
    body = {"name": "web-0", "replicas": 9, "resources": {"cpu": 1, "memory": 2}}
    before = placement(await plane.status("web-0"))
    dry = await whatif(plane, {"binding": body})
    assert all(p["replicas"] >= before.get(p["cluster"], 0) for p in dry["placement"])
    r = await plane.call("PATCH", "/api/v1/bindings/web-0", json={"replicas": 9})
    assert r.status_code == 200, r.text
    st = await plane.decided("web-0")
    assert placement(st) == {p["cluster"]: p["replicas"] for p in dry["placement"]}
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "web-0"})
    assert stable(dry["explanation"]) == stable(r.json()["items"][0])


async def test_changes_down_cordon_water_level_new_cluster_and_profile(plane: Plane) -> None:
    await fleet(plane)
    body = {"binding": {"replicas": 4, "resources": {"cpu": 1}, "placement": {"waterLevelLimit": 0.85}}}
    down = await whatif(plane, {**body, "changes": [{"cluster": "a", "down": True}, {"cluster": "b", "cordon": True},
                                                    {"cluster": "c", "waterLevel": 0.9}]})
    assert {p["cluster"] for p in down["placement"]} == {"d"}
    reasons = down["explanation"]["filters"]["reasons"]
    assert reasons["a"] == "cluster not ready" and "cordoned" in reasons["b"] and "water level" in reasons["c"]
    # the live view is unchanged: a plain dry run may use every cluster again
    plain = await whatif(plane, body)
    assert plain["phase"] == "Scheduled" and plain["explanation"]["candidates"] == {"total": 4, "feasible": 4}

    new = {"name": "e", "region": "eu", "status": {"cpu": {"allocatable": 64, "used": 0},
                                                   "memory": {"allocatable": 256, "used": 0}}}
    grown = await whatif(plane, {**body, "changes": [{"addCluster": new}, {"cluster": "a", "waterLevelDelta": 0.4}]})
    assert grown["explanation"]["candidates"]["total"] == 5
    assert "a" not in {p["cluster"] for p in grown["placement"]}  # 0.5 + 0.4 is above the 0.85 limit
    assert "e" in {p["cluster"] for p in grown["placement"]}  # empty: the lowest water level
    assert "e" not in plane.scheduler.cache.snap

    packed = await whatif(plane, {**body, "changes": [{"profile": {"name": "random", "filters": [], "scores": {}}}]})
    assert packed["explanation"]["profile"] == "random" and packed["explanation"]["weights"] == {}


async def test_workload_under_a_given_or_stored_policy(plane: Plane) -> None:
    await fleet(plane)
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "default"},
              "spec": {"replicas": 3, "template": {"spec": {"containers": [
                  {"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}}}
    r = await plane.call("POST", "/api/v1/whatif", json={"workload": deploy}, role="viewer")
    assert r.status_code == 422 and r.json()["code"] == "NO_MATCHING_POLICY"

    policy = {"placement": {"clusterAffinity": {"clusterNames": ["c", "d"]}}}
    out = await whatif(plane, {"workload": deploy, "policy": policy})
    assert out["explanation"]["binding"] == "deployment-default-shop"
    assert {p["cluster"] for p in out["placement"]} <= {"c", "d"} and sum(p["replicas"] for p in out["placement"]) == 3

    pp = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "eu"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}],
                   "placement": {"clusterAffinity": {"clusterNames": ["a"]}}}}
    r = await plane.call("POST", "/apis/multicluster.io/v1alpha1/namespaces/default/propagationpolicies", json=pp)
    if r.status_code == 404:
        r = await plane.call("POST", "/apis/multicluster.io/v1alpha1/propagationpolicies", json=pp)
    assert r.status_code == 201, r.text
    out = await whatif(plane, {"workload": deploy})
    assert out["placement"] == [{"cluster": "a", "replicas": 3}]

    # a FederatedHPA owns shop's replicas: the detector's Binding carries its 5, not the template's 3
    fhpa = "/apis/multicluster.io/v1alpha1/namespaces/default/federatedhpas"
    r = await plane.call("POST", fhpa, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA", "metadata": {"name": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
                 "minReplicas": 1, "maxReplicas": 10, "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}})
    assert r.status_code == 201, r.text
    r = await plane.call("PATCH", f"{fhpa}/shop/status", json={"status": {"desiredReplicas": 5}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    out = await whatif(plane, {"workload": deploy})
    assert out["placement"] == [{"cluster": "a", "replicas": 5}], out["placement"]

    # a Karmada PropagationPolicy stored as Karmada writes it places a workload too (it was not looked at)
    karm = {**deploy, "metadata": {"name": "karm", "namespace": "default"}}
    kpp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "karm", "namespace": "default"},
           "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "karm"}],
                    "placement": {"clusterAffinity": {"clusterNames": ["b"]}}}}
    r = await plane.call("POST", "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies", json=kpp)
    assert r.status_code == 201, r.text
    out = await whatif(plane, {"workload": karm})
    assert out["placement"] == [{"cluster": "b", "replicas": 3}], out
    assert (await whatif(plane, {"workload": karm, "policy": kpp}))["placement"] == [{"cluster": "b", "replicas": 3}]


async def test_bad_input_is_a_clear_error_and_changes_nothing(plane: Plane) -> None:
    await fleet(plane)
    version = plane.scheduler.cache.snap.version
    cases = [
        ({"binding": {"replicas": 1}, "changes": [{"cluster": "nope", "down": True}]}, 422, "VALIDATION_FAILED"),
        ({"binding": {"replicas": 1}, "changes": [{"cluster": "a", "down": True, "cordon": True}]}, 422,
         "VALIDATION_FAILED"),
        ({"binding": {"replicas": 1}, "changes": [{"profile": {"filters": ["Nope"]}}]}, 422, "VALIDATION_FAILED"),
        ({"binding": {"replicas": -1}}, 422, "VALIDATION_FAILED"),
        ({"replicas": 1}, 422, "VALIDATION_FAILED"),
        ({"workload": {"kind": "Widget", "apiVersion": "example.com/v1", "metadata": {"name": "x"}}}, 422,
         "VALIDATION_FAILED"),
        # a Namespace is placed only by a policy that selects it (Karmada's namespace management)
        ({"workload": {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}}}, 422,
         "NO_MATCHING_POLICY"),
    ]
    for body, status, code in cases:
        r = await plane.call("POST", "/api/v1/whatif", json=body)
        assert r.status_code == status and r.json()["code"] == code, (body, r.text)
        assert set(r.json()) >= {"code", "message", "details"}
    r = await plane.client.post("/api/v1/whatif", json={"binding": {"replicas": 1}})
    assert r.status_code == 401
    assert plane.scheduler.cache.snap.version == version


async def test_whatif_command(plane: Plane, tmp_path: Path) -> None:
    import asyncio
    import json

    from typer.testing import CliRunner

    from drods.cli.main import app

    await fleet(plane)
    f = tmp_path / "deploy.yaml"
    f.write_text("""apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 2
  template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
---
apiVersion: multicluster.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p}
spec:
  placement: {clusterAffinity: {clusterNames: [a, b]}}
""")
    common = ["--server", plane.url, "--token", plane.tokens["viewer"]]

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(app, ["whatif", "-f", str(f), *args, *common])

    r = await asyncio.to_thread(invoke, "-o", "json", "--down", "a")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["placement"] == [{"cluster": "b", "replicas": 2}]
    assert out["explanation"]["filters"]["reasons"]["a"] == "cluster not ready"
    r = await asyncio.to_thread(invoke)
    assert r.exit_code == 0 and out["phase"] in r.output and "TOTAL" in r.output, r.output
    r = await asyncio.to_thread(invoke, "--water-level", "a")
    assert r.exit_code == 2
    r = await asyncio.to_thread(invoke, "--cordon", "nope")
    assert r.exit_code == 1 and "VALIDATION_FAILED" in r.output


async def test_api_server_without_a_scheduler_builds_the_view_from_the_store(tmp_path: Path) -> None:
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", scheduler=False) as plane:
        for name, pct in (("a", 20), ("b", 40), ("c", 60), ("d", 90)):
            await plane.cluster(name, pct, region="eu")
        out = await whatif(plane, {"binding": {"name": "web", "replicas": 6, "resources": {"cpu": 1}}})
        assert out["phase"] == "Scheduled" and sum(p["replicas"] for p in out["placement"]) == 6
        assert out["explanation"]["candidates"]["total"] == 4
        assert "water level" in out["explanation"]["filters"]["reasons"]["d"]
        assert (await plane.call("GET", "/api/v1/bindings")).json()["items"] == []


async def test_a_view_built_from_the_store_knows_the_measured_latencies(tmp_path: Path) -> None:
    """An API server without a scheduler (and a migration weighing its target) builds its view from the
    store: the users' latency measured to each cluster must be in it, or users at a site are placed as
    if no latency were known (neutral scores) where the scheduler puts them near."""
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", scheduler=False) as plane:
        for name in ("near", "far"):
            await plane.cluster(name, 20, region="ap")
        r = await plane.call("PUT", "/api/v1/network/status", json={"measurements": [
            {"from": "SIN", "to": "near", "delayMs": 2}, {"from": "SIN", "to": "far", "delayMs": 150}]})
        assert r.status_code == 200, r.text
        out = await whatif(plane, {"binding": {"name": "web", "replicas": 4, "resources": {"cpu": 0.5},
                                               "placement": {"users": [{"site": "SIN"}], "latencySLOMs": 30}}})
        assert {p["cluster"]: p["replicas"] for p in out["placement"]} == {"near": 4}, out
        users = out["explanation"]["analysis"]["users"]
        assert users["latencyMs"] == {"near": 2.0}, users


@pytest.mark.parametrize("change, after", [
    # the users moved beyond the SLO of where the replicas run: a ReconcileSchedule moves them
    ({"users": [{"region": "eu"}]}, {"lhr": 4}),
    # restated shares, every site within the SLO: divided by the new shares again
    ({"users": [{"region": "us", "weight": 1}, {"region": "eu", "weight": 3}]}, {"dfw": 1, "lhr": 3}),
])
async def test_a_change_of_the_users_is_answered_as_the_scheduler_then_decides_it(
        plane: Plane, change: dict[str, Any], after: dict[str, int]) -> None:
    """The what-if of a stored binding's changed users or SLO is the ReconcileSchedule the scheduler
    makes once the change is stored (it was answered as a scale of the placement, which stayed)."""
    await plane.cluster("dfw", 20, region="us", network={"latencyMs": {"eu": 40}})
    await plane.cluster("lhr", 20, region="eu", network={"latencyMs": {"us": 40}})
    await plane.seen("dfw", "lhr")
    body = {"name": "r1", "replicas": 4, "resources": {"cpu": 0.5, "memory": 1},
            "placement": {"users": [{"region": "us"}], "latencySLOMs": 30}}
    assert placement(await plane.place(body)) == {"dfw": 4}
    changed = {**body, "placement": {**body["placement"], **change,
                                     "latencySLOMs": 30 if len(change["users"]) == 1 else 50}}
    dry = await whatif(plane, {"binding": changed})
    assert {p["cluster"]: p["replicas"] for p in dry["placement"]} == after, dry
    assert dry["explanation"]["scheduleType"] == "ReconcileSchedule"
    r = await plane.call("PATCH", "/api/v1/bindings/r1", json={"placement": changed["placement"]},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    st = await plane.decided("r1")
    assert placement(st) == after


async def test_a_workloads_manifest_scaled_is_answered_as_the_scale_the_scheduler_then_makes(plane: Plane) -> None:
    """A manifest as a user submits it has no uid, the stored Binding's reference the template's: the
    difference made the what-if of a scale a ReconcileSchedule (a fresh division), the real one a scale."""
    await fleet(plane)
    pp = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "spread"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}],
                   "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                       "weightPreference": {"dynamicWeight": "WaterLevel"}}}}}
    r = await plane.call("POST", "/apis/multicluster.io/v1alpha1/propagationpolicies", json=pp)
    assert r.status_code == 201, r.text
    deploy: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "shop"}},
                 "template": {"metadata": {"labels": {"app": "shop"}}, "spec": {"containers": [
                     {"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}}}
    r = await plane.call("POST", "/apis/apps/v1/namespaces/default/deployments", json=deploy)
    assert r.status_code == 201, r.text
    first = await plane.decided("deployment-default-shop")
    scaled = {**deploy, "spec": {**deploy["spec"], "replicas": 6}}
    dry = await whatif(plane, {"workload": scaled})
    assert dry["explanation"]["scheduleType"] == "ScaleSchedule", dry["explanation"]["scheduleType"]
    r = await plane.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/shop", json={"spec": {"replicas": 6}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def rescheduled() -> dict[str, Any] | None:
        st = await plane.decided("deployment-default-shop")
        return st if st["scheduledGeneration"] > first["scheduledGeneration"] else None

    st = await eventually(rescheduled, what="the scale decided")
    assert placement(st) == {p["cluster"]: p["replicas"] for p in dry["placement"]}
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "deployment-default-shop"})
    assert stable(dry["explanation"]) == stable(r.json()["items"][0])


@pytest.fixture
async def prompt_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """Every report published at once (no 30 s rate limit): a cluster's load changes within the test."""
    from drods.monitor.service import MonitorSettings

    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data",
                     monitoring=MonitorSettings(rateMinIntervalSeconds=0.0)) as p:
        yield p


async def test_a_drain_dry_run_forecasts_where_the_replicas_go_and_how_many_wait(prompt_plane: Plane) -> None:
    """The dry run listed the bindings it would re-place but not whether the rest of the fleet could take
    them: its forecast is the scheduler's own decisions on a copy of its view, and the drain then does that."""
    plane = prompt_plane
    await plane.cluster("a", 10)
    for name in ("b", "c"):
        await plane.cluster(name, 84)  # full under the 85 % limit: the workloads go to a
    await plane.seen("a", "b", "c")
    for i in range(3):
        st = await plane.place({"name": f"web-{i}", "replicas": 10, "resources": {"cpu": 1, "memory": 1}})
        assert placement(st) == {"a": 10}, st
    await plane.report("b", 50)  # room for 22 one-core replicas under the limit; c still has none

    async def b_reported() -> bool:
        snap = plane.scheduler.cache.snap
        return bool(snap.water_level[snap.index["b"]] < 0.6)

    await eventually(b_reported, what="b's new water level in the scheduler's view")
    r = await plane.call("POST", "/api/v1/clusters/a/drain", params={"dryRun": "All"}, json={})
    assert r.status_code == 200, r.text
    dry = r.json()
    forecast = dry["forecast"]
    assert sorted(f["binding"] for f in forecast["bindings"]) == ["web-0", "web-1", "web-2"]
    assert forecast["pendingReplicas"] == 8 and "8 replica(s) would wait for room" in dry["message"], dry
    assert sum(p["replicas"] for f in forecast["bindings"] for p in f["placement"] if p["cluster"] == "b") == 22
    assert not any(p["cluster"] in ("a", "c") for f in forecast["bindings"] for p in f["placement"])
    r = await plane.call("GET", "/api/v1/clusters/a")
    assert r.json().get("unschedulable") is not True  # a dry run cordons nothing

    r = await plane.call("POST", "/api/v1/clusters/a/drain", json={})
    assert r.status_code == 200, r.text

    async def drained() -> list[dict[str, Any]] | None:
        sts = [await plane.status(f"web-{i}") for i in range(3)]
        return sts if all("a" not in placement(s) for s in sts) and \
            sum(placement(s).get("b", 0) for s in sts) == 22 else None

    sts = await eventually(drained, 15.0, "the drain's reschedules")
    assert sum(s["requested"] - s["placed"] for s in sts) == forecast["pendingReplicas"]
