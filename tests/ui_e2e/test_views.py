"""The dashboard's decision views in Chromium, each asserted against the API's answer and checked
with axe-core (no serious or critical violation): Workload (why not + timeline), Topology,
Steering, Autoscaling, What-if and the Audit log's filters. One signed-in page for the module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drods.model.work import label_value
from tests.members_e2e.conftest import SIMS, Env, deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, binding_of, cleanup, policy, running
from tests.ui_e2e.conftest import Browse, shot

ROOT = Path(__file__).resolve().parents[2]
AXE = (Path(__file__).resolve().parent / "vendor" / "axe.min.js").read_text()
GROUP = "/apis/multicluster.io/v1alpha1"
SOLO = "solo"
VIDEO = "video"
LONG = "another-very-long-deployment-name-for-topology"  # its binding's name is 65 characters
SERIOUS = ("serious", "critical")
CONSOLE_ERRORS: list[str] = []  # the page's, checked when the module ends; a test drops those it caused


def expected_console_errors(text: str) -> None:
    """Drop the console errors containing ``text`` (the browser logs every refused call it made)."""
    CONSOLE_ERRORS[:] = [e for e in CONSOLE_ERRORS if text not in e]


def accessible(page: Any, view: str, widths: tuple[int, ...] = (1280, 375)) -> None:
    """axe-core evaluated through the DevTools protocol (the page's CSP is untouched and still enforced),
    on a laptop and on a phone: a table that fits at 1280 px scrolls at 375 px, and a scrolling box a
    keyboard cannot reach is axe's serious scrollable-region-focusable."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(f"() => {{ {AXE}\n}}")
    size = page.viewport_size
    try:
        for width in widths:
            page.set_viewport_size({"width": width, "height": 800})
            result = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                                   ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
                                   " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))")
            bad = [v for v in result if v["impact"] in SERIOUS]
            assert not bad, f"{view} at {width}px: {bad}"
    finally:
        page.set_viewport_size(size)


@pytest.fixture(scope="module")
def world(env: Env) -> Iterator[Env]:
    """A one-replica workload (two feasible clusters get nothing) with a FederatedHPA, and the CATS
    example: the video service, its registration and a latency measurement."""
    env.create(RPP, policy(SOLO, SOLO))
    env.create(deploy_path(), deployment(SOLO, 1))
    env.create(RPP, policy(LONG, LONG))
    env.create(deploy_path(), deployment(LONG, 1))
    docs = list(yaml.safe_load_all((ROOT / "examples/steering/video.yaml").read_text()))
    for d in docs:
        env.create(deploy_path() if d["kind"] == "Deployment" else RPP, d)
    reg = yaml.safe_load((ROOT / "examples/steering/registration.yaml").read_text())
    env.create(f"{GROUP}/namespaces/default/serviceregistrations", reg)
    r = env.http.put("/api/v1/network/status", json={"measurements": [
        {"from": "DFW", "to": "aws-dfw", "delayMs": 12.5}, {"from": "LHR", "to": "azure-lhr", "delayMs": 9.0}]})
    assert r.status_code == 200, r.text
    env.create(f"{GROUP}/namespaces/default/federatedhpas", {
        "apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA", "metadata": {"name": SOLO},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": SOLO},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}})
    wait_for(lambda: running(env, SOLO), 30, "solo Running")
    wait_for(lambda: running(env, VIDEO), 30, "video Running")
    wait_for(lambda: running(env, LONG), 30, f"{LONG} Running")
    yield env
    env.http.delete(f"{GROUP}/namespaces/default/federatedhpas/{SOLO}")
    env.http.delete(f"{GROUP}/namespaces/default/serviceregistrations/{reg['metadata']['name']}")
    cleanup(env, SOLO)
    cleanup(env, VIDEO)
    cleanup(env, LONG)


@pytest.fixture(scope="module")
def page(browse: Browse, world: Env) -> Iterator[Any]:
    p = browse.login("admin")
    errors = CONSOLE_ERRORS
    errors.clear()
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    assert not errors, errors  # a CSP violation or a script error anywhere fails the module
    p.context.close()


def _open(page: Any, hash_: str, heading: str) -> None:
    page.goto(f"{page.url.split('#')[0]}#/{hash_}")
    page.get_by_role("heading", name=heading, exact=True).wait_for()


def test_workload_shows_why_not_for_each_feasible_cluster_and_the_timeline(page: Any, world: Env) -> None:
    q = {"kind": "Deployment", "namespace": "default", "name": SOLO}
    placement = wait_for(lambda: world.http.get("/api/v1/decisions", params={**q, "type": "Placement"})
                         .json()["items"] or None, 15, "solo's placement decision")[-1]
    unchosen = sorted(o["name"] for o in placement["options"] if o["feasible"] and not o["chosen"])
    assert len(unchosen) == 2
    _open(page, f"workloads/{binding_of(SOLO)}", binding_of(SOLO))
    why_not = page.get_by_test_id("why-not")
    why_not.locator("tbody tr").first.wait_for()
    rows = why_not.locator("tbody tr")
    assert sorted(rows.nth(i).get_attribute("data-cluster") for i in range(rows.count())) == unchosen
    ru = placement["runnerUp"]
    text = why_not.locator(f"tr[data-cluster='{ru['name']}']").inner_text()
    assert any(f"{how} {ru['against']}" in text for how in ("below", "above", "tied with")), text
    assert ru["name"] in page.get_by_test_id("runner-up").inner_text()
    adjuster = page.get_by_test_id("adjuster").inner_text()
    level = round(placement["inputs"]["adjuster"]["fleetWaterLevel"] * 100)
    assert f"at a fleet water level of {level}%" in adjuster and "busy" not in adjuster  # the sentence fits its figure
    timeline = page.get_by_test_id("timeline")
    timeline.locator("tbody tr").first.wait_for()
    api = world.http.get("/api/v1/decisions", params={**q, "since": "7d", "limit": 200}).json()["items"]
    assert [timeline.locator("tbody tr").nth(i).get_attribute("data-type") for i in range(len(api))] == \
        [r["type"] for r in api]
    accessible(page, "workload")
    shot(page, "view-workload")


def test_a_decision_for_users_shows_where_they_are_and_the_latency_to_each_chosen_cluster(page: Any,
                                                                                         world: Env) -> None:
    """`drods explain` said it; the workload page did not (it showed the division only)."""
    body = {"name": "nearby", "replicas": 1, "resources": {"cpu": 0.1, "memory": 0.1},
            "placement": {"users": [{"region": "eu-west", "weight": 3}, {"region": "us-east", "weight": 1}],
                          "latencySLOMs": 500}}
    r = world.http.post("/api/v1/bindings", json=body)
    assert r.status_code == 202, r.text  # accepted, decided by the scheduler
    try:
        wait_for(lambda: world.http.get("/api/v1/history/schedules", params={"binding": "nearby"}).json()["items"],
                 15, "nearby decided")
        _open(page, "workloads/nearby", "nearby")
        users = page.get_by_test_id("users")
        users.wait_for()
        text = users.inner_text()
        assert text.startswith("declared: eu-west 75%, us-east 25%; SLO 500 ms; latency "), text
        assert "undefined" not in text and "NaN" not in text
    finally:
        world.http.delete("/api/v1/bindings/nearby")


def test_topology_draws_binding_works_and_member_objects_as_the_api_lists_them(page: Any, world: Env) -> None:
    name = binding_of(SOLO)
    works = world.http.get(f"{GROUP}/works",
                           params={"labelSelector": f"multicluster.io/binding={name}"}).json()["items"]
    assert works
    _open(page, f"topology/{name}", f"Topology of {name}")
    tree = page.get_by_test_id("topology-tree")
    tree.wait_for()
    shown = tree.locator("li[data-cluster]")
    assert sorted(shown.nth(i).get_attribute("data-cluster") for i in range(shown.count())) == \
        sorted(w["spec"]["cluster"] for w in works)
    deploy = tree.locator(f"li[data-object='Deployment/{SOLO}']")
    deploy.first.wait_for()
    assert "ready" in deploy.first.inner_text() or "present" in deploy.first.inner_text()
    assert page.locator("svg.topology").count() == 1
    accessible(page, "topology")
    shot(page, "view-topology")


def test_topology_of_a_binding_whose_name_is_longer_than_a_label_value(page: Any, world: Env) -> None:
    """Its Works carry a hashed label value (drods.model.work.label_value): the page once asked with the
    raw name and showed only "invalid labelSelector … at most 63 alphanumerics"; it selects them by
    ``spec.binding`` now."""
    name = binding_of(LONG)
    assert len(name) > 63
    works = [w for w in world.http.get(f"{GROUP}/works").json()["items"] if w["spec"]["binding"] == name]
    assert works and all(w["metadata"]["labels"]["multicluster.io/binding"] == label_value(name) for w in works)
    _open(page, f"topology/{name}", f"Topology of {name}")
    tree = page.get_by_test_id("topology-tree")
    tree.locator("li[data-cluster]").first.wait_for()
    shown = tree.locator("li[data-cluster]")
    assert sorted(shown.nth(i).get_attribute("data-cluster") for i in range(shown.count())) == \
        sorted(w["spec"]["cluster"] for w in works)
    tree.locator(f"li[data-object='Deployment/{LONG}']").first.wait_for()
    assert page.locator("main [role=alert]").count() == 0
    # a node's text stays inside its box: cut with "…", the whole name in its tooltip
    widths = page.evaluate("""() => [...document.querySelectorAll('svg.topology g')].map((g) => {
        const r = g.querySelector('rect'); const t = g.querySelector('text.node-label');
        return [t.getBBox().x + t.getBBox().width, Number(r.getAttribute('x')) + Number(r.getAttribute('width'))];
    })""")
    assert widths and all(end <= box for end, box in widths), widths
    accessible(page, "topology (long name)")


def test_steering_shows_each_sites_route_with_its_metric_and_the_measured_latency(page: Any, world: Env) -> None:
    route = wait_for(lambda: (world.http.get(f"{GROUP}/serviceroutes/video.example").json().get("spec") or {})
                     .get("routes") or None, 30, "video's routes")
    _open(page, "steering", "Steering")
    section = page.locator("section[data-service='video.example']")
    section.wait_for()
    route = world.http.get(f"{GROUP}/serviceroutes/video.example").json()["spec"]["routes"]
    for r in route:
        for inst in r["instances"]:
            row = section.locator(f"tr[data-site='{r['clientSite']}'][data-cluster='{inst['cluster']}']")
            assert row.count() == 1, (r, inst)
            text = row.inner_text()
            assert ("SLA met" in text) == (inst["metric"] != "MAX") and inst["reason"][:30] in text
    sites = page.get_by_test_id("sites")
    sites.locator("tbody tr").first.wait_for()
    assert "12.5 ms" in sites.inner_text() and page.locator("svg.sites").count() == 1
    # the route change is a decision: its chosen instances are the ones the route has now
    latest = world.http.get("/api/v1/decisions", params={"type": "Route", "name": "video"}).json()["items"][0]
    now = {f"{r['clientSite']} → {i['cluster']}" for r in route for i in r["instances"]}
    assert {o["name"] for o in latest["options"] if o["chosen"]} <= now
    assert latest["trigger"]["reason"] in ("FirstRoutes", "RouteChanged") and latest["summary"]
    accessible(page, "steering")
    shot(page, "view-steering")


def test_steering_shows_a_client_site_with_no_route_and_why(page: Any, world: Env) -> None:
    """A client site no instance serves (here: never measured) was left out of the table silently."""
    reg = f"{GROUP}/namespaces/default/serviceregistrations/video"
    merge = {"Content-Type": "application/merge-patch+json"}
    r = world.http.patch(reg, json={"spec": {"clientSites": ["DFW", "LHR", "NRT"]}}, headers=merge)
    assert r.status_code == 200, r.text
    try:
        message = wait_for(lambda: (m := (world.http.get(reg).json().get("status") or {}).get("message") or "")
                           and "client site NRT" in m and m, 30, "the registration saying why NRT has no route")
        routes = world.http.get(f"{GROUP}/serviceroutes/video.example").json()["spec"]["routes"]
        assert not [i for r in routes if r["clientSite"] == "NRT" for i in r["instances"]]
        _open(page, "steering", "Steering")
        row = page.locator("section[data-service='video.example'] tr[data-site='NRT']")
        row.wait_for()
        why = next(c for c in message.split("; no ") if "client site NRT" in c).removeprefix("no ")
        page.wait_for_function("([sel, why]) => (document.querySelector(sel) || {}).innerText?.includes(why)",
                               arg=["section[data-service='video.example'] tr[data-site='NRT']", why], timeout=15_000)
        text = row.inner_text()
        assert "no instance" in text and "no route" in text, text
        assert "NRT" in page.locator("svg.sites").inner_html()  # on the graph too, unconnected
        accessible(page, "steering (unrouted site)")
    finally:
        world.http.patch(reg, json={"spec": {"clientSites": ["DFW", "LHR"]}}, headers=merge)


def test_autoscaling_shows_each_autoscaler_as_the_api_has_it(page: Any, world: Env) -> None:
    _open(page, "autoscaling", "Autoscaling")
    row = page.get_by_test_id("hpas").locator(f"tr[data-name='{SOLO}']")
    row.wait_for()
    hpa = world.http.get(f"{GROUP}/namespaces/default/federatedhpas/{SOLO}").json()
    st = hpa.get("status") or {}
    cells = [row.locator("td").nth(i).inner_text() for i in range(6)]
    assert cells[0] == f"Deployment default/{SOLO}" and cells[3:5] == ["1", "3"]
    assert cells[1] in (str(st.get("currentReplicas", "—")), "—", "1") and "cpu" in cells[5] and "of 60%" in cells[5]
    # a cron rule that only caps: its bound and that it is suspended are said (it read "→ ?")
    cron = {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
            "metadata": {"name": "cap", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
                                        "name": SOLO},
                     "rules": [{"name": "night", "schedule": "0 22 * * *", "targetMaxReplicas": 2, "suspend": True}]}}
    r = world.http.post("/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/cronfederatedhpas", json=cron)
    assert r.status_code == 201, r.text
    try:
        rule = page.get_by_test_id("crons").locator("tr[data-name='cap'] td").nth(1)
        rule.wait_for()
        assert rule.inner_text() == "night: 0 22 * * * → max 2 (suspended)"
    finally:
        world.http.delete("/apis/autoscaling.karmada.io/v1alpha1/namespaces/default/cronfederatedhpas/cap")
    page.get_by_role("heading", name="Scaling decisions").wait_for()
    # one decision on a chart: its time axis is ten minutes ending at it, not "06:00 … 06:00" with the dot on
    # the left edge
    axis = page.evaluate("""async () => {
        const { lineChart } = await import(new URL("js/charts.js", document.baseURI).href);
        const t = Date.parse("2026-12-06T06:00:00Z");
        const svg = lineChart({ title: "one", series: [{ label: "web", points: [{ t, v: 0.5 }] }] });
        return { labels: [...svg.querySelectorAll("text.axis")].slice(-2).map((e) => e.textContent),
                 dot: Number(svg.querySelector("circle").getAttribute("cx")) };
    }""")
    assert axis["labels"][0] != axis["labels"][1] and axis["dot"] == 640 - 12, axis
    accessible(page, "autoscaling")
    shot(page, "view-autoscaling")


def test_whatif_dry_runs_against_the_live_fleet_as_the_api_does(page: Any, world: Env) -> None:
    _open(page, "whatif", "What-if")
    page.reload()  # opened by its address: the form is drawn before the clusters are listed, then filled
    page.get_by_role("heading", name="What-if", exact=True).wait_for()
    down = sorted(SIMS)[0]
    binding = {"replicas": 2, "resources": {"cpu": 0.5, "memory": 0.5}}
    page.get_by_label("Binding (the body of POST /api/v1/bindings, JSON)").fill(json.dumps(binding))
    page.locator(f"fieldset:has(legend:text('Assume down')) input[value='{down}']").check()
    page.get_by_role("button", name="Dry-run").click()
    result = page.get_by_test_id("whatif-result")
    result.get_by_test_id("explanation").wait_for()
    api = world.http.post("/api/v1/whatif",
                          json={"binding": binding, "changes": [{"cluster": down, "down": True}]}).json()
    lead = result.locator("p.lead").first.inner_text()
    assert lead.startswith(f"{api['phase']}: ") and down not in lead
    for p in api["placement"]:
        assert f"{p['cluster']} ×{p['replicas']}" in lead
    page.get_by_label("Binding (the body of POST /api/v1/bindings, JSON)").fill("{not json")
    page.get_by_role("button", name="Dry-run").click()
    result.get_by_role("alert").wait_for()
    assert "not JSON" in result.get_by_role("alert").inner_text()
    accessible(page, "whatif")
    shot(page, "view-whatif")


def test_an_api_error_names_the_fields_it_refuses(page: Any, world: Env) -> None:
    """It read only "request validation failed (422 VALIDATION_FAILED)", whatever the field."""
    _open(page, "whatif", "What-if")
    label = "Binding (the body of POST /api/v1/bindings, JSON)"
    result = page.get_by_test_id("whatif-result")
    for binding in ({"replicas": -3}, {"replicas": "many"}):
        api = world.http.post("/api/v1/whatif", json={"binding": binding, "changes": []})
        assert api.status_code == 422, api.text
        fields = api.json()["details"]["fields"]
        page.get_by_label(label).fill(json.dumps(binding))
        page.get_by_role("button", name="Dry-run").click()
        listed = result.get_by_role("alert").get_by_test_id("error-fields")
        listed.wait_for()
        text = listed.inner_text()
        assert all(f["field"] in text and f["message"] in text for f in fields), (text, fields)
    # a Kubernetes Status names them in details.causes: the same list under its message
    said = page.evaluate("""async () => {
        const { Session } = await import(new URL("js/api.js", document.baseURI).href);
        const { errorBox } = await import(new URL("js/dom.js", document.baseURI).href);
        try {
            await Session.restore().post("/apis/multicluster.io/v1alpha1/namespaces/default/federatedhpas",
              { apiVersion: "multicluster.io/v1alpha1", kind: "FederatedHPA", metadata: { name: "bad" },
                spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "x" },
                        minReplicas: -1, maxReplicas: "many" } });
            return null;
        } catch (err) {
            const box = errorBox(err);
            return { causes: err.body.details.causes, text: box.innerText || box.textContent,
                     items: box.querySelectorAll("ul.fields li").length };
        }
    }""")
    assert said and said["causes"] and said["items"] == len(said["causes"]), said
    assert all(c["field"] in said["text"] for c in said["causes"]), said
    # a dry-run the browser refuses (a water level over 200%) does not leave the last answer standing
    page.get_by_label(label).fill(json.dumps({"replicas": 1}))
    page.get_by_role("button", name="Dry-run").click()
    result.locator("p.lead").first.wait_for()
    page.get_by_label("Water level (%)").fill("500")
    page.get_by_role("button", name="Dry-run").click()
    result.get_by_role("alert").get_by_text("Not dry-run").wait_for()
    assert result.locator("p.lead").count() == 0
    page.get_by_label("Water level (%)").fill("")
    expected_console_errors("status of 422")


def test_audit_filters_as_the_api_does(page: Any, world: Env) -> None:
    _open(page, "audit", "Audit log")
    page.get_by_label("Kind").fill("ServiceRegistration")
    page.get_by_role("button", name="Filter").click()
    table = page.get_by_test_id("audit")
    table.wait_for()
    api = world.http.get("/api/v1/audit", params={"kind": "ServiceRegistration", "limit": 500}).json()["items"]
    assert api
    # the unfiltered table stays until the filtered answer arrives: wait for it (rows read in one
    # read in the page, as a live update may redraw the table between row reads)
    page.wait_for_function(
        """() => { const rows = [...document.querySelectorAll('[data-testid="audit"] tbody tr')];
                   return rows.length > 0
                          && rows.every(r => r.innerText.toLowerCase().includes('serviceregistration')); }""",
        timeout=15_000)
    changes = page.locator('[data-testid="audit"] tbody tr td:last-child').first.inner_text()
    assert "ServiceRegistration/" in changes, changes  # what the request changed, beside its result
    page.get_by_label("Kind").fill("NoSuchKind")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("No change matches.").wait_for()
    # a window that ends before it starts is said to be one, not "No change matches."
    page.get_by_label("From").fill("2026-01-02T10:00")
    page.get_by_label("To").fill("2026-01-01T10:00")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("alert").get_by_text("“From” is after “To”").wait_for()
    page.get_by_label("From").fill("")
    page.get_by_label("To").fill("")
    page.get_by_label("Kind").fill("")
    page.get_by_role("button", name="Filter").click()
    page.locator('[data-testid="audit"] tbody tr').first.wait_for()
    accessible(page, "audit")
    shot(page, "view-audit")


def test_fleet_clusters_cluster_and_policies_views_are_accessible(page: Any) -> None:
    _open(page, "fleet", "Fleet")
    page.locator(".card").first.wait_for()
    accessible(page, "fleet")
    _open(page, "clusters", "Clusters")
    page.locator("main table.data tbody tr").first.wait_for()
    accessible(page, "clusters")
    name = sorted(SIMS)[0]
    _open(page, f"clusters/{name}", name)
    page.get_by_role("region", name="Conditions").wait_for()
    page.locator("svg.chart").first.wait_for()
    accessible(page, "cluster")
    page.set_viewport_size({"width": 375, "height": 800})
    try:  # the conditions scroll in their own box: the page itself does not scroll sideways
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})
    _open(page, "policies", "Policies")
    page.locator(f"main tr[data-name='{SOLO}']").wait_for()
    accessible(page, "policies")
