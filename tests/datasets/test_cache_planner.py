"""F4: Dataset hotness from access reports (blend and decay) and the cache planner over a real store:
hot reads from a cluster without a copy → a CachePlan; approved → a Cache location; cooled → gone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from drods.controllers.cache_copy import JOB, copy_run
from drods.controllers.cache_planner import CachePlanner, CachePlannerSettings, Links, plan_name, wanted
from drods.model.cluster import ClusterSpec, CostModel, NetworkProfile
from drods.model.dataset_access import DatasetAccessReport, hotness, merge_access
from drods.model.keys import DATASET_ACCESS_KEY
from drods.model.kinds import BINDING, CACHE_PLAN, DATASET
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.scheduler.snapshot import Snapshot
from drods.store import Store

HOME = {"cluster": "home", "kind": "Primary"}


def report(gib: float, cluster: str = "far", name: str = "clicks") -> DatasetAccessReport:
    return DatasetAccessReport.model_validate({"reads": [{"dataset": {"namespace": "ml", "name": name},
                                                          "cluster": cluster, "readGiBPerHour": gib}]})


def test_hotness_blends_and_decays() -> None:
    doc = merge_access(None, report(100), now=0.0, half_life_s=100.0)
    doc = merge_access(doc, report(300), now=100.0, half_life_s=100.0)  # one half-life later: equal weights
    assert hotness(doc, 100.0) == {"ml/clicks": {"far": pytest.approx(200.0)}}
    assert hotness(doc, 300.0)["ml/clicks"]["far"] == pytest.approx(50.0)  # two half-lives later
    assert hotness(doc, 100.0 + 100.0 * 20) == {}  # cooled below 0.01 GiB/h: gone


def test_wanted_plans_only_where_no_copy_is() -> None:
    ds = {"ml/clicks": {"metadata": {"name": "clicks", "namespace": "ml"},
                        "spec": {"locations": [{"cluster": "home", "kind": "Primary"}]}}}
    hot = {"ml/clicks": {"home": 500.0, "far": 80.0, "cold": 10.0}, "ml/unknown": {"far": 900.0}}
    want = wanted(ds, hot, 50.0, far_cost=1.0)
    assert list(want) == ["ml/clicks-far"]
    spec = want["ml/clicks-far"].spec()
    # unknown clusters: the default egress 0.09 over the reference link → 80 × 0.09 = 7.2 per hour
    assert spec["sourceCluster"] == "home" and spec["readGiBPerHour"] == 80.0
    assert spec["transferCostPerHour"] == pytest.approx(7.2)
    assert spec["reason"] == ("80.0 GiB/h of clicks read on far: 7.20/h to move from the nearest copy on home "
                              "over a link of unknown bandwidth, above farCostPerHour 1")
    assert wanted(ds, hot, 50.0, far_cost=7.3) == {}  # not far enough to pay for a copy
    assert plan_name("Big_Data", "eu.1") == "big-data-eu-1"


def links() -> Links:
    """home (eu, egress 0.02, 10 Gbps) and backup (us, egress 0.12, 1 Gbps) hold copies; eu-2 sits
    beside home over a measured 10 Gbps link, ap-1 is far from both."""
    snap = Snapshot()
    snap.upsert_cluster("home", {}, ClusterSpec(region="eu", cost=CostModel(egressGiB=0.02),
                                                network=NetworkProfile(bandwidthMbps=10000)), True, None)
    snap.upsert_cluster("backup", {}, ClusterSpec(region="us", cost=CostModel(egressGiB=0.12),
                                                  network=NetworkProfile(bandwidthMbps=1000)), True, None)
    snap.upsert_cluster("eu-2", {}, ClusterSpec(region="eu", network=NetworkProfile(bandwidthMbps=1000)), True, None)
    snap.upsert_cluster("ap-1", {}, ClusterSpec(region="ap", network=NetworkProfile(bandwidthMbps=200)), True, None)
    snap.set_network_pair("home", "eu-2", None, 10000.0)
    return Links(snap)


def test_far_is_a_transfer_cost_above_the_threshold() -> None:
    ds = {"ml/clicks": {"metadata": {"name": "clicks", "namespace": "ml"},
                        "spec": {"locations": [{"cluster": "home", "kind": "Primary"},
                                               {"cluster": "backup", "kind": "Replica"}]}}}
    hot = {"ml/clicks": {"eu-2": 100.0, "ap-1": 100.0}}
    want = wanted(ds, hot, 50.0, links(), far_cost=1.0)
    # eu-2 from home over the measured 10 Gbps: 100 × 0.02 × 1000/10000 = 0.2 per hour → near, no plan
    # ap-1 from home over min(10000, 200) = 200 Mbps: 100 × 0.02 × 5 = 10; from backup 100 × 0.12 × 5
    # = 60 → home is the nearest copy, and 10 > 1 → a plan carrying the figure
    assert list(want) == ["ml/clicks-ap-1"]
    spec = want["ml/clicks-ap-1"].spec()
    assert spec["sourceCluster"] == "home" and spec["transferCostPerHour"] == pytest.approx(10.0)
    assert "10.00/h to move from the nearest copy on home over a 200 Mbps link" in spec["reason"]
    assert Links().transfers(["x"], ["x"])["x"].cost == 0.0  # a copy is never far from itself
    tr = links().transfers(["home", "backup"], ["eu-2"])["eu-2"]
    assert (tr.source, tr.bandwidth, tr.cost) == ("home", 10000.0, pytest.approx(0.002))


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_planner_proposes_applies_and_withdraws(store: Store, tmp_path: Path) -> None:
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    await registry.create(DATASET, {"metadata": {"name": "clicks", "namespace": "ml"}, "spec": {
        "sizeGiB": 800, "locations": [{"cluster": "home", "kind": "Primary"}]}}, "ml")
    await registry.create(DATASET, {"metadata": {"name": "logs", "namespace": "ml"}, "spec": {
        "sizeGiB": 50, "locations": [{"cluster": "home", "kind": "Primary"}]}}, "ml")
    now = [1000.0]
    planner = CachePlanner(store, registry, CachePlannerSettings(hotGiBPerHour=50), clock=lambda: now[0])

    async def reads(*items: tuple[str, str, float]) -> None:
        body = DatasetAccessReport.model_validate({"reads": [
            {"dataset": {"namespace": "ml", "name": n}, "cluster": c, "readGiBPerHour": g} for n, c, g in items]})
        kv = await store.get(DATASET_ACCESS_KEY)
        doc = merge_access(json.loads(kv.value) if kv else None, body, now[0])
        await store.put(DATASET_ACCESS_KEY, json.dumps(doc).encode())

    await reads(("clicks", "far", 120.0), ("clicks", "home", 900.0), ("logs", "far", 20.0))
    await planner.reconcile()
    plans, _ = await registry.list(CACHE_PLAN, "ml")
    assert [p["metadata"]["name"] for p in plans] == ["clicks-far"]
    assert plans[0]["status"]["phase"] == "Proposed" and not plans[0]["spec"].get("approved")
    # the proposal says how much it would place: the Dataset's declared size
    assert plans[0]["status"]["sizeGiB"] == 800 and plans[0]["status"]["bytes"] == 800 * 2**30
    # X1: the proposal is a decision record (one, however often the planner runs)
    decided = await planner.decisions.query(0, time.time() + 60, 10)
    assert [(d["type"], d["subject"]["name"], d["outcome"]["cachePlan"]) for d in decided.items] == \
        [("CachePlan", "clicks", "ml/clicks-far")]
    await planner.reconcile()  # idempotent
    assert len((await registry.list(CACHE_PLAN, "ml"))[0]) == 1
    assert len((await planner.decisions.query(0, time.time() + 60, 10)).items) == 1
    clicks = await registry.get(DATASET, "clicks", "ml")
    assert clicks["status"]["hotnessGiBPerHour"] == pytest.approx(1020.0)
    assert clicks["status"]["readsByCluster"] == {"far": 120.0, "home": 900.0}
    # approved: a copy Job pinned to far, pulling from home; no location until the copy verifies
    plan = plans[0]
    await registry.update(CACHE_PLAN, {**plan, "spec": {**plan["spec"], "approved": True}}, "ml")
    await planner.reconcile()
    await planner.reconcile()  # a second pass starts nothing twice
    plan = await registry.get(CACHE_PLAN, "clicks-far", "ml")
    assert plan["status"]["phase"] == "Copying" and plan["status"]["copySource"] == "home"
    job_name, binding_name = copy_run(plan)
    job = await registry.get(JOB, job_name, "ml")
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COPY_DATASET"] == "ml/clicks" and env["COPY_SOURCE_CLUSTER"] == "home"
    assert env["COPY_SIZE_BYTES"] == str(800 * 2**30)
    binding = await registry.get(BINDING, binding_name)
    assert binding["spec"]["targetClusters"] == ["far"]
    assert {"cluster": "far", "kind": "Cache"} not in (await registry.get(DATASET, "clicks", "ml"))["spec"]["locations"]
    # the copy Job completes and reports: Ready, the location, bytes, rate and cost in status and the journal
    size = 800 * 2**30
    report = {"bytes": size, "seconds": 6400.0, "bytesPerSecond": size // 6400, "checksum": "abc",
              "sourceChecksum": "abc"}
    await registry.update_status(BINDING, binding_name, {"clusters": [{"cluster": "far", "complete": True,
                                                                        "report": report}]})
    await planner.reconcile()
    ds = await registry.get(DATASET, "clicks", "ml")
    assert {"cluster": "far", "kind": "Cache"} in ds["spec"]["locations"]
    st = (await registry.get(CACHE_PLAN, "clicks-far", "ml"))["status"]
    assert st["phase"] == "Ready" and st["bytesMoved"] == size and st["durationSeconds"] == 6400.0
    # 800 GiB × home's default egress 0.09 over the reference link
    assert st["transferCost"] == pytest.approx(72.0)
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"Copied": "True", "Verified": "True", "Ready": "True"}
    decided = await planner.decisions.query(0, time.time() + 60, 10)
    done = [d for d in decided.items if d["outcome"].get("phase") == "Ready"]
    assert len(done) == 1 and done[0]["outcome"]["bytesMoved"] == size
    assert done[0]["trigger"]["reason"] == "CopyVerified"
    # logs heats up on far (an hour later: ½·20 + ½·200 = 110 GiB/h), then cools (4 half-lives) before
    # anyone approves it: proposed, then withdrawn
    now[0] += 3600.0
    await reads(("logs", "far", 200.0))
    await planner.reconcile()
    assert await registry.try_get(CACHE_PLAN, "logs-far", "ml") is not None
    now[0] += 4 * 3600.0
    await planner.reconcile()
    assert await registry.try_get(CACHE_PLAN, "logs-far", "ml") is None
    assert await registry.try_get(CACHE_PLAN, "clicks-far", "ml") is not None  # ready plans stay
    # withdrawn (approved: false): the copy Job and the location go
    plan = await registry.get(CACHE_PLAN, "clicks-far", "ml")
    await registry.update(CACHE_PLAN, {**plan, "spec": {**plan["spec"], "approved": False}}, "ml")
    await planner.reconcile()
    assert (await registry.get(CACHE_PLAN, "clicks-far", "ml"))["status"]["phase"] == "Withdrawn"
    assert await registry.try_get(JOB, job_name, "ml") is None
    assert await registry.try_get(BINDING, binding_name) is None
    assert (await registry.get(DATASET, "clicks", "ml"))["spec"]["locations"] == [HOME]


async def test_a_copy_that_fails_or_does_not_verify_adds_no_location(store: Store, tmp_path: Path) -> None:
    """A failed copy Job, or one whose checksum differs from its source's, ends Failed with no location;
    deleting a plan whose copy ran removes the copy and its location."""
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    planner = CachePlanner(store, registry, CachePlannerSettings(hotGiBPerHour=50), clock=lambda: 1000.0)
    for name in ("a", "b", "c"):
        await registry.create(DATASET, {"metadata": {"name": name, "namespace": "ml"}, "spec": {
            "sizeGiB": 1, "locations": [{"cluster": "home", "kind": "Primary"}]}}, "ml")
        await registry.create(CACHE_PLAN, {"metadata": {"name": name, "namespace": "ml"}, "spec": {
            "dataset": name, "cluster": "far", "approved": True}}, "ml")
    await planner.reconcile()
    reports = {"a": {"cluster": "far", "conditions": [{"type": "Failed", "status": "True", "message": "rsync: 23"}]},
               "b": {"cluster": "far", "complete": True, "report": {"bytes": 9, "checksum": "x",
                                                                  "sourceChecksum": "y"}},
               "c": {"cluster": "far", "complete": True, "report": {"bytes": 2**30, "checksum": "z",
                                                                  "sourceChecksum": "z"}}}
    for name, entry in reports.items():
        _, b = copy_run(await registry.get(CACHE_PLAN, name, "ml"))
        await registry.update_status(BINDING, b, {"clusters": [entry]})
    await planner.reconcile()
    a, b, c = [await registry.get(CACHE_PLAN, n, "ml") for n in "abc"]
    assert a["status"]["phase"] == "Failed" and "rsync: 23" in a["status"]["message"]
    assert b["status"]["phase"] == "Failed" and "checksum x differs from the source's y" in b["status"]["message"]
    assert c["status"]["phase"] == "Ready"
    for name in "ab":
        assert len((await registry.get(DATASET, name, "ml"))["spec"]["locations"]) == 1
    assert {"cluster": "far", "kind": "Cache"} in (await registry.get(DATASET, "c", "ml"))["spec"]["locations"]
    await registry.delete(CACHE_PLAN, "c", "ml")
    await planner.reconcile()
    assert (await registry.get(DATASET, "c", "ml"))["spec"]["locations"] == [HOME]
    assert await registry.try_get(JOB, copy_run(c)[0], "ml") is None


async def test_a_copy_that_never_ends_fails_after_the_timeout(store: Store, tmp_path: Path) -> None:
    """A copy whose cluster went away (its Job never reports) fails the plan after copyTimeoutSeconds and
    its Job is removed: it blocks nobody, and the Dataset never got the location."""
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    now = [1000.0]
    planner = CachePlanner(store, registry, CachePlannerSettings(copyTimeoutSeconds=60), clock=lambda: now[0])
    await registry.create(DATASET, {"metadata": {"name": "d", "namespace": "ml"}, "spec": {
        "sizeGiB": 1, "locations": [HOME]}}, "ml")
    await registry.create(CACHE_PLAN, {"metadata": {"name": "d", "namespace": "ml"}, "spec": {
        "dataset": "d", "cluster": "gone", "approved": True}}, "ml")
    await planner.reconcile()
    now[0] += 59
    await planner.reconcile()
    plan = await registry.get(CACHE_PLAN, "d", "ml")
    assert plan["status"]["phase"] == "Copying"
    now[0] += 2
    await planner.reconcile()
    plan = await registry.get(CACHE_PLAN, "d", "ml")
    assert plan["status"]["phase"] == "Failed" and "within 60s" in plan["status"]["message"]
    assert await registry.try_get(JOB, copy_run(plan)[0], "ml") is None
    assert (await registry.get(DATASET, "d", "ml"))["spec"]["locations"] == [HOME]
