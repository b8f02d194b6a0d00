"""The Migrations view and the What-if view's report upload in Chromium, asserted against the API
(and, for the upload, against the files given) and checked with axe-core.

* Migrations: a MigrationPlan moving a one-replica Deployment (``data: None``) between two sims runs
  to its end; the view shows its phase, one timeline entry per condition the API has (in the order
  the plan runs them), how the data moved and the lost writes as the plan measured them; a CachePlan
  for a Dataset shows its copy, reads, size and phase as the API has them; the Migration decision
  records are in the timeline.
* Cluster: the page's Decisions section lists what ``GET /api/v1/decisions?kind=Cluster`` has.
* What-if: two ``drods simulate`` report folders (``summary.json`` + PNG plots) are uploaded and shown
  side by side, each figure as the file has it, each plot as an image; a folder without
  ``summary.json`` is refused with an alert."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.members_e2e.conftest import SIMS, Env, deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, cleanup, placement, policy, running
from tests.ui_e2e.conftest import Browse, shot
from tests.ui_e2e.test_views import accessible

GROUP = "/apis/multicluster.io/v1alpha1"
PLANS = f"{GROUP}/namespaces/default/migrationplans"
CACHES = f"{GROUP}/namespaces/default/cacheplans"
DATASETS = f"{GROUP}/namespaces/default/datasets"
MOVER = "mover"
ENDED = ("Succeeded", "RolledBack", "Failed")
PHASE_ORDER = ["TargetPrepared", "DataCopied", "CaughtUp", "TrafficSwitched", "SourceRetired", "RolledBack", "Failed"]
# A 1×1 PNG: what `drods simulate` writes is a PNG; its pixels do not matter here.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
                       "AAAABJRU5ErkJggg==")


@pytest.fixture(scope="module")
def moved(env: Env) -> Iterator[dict[str, Any]]:
    """A one-replica Deployment moved by a MigrationPlan (to its end), and a CachePlan for a Dataset."""
    env.create(RPP, policy(MOVER, MOVER))
    env.create(deploy_path(), deployment(MOVER, 1))
    b = wait_for(lambda: running(env, MOVER), 30, f"{MOVER} Running")
    source = next(iter(placement(b)))
    target = next(c for c in sorted(SIMS) if c != source)
    plan = {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan", "metadata": {"name": "mover-move"},
            "spec": {"workloadRef": {"kind": "Deployment", "name": MOVER}, "sourceCluster": source,
                     "targetCluster": target, "data": "None", "trafficDrainSeconds": 0}}
    env.create(PLANS, plan)
    env.create(DATASETS, {"apiVersion": "multicluster.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "logs"},
                          "spec": {"sizeGiB": 2.0, "locations": [{"cluster": source, "kind": "Primary"}]}})
    env.create(CACHES, {"apiVersion": "multicluster.io/v1alpha1", "kind": "CachePlan",
                        "metadata": {"name": "logs-near"},
                        "spec": {"dataset": "logs", "cluster": target, "sourceCluster": source,
                                 "readGiBPerHour": 80.0, "transferCostPerHour": 1.6, "reason": "hot reads",
                                 "approved": True}})
    st = wait_for(lambda: s if (s := (env.http.get(f"{PLANS}/mover-move").json().get("status") or {})).get("phase")
                  in ENDED else None, 60, "the plan ended")
    yield st
    for path in (f"{PLANS}/mover-move", f"{CACHES}/logs-near", f"{DATASETS}/logs"):
        env.http.delete(path)
    cleanup(env, MOVER)


@pytest.fixture(scope="module")
def page(browse: Browse) -> Iterator[Any]:
    p = browse.login("admin")
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    assert not errors, errors  # a CSP violation or a script error fails the module
    p.context.close()


def _open(page: Any, hash_: str, heading: str) -> None:
    page.goto(f"{page.url.split('#')[0]}#/{hash_}")
    page.get_by_role("heading", name=heading, exact=True).wait_for()


def test_migrations_view_shows_each_plans_phases_data_and_lost_writes_as_the_api_has_them(
        page: Any, env: Env, moved: dict[str, Any]) -> None:
    _open(page, "migrations", "Migrations")
    plans = page.get_by_test_id("migrationplans")
    row = plans.locator("tr[data-name='mover-move']")
    timeline = plans.locator("tr[data-timeline='mover-move']")
    timeline.locator("ol.phases li").first.wait_for()
    st = env.http.get(f"{PLANS}/mover-move").json()["status"]
    wait_for(lambda: st["phase"] in row.inner_text(), 10, "the view at the API's phase")
    shown = [li.get_attribute("data-phase") for li in timeline.locator("ol.phases li").all()]
    want = [t for t in PHASE_ORDER if t in {c["type"] for c in st["conditions"]}]
    assert shown == want, (shown, st["conditions"])
    if st["phase"] == "Succeeded":
        assert timeline.locator("li[data-phase='SourceRetired']").inner_text().startswith("SourceRetired: done")
        assert timeline.locator("svg.gantt rect.bar.ok").count() == len(want)  # one bar per phase, each done
        assert row.get_by_test_id("data").inner_text() == "none (the plan says data: None)"
    lost = (st.get("data") or {}).get("lostWrites")
    assert row.get_by_test_id("lost").inner_text() == (
        f"{lost} (measured by {st['data']['lostWritesMeasuredBy']})" if lost is not None
        else "not measured" if (st.get("data") or {}).get("lostWritesMeasuredBy") == "none" else "—")
    assert f"{st['sourceCluster']} → {st['targetCluster']}" in row.inner_text()
    cache = page.get_by_test_id("cacheplans").locator("tr[data-name='logs-near']")
    cache.wait_for()
    cp = env.http.get(f"{CACHES}/logs-near").json()
    cells = cache.locator("td").all_inner_texts()
    assert cells[:3] == ["logs", f"{cp['spec']['sourceCluster']} → {cp['spec']['cluster']}", "80"], cells

    def phase_matches() -> bool:
        phase = (env.http.get(f"{CACHES}/logs-near").json().get("status") or {}).get("phase") or "Pending"
        return cache.locator("td").nth(5).inner_text().startswith(phase)

    wait_for(phase_matches, 10, "the cache plan's phase as the API has it")
    api = env.http.get("/api/v1/decisions", params={"type": "Migration", "name": MOVER, "since": "1h"}).json()["items"]
    assert api, "the plan's start and end are decision records"
    page.locator("[data-testid=timeline] tr[data-type='Migration']").first.wait_for()
    assert page.locator("[data-testid=timeline] tr[data-type='Migration']").count() >= len(api)
    accessible(page, "migrations")
    shot(page, "view-migrations")


def test_the_cluster_page_lists_the_decisions_about_the_cluster_as_the_api_has_them(page: Any, env: Env) -> None:
    name = sorted(SIMS)[0]
    _open(page, f"clusters/{name}", name)
    box = page.get_by_test_id("cluster-decisions")
    api = env.http.get("/api/v1/decisions", params={"kind": "Cluster", "name": name, "since": "7d"}).json()["items"]
    if api:
        box.locator("tr[data-type]").first.wait_for()
        assert box.locator("tr[data-type]").count() == len(api)
        assert [r.get_attribute("data-type") for r in box.locator("tr[data-type]").all()] == [d["type"] for d in api]
    else:
        box.get_by_test_id("no-decisions").wait_for()
    accessible(page, "cluster")


def _report(root: Path, name: str, seed: int, policies: dict[str, dict[str, float]]) -> Path:
    """A folder as ``drods simulate --out`` leaves it: summary.json and a plot."""
    folder = root / name
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"scenario": name, "seed": seed, "policies": policies}))
    (folder / "waterlevel.png").write_bytes(PNG)
    return folder


def test_whatif_shows_two_uploaded_simulation_reports_side_by_side(page: Any, tmp_path: Path) -> None:
    _open(page, "whatif", "What-if")
    a = {"drods": {"p95LatencyMs": 41.5, "costPerHour": 12.25}, "spread": {"p95LatencyMs": 63.0, "costPerHour": 10.5}}
    b = {"drods": {"p95LatencyMs": 38.0, "costPerHour": 13.0}}
    page.get_by_label("Report A (a drods simulate --out folder)").set_input_files(_report(tmp_path, "diurnal", 7, a))
    page.get_by_label("Report B (a drods simulate --out folder)").set_input_files(_report(tmp_path, "burst", 9, b))
    reports = page.get_by_test_id("reports").get_by_test_id("report")
    wait_for(lambda: reports.count() == 2, 10, "both reports shown")
    for i, (title, scenario, seed, policies) in enumerate((("A", "diurnal", 7, a), ("B", "burst", 9, b))):
        rep = reports.nth(i)
        assert rep.locator("h3").inner_text() == f"{title}: {scenario} (seed {seed})"
        assert rep.locator("thead th").all_inner_texts() == ["Figure", *policies]
        for metric in ("p95LatencyMs", "costPerHour"):
            cells = rep.locator(f"tbody tr:has(th:text-is('{metric}')) td").all_inner_texts()
            assert [float(c.replace(",", "")) for c in cells] == [policies[p][metric] for p in policies]
        img = rep.locator("img.plot")
        assert img.get_attribute("alt") == f"{title}: waterlevel.png"
        assert img.evaluate("i => i.complete && i.naturalWidth") == 1  # the PNG decoded under the CSP
    boxes = [reports.nth(i).bounding_box() for i in range(2)]
    assert boxes[0]["x"] < boxes[1]["x"] and abs(boxes[0]["y"] - boxes[1]["y"]) < 2  # side by side
    accessible(page, "whatif reports")
    shot(page, "view-whatif-reports")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "plot.png").write_bytes(PNG)
    page.get_by_label("Report B (a drods simulate --out folder)").set_input_files(tmp_path / "bare")
    alert = page.get_by_test_id("reports").get_by_role("alert")
    alert.wait_for()
    assert "summary.json" in alert.inner_text() and reports.count() == 1
