"""Placement inputs through the API (F6 prices, H2 classes): a real control plane, clusters fed as
an agent would, decisions read back from the Binding status, the history and the table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drods.controllers.rescheduler import Rescheduler
from drods.controllers.traffic_rebalance import TrafficRebalancer
from drods.scheduler.profile import Profile
from drods.scheduler.rebalance import TrafficRebalancePolicy
from tests.monitor_e2e.conftest import eventually
from tests.scheduler_e2e.conftest import Plane, placement


async def test_prices_drive_placement_bill_history_and_wide_table(plane: Plane) -> None:
    await plane.cluster("cheap", 20, cost={"cpuCoreHour": 0.01, "memoryGiBHour": 0.001, "egressGiB": 0.02})
    await plane.cluster("dear", 20, cost={"cpuCoreHour": 0.08, "memoryGiBHour": 0.004, "egressGiB": 0.09,
                                          "market": "OnDemand"})
    await plane.cluster("spot", 20, cost={"cpuCoreHour": 0.02, "memoryGiBHour": 0.001, "market": "Spot",
                                          "egressGiB": 0.05, "gpuHourByModel": {"A100": 2.5}})
    await plane.seen("cheap", "dear", "spot")
    st = await plane.place({"name": "cf", "replicas": 6, "resources": {"cpu": 1, "memory": 2},
                            "network": {"egressGiBPerHour": 1.0}, "placement": {"costFirst": True}})
    # spot's compute is cheaper (0.022/h) but the egress price makes it dearer (0.072 vs 0.032)
    assert st["phase"] == "Scheduled" and st["placement"] == [{"cluster": "cheap", "replicas": 6}]
    # 6 × (1×0.01 + 2×0.001 + 1×0.02)
    assert abs(st["estimatedHourlyCost"] - 6 * 0.032) < 1e-9
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "cf"})
    e = r.json()["items"][0]
    assert e["division"] == "CostFirst" and abs(e["estimatedHourlyCost"] - 0.192) < 1e-9
    assert e["scores"]["Cost"]["cheap"] == 100.0 and e["baseWeights"]["Cost"] == 0.5
    # a bad price is refused with a clear error and changes nothing
    r = await plane.call("POST", "/api/v1/clusters", json={"name": "neg", "syncMode": "Pull",
                                                            "cost": {"gpuHourByModel": {"A100": -1}}})
    assert r.status_code == 422 and "gpuHourByModel" in r.text
    assert (await plane.call("GET", "/api/v1/clusters/neg")).status_code == 404
    # the Binding kind's table carries the bill as a wide column
    r = await plane.call("GET", "/apis/multicluster.io/v1alpha1/bindings",
                         headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = r.json()
    cols = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert ("Cost/h", 1) in cols
    at = [c for c, _ in cols].index("Cost/h")
    row = next(x for x in table["rows"] if x["cells"][0] == "cf")
    assert abs(row["cells"][at] - 0.192) < 1e-9


async def test_a_cost_first_binding_follows_a_price_drop_on_a_quiet_fleet(plane: Plane) -> None:
    """A quiet fleet packs, and a fleet change moves a packed binding only for a clearly better score; a
    cost-first binding asked for the cheapest placement, so a price drop elsewhere moves it whatever the
    scores say (it stayed on the dearer cluster)."""
    await plane.cluster("us", 3, region="us", cost={"cpuCoreHour": 0.05, "memoryGiBHour": 0.006})
    await plane.cluster("eu", 9, region="eu", cost={"cpuCoreHour": 0.02, "memoryGiBHour": 0.003})
    await plane.cluster("ap", 2, region="ap", cost={"cpuCoreHour": 0.08, "memoryGiBHour": 0.01})
    await plane.seen("us", "eu", "ap")
    st = await plane.place({"name": "thrifty", "replicas": 2, "resources": {"cpu": 1, "memory": 2},
                            "placement": {"costFirst": True, "waterLevelLimit": 0.8}})
    assert placement(st) == {"eu": 2}
    r = await plane.call("PATCH", "/api/v1/clusters/ap", json={"cost": {"cpuCoreHour": 0.001, "memoryGiBHour": 0.0001}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def moved() -> dict[str, Any] | None:
        st = await plane.status("thrifty")
        return st if placement(st) == {"ap": 2} else None

    st = await eventually(moved, what="the cost-first binding on the now cheapest cluster")
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "thrifty"})
    assert r.json()["items"][0]["trigger"]["kind"] == "ClusterCostChanged"
    assert st["estimatedHourlyCost"] < 0.01


async def test_workload_class_keeps_clashing_classes_apart(plane: Plane) -> None:
    await plane.cluster("batchy", 5)
    await plane.cluster("calm", 45)
    await plane.seen("batchy", "calm")
    batch = await plane.place({"name": "crunch", "replicas": 8, "resources": {"cpu": 2, "memory": 1},
                               "targetClusters": ["batchy"],
                               "labels": {"multicluster.io/workload-class": "cpu-batch"}})
    assert batch["placement"] == [{"cluster": "batchy", "replicas": 8}]
    blind = await plane.place({"name": "plain", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1}})
    assert "batchy" in {p["cluster"] for p in blind["placement"]}  # the emptier cluster, by water level
    web = await plane.place({"name": "web", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1},
                             "labels": {"multicluster.io/workload-class": "latency-sensitive"}})
    assert web["placement"] == [{"cluster": "calm", "replicas": 2}]
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "web"})
    e = r.json()["items"][0]
    assert e["scores"]["Dissonance"] == {"calm": 100.0} and e["baseWeights"]["Dissonance"] == 1.0


async def test_traffic_graph_places_a_service_near_its_peer(plane: Plane) -> None:
    await plane.cluster("quiet", 10, region="eu", zone="eu-1")
    await plane.cluster("peer", 30, region="us", zone="us-1")
    await plane.seen("quiet", "peer")
    db = await plane.place({"name": "db", "replicas": 1, "resources": {"cpu": 1, "memory": 1},
                            "targetClusters": ["peer"]})
    assert db["placement"] == [{"cluster": "peer", "replicas": 1}]
    bad = await plane.call("PUT", "/api/v1/traffic", json={"edges": [{"from": {"name": "web"},
                                                                      "to": {"name": "db"},
                                                                      "bytesPerSecond": -5}]})
    assert bad.status_code == 422 and "bytesPerSecond" in bad.text
    assert await plane.store.get("/traffic/graph") is None  # nothing stored
    viewer = await plane.call("PUT", "/api/v1/traffic", role="viewer",
                              json={"edges": [{"from": {"name": "web"}, "to": {"name": "db"}}]})
    assert viewer.status_code == 403
    itself = await plane.call("PUT", "/api/v1/traffic", json={"edges": [{"from": {"name": "web"}, "to": {"name": "web"},
                                                                         "bytesPerSecond": 5}]})
    assert itself.status_code == 422 and "with itself" in itself.text, itself.text
    assert (await plane.call("GET", "/api/v1/traffic", role="viewer")).json() == {"edges": []}
    ok = await plane.call("PUT", "/api/v1/traffic", json={
        "edges": [{"from": {"namespace": "default", "name": "web"}, "to": {"namespace": "default", "name": "db"},
                   "bytesPerSecond": 5e6, "requestsPerSecond": 800}],
        "timestamp": datetime.now(UTC).isoformat()})
    assert ok.status_code == 200 and ok.json() == {"accepted": 1, "edges": 1}
    (edge,) = (await plane.call("GET", "/api/v1/traffic", role="viewer")).json()["edges"]
    assert edge["from"] == {"namespace": "default", "name": "web"} and edge["to"]["name"] == "db"
    assert 4.9e6 < edge["bytesPerSecond"] <= 5e6 and edge["reportedAt"].endswith("Z")
    snap = plane.scheduler.cache.snap

    async def graph_seen() -> bool:
        return "default/web" in snap.traffic

    await eventually(graph_seen, what="the scheduler to see the traffic graph")
    web = await plane.place({"name": "web", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1}})
    assert web["placement"] == [{"cluster": "peer", "replicas": 2}]  # near its peer, not the emptier one
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "web"})
    assert r.json()["items"][0]["scores"]["TrafficAffinity"] == {"peer": 100.0}
    lone = await plane.place({"name": "lone", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1}})
    assert "quiet" in {p["cluster"] for p in lone["placement"]}  # no traffic: water level decides


async def test_traffic_rebalance_moves_the_callee_to_its_later_caller(plane: Plane) -> None:
    """H1: the descheduler's rebalance pass asks for a re-placement and the scheduler moves the callee."""
    await plane.cluster("calm", 10, region="eu", zone="eu-1")
    await plane.cluster("busy", 40, region="us", zone="us-1")
    await plane.seen("calm", "busy")
    api = await plane.place({"name": "api", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1}})
    assert placement(api) == {"calm": 2}  # nobody talks to it yet: the emptier cluster
    ok = await plane.call("PUT", "/api/v1/traffic", json={
        "edges": [{"from": {"name": "ui"}, "to": {"name": "api"}, "bytesPerSecond": 4e6}]})
    assert ok.status_code == 200
    ui = await plane.place({"name": "ui", "replicas": 1, "resources": {"cpu": 0.5, "memory": 1},
                            "targetClusters": ["busy"]})  # its own constraint: only busy
    assert placement(ui) == {"busy": 1}
    # every edge as settled (the settle window is on an injected clock in tests/controllers/test_traffic_rebalance.py)
    rebalancer = TrafficRebalancer(plane.store, plane.ctx.registry, Profile.default(),
                                   TrafficRebalancePolicy(settleSeconds=0), Rescheduler(plane.ctx.registry))
    moves = await rebalancer.pass_once()
    assert [(m.binding, m.outcome) for m in moves] == [("api", "executed")]

    async def moved() -> dict[str, Any] | None:
        st = await plane.status(api["id"])
        return st if placement(st) == {"busy": 2} else None

    await eventually(moved, what="the scheduler to re-place api beside ui")
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "api"})
    last = r.json()["items"][0]
    assert last["trigger"]["kind"] == "Reschedule" and last["trigger"]["reason"].startswith("traffic rebalance: ")
    assert await rebalancer.pass_once() == []  # beside its peer now (and cooling down)


async def test_dataset_draws_its_readers_and_decisions_record_bytes(plane: Plane) -> None:
    await plane.cluster("data", 40)
    await plane.cluster("empty", 5)
    await plane.seen("data", "empty")
    ds = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Dataset",
          "metadata": {"name": "images", "namespace": "ml"},
          "spec": {"sizeGiB": 800, "locations": [{"cluster": "data", "kind": "Primary"}]}}
    base = "/apis/multicluster.io/v1alpha1/namespaces/ml/datasets"
    bad = await plane.call("POST", base, json=ds | {"metadata": {"name": "bad", "namespace": "ml"},
                                                    "spec": {"sizeGiB": -1}})
    assert bad.status_code == 422
    r = await plane.call("POST", base, json=ds)
    assert r.status_code == 201, r.text
    snap = plane.scheduler.cache.snap

    async def known() -> bool:
        return snap.datasets.get("ml/images") == ("data",)

    await eventually(known, what="the scheduler to see the dataset")
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "train", "namespace": "ml"}
    st = await plane.place({"name": "train", "replicas": 2, "resources": {"cpu": 1, "memory": 1}, "resource": ref,
                            "datasets": [{"name": "images", "readGiBPerHour": 50}]})
    assert st["placement"] == [{"cluster": "data", "replicas": 2}]  # beside the data, not the emptier cluster
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "train"})
    e = r.json()["items"][0]
    assert e["dataMovedGiBPerHour"] == 0.0 and e["scores"]["DataLocality"] == {"data": 100.0}
    plain = await plane.place({"name": "plain", "replicas": 2, "resources": {"cpu": 1, "memory": 1}})
    assert "empty" in {p["cluster"] for p in plain["placement"]}
    # the data moves: its reader follows it (it stayed, reading 50 GiB an hour across clusters);
    # a change that leaves the copies where they are moves nothing
    r = await plane.call("PATCH", f"{base}/images", json={"spec": {"sizeGiB": 900}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    moved = {"spec": {"locations": [{"cluster": "empty", "kind": "Primary"}]}}
    r = await plane.call("PATCH", f"{base}/images", json=moved,
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def followed() -> dict[str, Any] | None:
        st = await plane.status("train")
        return st if placement(st) == {"empty": 2} else None

    await eventually(followed, what="the reader beside its data again")
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "train"})
    items = r.json()["items"]
    assert len(items) == 2, [i["trigger"] for i in items]  # the size change decided nothing
    assert items[0]["scheduleType"] == "DatasetMoved" and items[0]["dataMovedGiBPerHour"] == 0.0
    assert items[0]["trigger"] == {"kind": "DatasetMoved",
                                   "reason": "Dataset ml/images moved: copies on empty (were on data)"}
    assert placement(await plane.status("plain")) == placement(plain)  # not a reader: not decided again


async def test_follower_is_placed_with_its_primary_and_moves_when_it_moves(plane: Plane) -> None:
    await plane.cluster("x", 50)
    await plane.cluster("y", 50)
    await plane.cluster("idle", 5)
    await plane.seen("x", "y", "idle")
    db = await plane.place({"name": "db", "replicas": 1, "resources": {"cpu": 1, "memory": 1},
                            "targetClusters": ["x"]})
    assert db["placement"] == [{"cluster": "x", "replicas": 1}]
    follow = {"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": "default", "name": "db"}
    st = await plane.place({"name": "db-backup", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1},
                            "followUp": follow})
    assert st["placement"] == [{"cluster": "x", "replicas": 2}]
    r = await plane.call("PATCH", "/api/v1/bindings/db", json={"targetClusters": ["y"]},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def moved() -> dict | None:
        s = await plane.status("db-backup")
        return s if s["placement"] == [{"cluster": "y", "replicas": 2}] else None

    await eventually(moved, what="the follower to move with db")
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "db-backup"})
    e = r.json()["items"][0]
    assert e["scheduleType"] == "FollowUpMoved" and e["trigger"]["kind"] == "FollowUp"


async def test_a_changed_users_or_slo_moves_replicas_now_beyond_it(plane: Plane) -> None:
    """Declared users moved (the spec changed, Karmada's ReconcileSchedule): replicas now beyond the
    latency SLO leave while a cluster within it has room, as a cluster no longer selected loses its
    replicas; the explanation's verdicts agree with the placement."""
    await plane.cluster("dfw", 20, region="us")
    await plane.cluster("lhr", 20, region="eu", network={"latencyMs": {"us": 80}})
    await plane.seen("dfw", "lhr")
    body = {"name": "r1", "replicas": 4, "resources": {"cpu": 0.5, "memory": 1},
            "placement": {"users": [{"region": "us"}], "latencySLOMs": 30}}
    assert placement(await plane.place(body)) == {"dfw": 4}

    r = await plane.call("PATCH", "/api/v1/bindings/r1", json={"placement": {"users": [{"region": "eu"}]}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def moved() -> dict[str, int] | None:
        got = placement(await plane.status("r1"))
        return got if got != {"dfw": 4} else None

    assert await eventually(moved, 10.0, "r1 beyond its SLO moved to its users") == {"lhr": 4}
    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer", params={"binding": "r1"})
    newest = r.json()["items"][0]
    assert newest["scheduleType"] == "ReconcileSchedule", newest


async def test_restated_user_shares_divide_the_replicas_again(plane: Plane) -> None:
    """Declared users' shares turned around (the spec changed) with every site within the SLO: the
    replicas are divided by the new shares, as a new copy of the workload would be, not kept where they
    still meet the SLO."""
    await plane.cluster("dfw", 20, region="us", network={"latencyMs": {"eu": 80}})
    await plane.cluster("lhr", 20, region="eu", network={"latencyMs": {"us": 80}})
    await plane.seen("dfw", "lhr")
    body = {"name": "r2", "replicas": 8, "resources": {"cpu": 0.5, "memory": 1},
            "placement": {"users": [{"region": "us", "weight": 3}, {"region": "eu", "weight": 1}],
                          "latencySLOMs": 50}}
    first = placement(await plane.place(body))
    assert first["dfw"] > first.get("lhr", 0), first
    r = await plane.call("PATCH", "/api/v1/bindings/r2", json={"placement": {"users": [
        {"region": "us", "weight": 1}, {"region": "eu", "weight": 3}]}},
        headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def turned() -> dict[str, int] | None:
        got = placement(await plane.status("r2"))
        return got if got.get("lhr", 0) > got.get("dfw", 0) else None

    assert await eventually(turned, 10.0, "r2 divided by the restated shares") == {
        "dfw": first.get("lhr", 0), "lhr": first["dfw"]}
    users = (await plane.status("r2"))["users"]  # /status says which users the decision used
    assert users["source"] == "declared" and {s["region"]: s["weight"] for s in users["sites"]} == {
        "us": 0.25, "eu": 0.75}
