"""The dashboard as a user drives it: sign in, read the fleet, ask why a workload is where it is,
drain a cluster and watch its workloads leave, and what a viewer may not do."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from tests.members_e2e.conftest import SIMS, Env, deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, binding_of, cleanup, placement, policy, running
from tests.ui_e2e.conftest import Browse, shot

PCT = re.compile(r"^\d{1,3}%$")


class Console:
    """Errors the page logged (a CSP violation or a script error fails the test)."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))


def realtime_pct(env: Env) -> dict[str, str]:
    body = env.http.get("/api/v1/monitor/realtime").json()
    return {c: f"{round(d['waterLevel'] * 100)}%" for c, d in body["clusters"].items() if d["waterLevel"] is not None}


@pytest.fixture(scope="module")
def web(env: Env) -> Iterator[str]:
    """A workload restricted to two of the three clusters, placed and running."""
    env.create(RPP, policy("web", "web", ["aws-dfw", "gcp-sin"]))
    env.create(deploy_path(), deployment("web", 4))
    b = wait_for(lambda: running(env, "web"), 30, "web Running")
    assert set(placement(b)) == {"aws-dfw", "gcp-sin"}, placement(b)
    yield binding_of("web")
    for name in SIMS:
        env.http.patch(f"/api/v1/clusters/{name}", json={"unschedulable": False},
                       headers={"Content-Type": "application/merge-patch+json"})
    cleanup(env, "web")


def test_ui_is_public_static_content_and_the_api_still_needs_a_token(env: Env) -> None:
    anonymous = httpx.Client(base_url=env.server.url, verify=env.server.verify, timeout=10)
    with anonymous:
        page = anonymous.get("/ui/")
        assert page.status_code == 200 and 'type="module"' in page.text
        assert anonymous.get("/ui", follow_redirects=False).status_code in (307, 308)
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert anonymous.get("/ui/js/main.js").headers["content-type"].startswith(("text/javascript",
                                                                                   "application/javascript"))
        assert anonymous.get("/api/v1/monitor/realtime").status_code == 401


def test_sign_in_and_see_every_cluster_with_its_water_level(browse: Browse, env: Env) -> None:
    context = browse.browser.new_context(viewport={"width": 1280, "height": 800},
                                         ignore_https_errors=env.server.cert is not None)
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    page.goto(f"{env.server.url}/ui")
    token_field = page.get_by_label("Access token")
    assert token_field.get_attribute("type") == "password"
    # Not a token at all, then a well-formed token this server did not sign: both refused, clearly.
    token_field.fill("not-a-token")
    page.keyboard.press("Enter")
    assert "not a DRO-DS token" in page.get_by_role("alert").inner_text()
    forged = jwt.encode({"sub": "mallory", "role": "admin", "iat": int(time.time()), "iss": "drods"}, "x" * 32,
                        algorithm="HS256")
    token_field.fill(forged)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("The server does not accept this token.").wait_for()
    shot(page, "login")
    assert [e for e in console.errors if "401" not in e] == []  # the browser logs the refused call
    # A tenant's token: said plainly, before any call (it read "… is forbidden … (403 403)")
    made = env.server.run_cli("token", "create", "--role", "operator", "--namespace", "shop",
                              "--data-dir", str(env.server.data_dir))
    assert made.returncode == 0, made.stderr
    token_field.fill(made.stdout.strip())
    page.get_by_role("button", name="Sign in").click()
    said = page.get_by_role("alert")
    said.get_by_text("acts only in namespace(s) shop").wait_for()
    assert "needs a cluster-wide token" in said.inner_text() and "403" not in said.inner_text()
    # … and the same token left in the tab's storage is not a session: the page asks to sign in, says why
    page.evaluate("t => sessionStorage.setItem('drods.token', t)", made.stdout.strip())
    page.reload()
    page.get_by_role("alert").get_by_text("acts only in namespace(s) shop").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('drods.token')") is None
    token_field = page.get_by_label("Access token")
    console.errors.clear()
    token_field.fill(browse.server.token("operator"))
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Fleet").wait_for()
    for name in SIMS:
        page.locator(f'a.card[data-cluster="{name}"] .wl').wait_for()

    def levels() -> dict[str, str]:
        return {n: page.locator(f'a.card[data-cluster="{n}"] .wl').inner_text() for n in SIMS}

    shown = levels()
    assert all(PCT.match(v) for v in shown.values()), shown
    # The page shows what the API says (both move live; wait until they agree).
    wait_for(lambda: levels() == realtime_pct(env), 15, "the fleet view to match /api/v1/monitor/realtime",
             what_else=lambda: (levels(), realtime_pct(env)))
    shown = levels()
    assert int(shown["azure-lhr"][:-1]) > max(int(shown["aws-dfw"][:-1]), int(shown["gcp-sin"][:-1])), shown
    # Grouped by region, with city and readiness on each card; no horizontal scrolling at laptop width.
    assert page.get_by_role("heading", name="eu-west").is_visible()
    card = page.locator('a.card[data-cluster="gcp-sin"]')
    assert "SIN" in card.inner_text() and "Ready" in card.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    shot(page, "fleet")
    # The session survives a reload (sessionStorage), and signing out forgets it.
    page.reload()
    page.get_by_role("heading", name="Fleet").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Access token").wait_for()
    assert page.evaluate("sessionStorage.length") == 0
    # A kubeconfig pasted whole signs in with its token (here a viewer's).
    kubeconfig = env.server.kubeconfig(env.server.data_dir / "viewer.kubeconfig", role="viewer").read_text()
    page.get_by_label("Access token").fill(kubeconfig)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Fleet").wait_for()
    assert page.locator("#role").inner_text() == "viewer"
    page.goto(f"{env.server.url}/ui#/audit")  # an admin's page: said so, not "Not found"
    page.get_by_text("This page is for admins; your token's role is viewer.").wait_for()
    assert console.errors == []
    context.close()


def test_a_long_subject_is_cut_and_sign_out_stays_on_one_line(browse: Browse) -> None:
    """An SSO subject can be a long e-mail: it pushed "Sign out" onto two lines (walkthrough AP)."""
    subject = "platform-engineering.oncall+dro-ds-dashboard@very-long-company-domain.example.com"
    page = browse.login("viewer", subject=subject)
    try:
        who = page.locator("header.top .who .subject")
        assert who.get_attribute("title") == subject  # whole in its tooltip
        for width in (1280, 375):
            page.set_viewport_size({"width": width, "height": 800})
            box = page.get_by_role("button", name="Sign out").bounding_box()
            line = page.evaluate("""() => { const b = [...document.querySelectorAll('header.top button')]
                .find((x) => x.textContent === 'Sign out'); const s = getComputedStyle(b);
                return parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.3; }""")
            assert box is not None and box["height"] < 2 * line + 12, (width, box, line)  # one line of text
            cut = page.evaluate("""() => { const e = document.querySelector('header.top .who .subject');
                return [e.scrollWidth > e.clientWidth, e.getBoundingClientRect().right]; }""")
            assert cut[0] and cut[1] <= width, (width, cut)  # cut with "…", inside the window
            assert page.locator("#role").is_visible()
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    finally:
        page.context.close()


def test_read_why_a_workload_is_where_it_is(browse: Browse, env: Env, web: str) -> None:
    page = browse.login("viewer")
    console = Console(page)
    page.get_by_role("link", name="Workloads").click()
    page.get_by_role("link", name=web).click()
    page.get_by_role("heading", name="Why it is where it is").wait_for()
    explain = page.locator('[data-testid="explanation"]').first
    explain.wait_for()
    assert page.locator('[data-testid="candidates"]').first.inner_text() == "3 candidate clusters, 2 feasible"
    verdicts = explain.locator('[data-testid="verdicts"]')
    lhr = verdicts.locator("tr", has_text="azure-lhr")
    assert "filtered out" in lhr.inner_text() and "not in targetClusters" in lhr.inner_text()
    for c in ("aws-dfw", "gcp-sin"):
        row = verdicts.locator("tr", has_text=c).inner_text()
        assert "passed" in row and "received 2 replica(s)" in row, row
    scores = explain.locator('[data-testid="scores"]')
    header = scores.locator("thead").inner_text()
    assert "LeastWaterLevel ×1" in header and "Total" in header, header
    assert scores.locator("tbody tr").count() == 2
    assert explain.locator('[data-testid="adjuster"]').inner_text().startswith("spread")
    placement_rows = page.locator('[data-testid="placement"] tbody tr')
    assert placement_rows.count() == 2
    # A viewer reads everything and changes nothing: no action buttons anywhere.
    assert page.locator("main button").count() == 0
    assert page.get_by_role("link", name="Audit log").count() == 0
    shot(page, "workload")
    # Down to a small laptop screen: nothing makes the page scroll sideways.
    page.set_viewport_size({"width": 1024, "height": 700})
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.locator('a[href="#/clusters/gcp-sin"]').first.click()
    page.get_by_role("heading", name="gcp-sin").wait_for()
    page.locator(f'[data-testid="cluster-workloads"] tr[data-binding="{web}"]').wait_for()
    assert page.get_by_role("button", name="Drain").count() == 0
    assert page.get_by_role("button", name="Cordon").count() == 0
    assert "***redacted***" not in page.content()
    assert console.errors == []
    page.context.close()


def test_an_unschedulable_workload_says_why(browse: Browse, env: Env) -> None:
    env.create(RPP, policy("nowhere", "nowhere", ["no-such-cluster"]))
    env.create(deploy_path(), deployment("nowhere", 2))
    name = binding_of("nowhere")
    wait_for(lambda: ((env.binding(name) or {}).get("status") or {}).get("phase") == "Unschedulable", 20,
             "nowhere Unschedulable")
    try:
        page = browse.login("viewer")
        page.goto(f"{env.server.url}/ui/#/workloads/{name}")
        page.locator(".badge", has_text="Unschedulable").first.wait_for()
        explain = page.locator('[data-testid="explanation"]').first
        explain.wait_for()
        assert page.locator('[data-testid="candidates"]').first.inner_text() == "3 candidate clusters, 0 feasible"
        verdicts = {t.split("\t")[0]: t for t in explain.locator('[data-testid="verdicts"] tbody tr').all_inner_texts()}
        assert set(verdicts) == {*SIMS, "no-such-cluster"}, verdicts
        assert all("filtered out" in t and "not in targetClusters" in verdicts[c] for c in SIMS for t in [verdicts[c]])
        assert "target cluster not registered" in verdicts["no-such-cluster"]
        assert explain.locator('[data-testid="adjuster"]').inner_text() == "no scoring (no feasible cluster)"
        failures = page.locator('[data-testid="failures"]')
        failures.wait_for()
        assert "Unschedulable" in failures.inner_text()
        assert page.get_by_text("Not placed anywhere.").is_visible()
        # "why not elsewhere" does not say every feasible cluster received replicas: none was feasible
        why_not = page.get_by_test_id("why-not")
        why_not.get_by_text("No cluster was feasible").wait_for()
        assert "received replicas" not in why_not.inner_text().replace("none received replicas", "")
        shot(page, "unschedulable")
        page.context.close()
    finally:
        cleanup(env, "nowhere")


def test_drain_a_cluster_and_watch_its_workloads_move(browse: Browse, env: Env, web: str) -> None:
    page = browse.login("operator")
    console = Console(page)
    # Keyboard only: focus the cluster's card and open it with Enter.
    page.locator('a.card[data-cluster="gcp-sin"]').focus()
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="gcp-sin").wait_for()
    here = page.locator(f'[data-testid="cluster-workloads"] tr[data-binding="{web}"]')
    here.wait_for()
    page.evaluate("window.__notReloaded = true")
    # Cancelling the confirmation changes nothing.
    page.get_by_role("button", name="Drain").click()
    dialog = page.get_by_role("dialog")
    assert "move every workload" in dialog.inner_text()
    # what the drain would do, from its dry run: where the replicas would run, and that they all fit
    said = " ".join(dialog.inner_text().split())
    assert "1 workload(s) would be re-placed (then running on aws-dfw ×4); every replica would find room." in said, said
    assert env.cluster("gcp-sin")["spec"].get("unschedulable") is not True  # the dry run cordoned nothing
    # A live update while the dialog is open rebuilds the button that opened it (a heartbeat would).
    page.evaluate("document.querySelector('.actions button.danger').__opener = true")
    env.http.patch("/api/v1/clusters/gcp-sin", json={"labels": {"touched": "while-confirming"}},
                   headers={"Content-Type": "application/merge-patch+json"})
    page.wait_for_function("() => !document.querySelector('.actions button.danger').__opener")
    dialog.get_by_role("button", name="Cancel").click()
    assert env.cluster("gcp-sin")["spec"].get("unschedulable") is not True
    # Focus went back to the rebuilt button, not to the top of the page (once the dialog has closed:
    # the click returns before its handler has run on a loaded machine).
    page.wait_for_function("() => !document.querySelector('dialog[open]') && "
                           "document.activeElement && document.activeElement.textContent === 'Drain'", timeout=10_000)
    assert page.evaluate("document.activeElement.textContent") == "Drain"
    page.get_by_role("button", name="Drain").click()
    shot(page, "drain-confirm")
    page.get_by_role("dialog").get_by_role("button", name="Drain").click()
    page.get_by_role("status").get_by_text(f"1 workload(s) asked to move: {web}").wait_for()
    page.locator(".flags .badge", has_text="Cordoned").wait_for()
    # The buttons were rebuilt by the live update; keyboard focus stayed on the one that was used.
    assert page.evaluate("document.activeElement.textContent") == "Drain"
    # The workload leaves gcp-sin on the page itself (watch), no reload.
    page.locator('[data-testid="no-workloads"]').wait_for(timeout=30_000)
    assert page.evaluate("window.__notReloaded") is True
    b = env.binding(web)
    assert b is not None and placement(b) == {"aws-dfw": 4}
    assert env.copies("web") == {"aws-dfw": 4}
    shot(page, "drained")
    page.get_by_role("button", name="Uncordon").click()
    page.get_by_role("dialog").get_by_role("button", name="Uncordon").click()
    page.locator(".flags .badge", has_text="Schedulable").wait_for()
    assert env.cluster("gcp-sin")["spec"]["unschedulable"] is False
    # The workload page shows the new decision and its reason, live.
    page.goto(f"{env.server.url}/ui/#/workloads/{web}")
    explain = page.locator('[data-testid="explanation"]').first
    explain.wait_for()
    assert "aws-dfw ×4" in explain.inner_text()
    assert "drain gcp-sin" in explain.inner_text()
    # Ask for a fresh decision from the workload page: it appears, with its trigger, while the page is open.
    page.get_by_role("button", name="Reschedule").click()
    page.get_by_role("dialog").get_by_role("button", name="Reschedule").click()
    page.get_by_role("status").get_by_text(f"{web}: reschedule requested").wait_for()
    page.locator('[data-testid="explanation"]', has_text="dashboard").first.wait_for()
    assert (env.binding(web) or {}).get("metadata", {}).get("annotations", {}).get(
        "multicluster.io/reschedule-reason") == "dashboard"
    assert console.errors == []
    page.context.close()


def test_roles_decide_what_the_dashboard_offers(browse: Browse, env: Env, web: str) -> None:
    operator = browse.login("operator")
    assert operator.get_by_role("link", name="Audit log").count() == 0
    operator.context.close()
    admin = browse.login("admin")
    console = Console(admin)
    admin.get_by_role("link", name="Audit log").click()
    admin.get_by_role("heading", name="Audit log").wait_for()
    rows = admin.locator("main table tbody tr")
    rows.first.wait_for()
    assert rows.filter(has_text="/api/v1/clusters/gcp-sin").count() >= 1  # the drain's cordon, audited
    # Policies: a view made by the generic list-and-watch frame; a policy created now appears live.
    admin.get_by_role("link", name="Policies").click()
    web_row = admin.locator('main tr[data-name="web"]')
    assert "aws-dfw, gcp-sin" in web_row.inner_text() and "Deployment default/web" in web_row.inner_text()
    env.create(RPP, policy("later", "later", ["azure-lhr"]))
    try:
        assert "azure-lhr" in admin.locator('main tr[data-name="later"]').inner_text()
    finally:
        env.delete(f"{RPP}/later")
    admin.locator('main tr[data-name="later"]').wait_for(state="detached")
    # Karmada's policies as written are there too, beside DRO-DS's own
    karmada = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
    env.create(karmada, {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                         "metadata": {"name": "k-pp", "namespace": "default"},
                         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                         "name": "not-here"}],
                                  "placement": {"clusterAffinity": {"clusterNames": ["azure-lhr"]}}}})
    try:
        row = admin.locator('main tr[data-name="default/k-pp"]').inner_text()
        assert "PropagationPolicy (Karmada)" in row and "azure-lhr" in row and "Deployment not-here" in row, row
        assert "WaterLevel (default)" in row, row  # no replicaScheduling: the water level divides (it read blank)
    finally:
        env.delete(f"{karmada}/k-pp")
    admin.get_by_role("link", name="Operations").click()
    admin.get_by_role("heading", name="Automatic operations").wait_for()
    admin.get_by_role("link", name="Clusters").click()
    table = admin.locator("main table.data")
    table.wait_for()
    for name in SIMS:
        row = table.locator(f'tr[data-cluster="{name}"]')
        assert PCT.match(row.locator("td.wl").inner_text())
    wait_for(lambda: "cores" in table.locator('tr[data-cluster="gcp-sin"]').inner_text(), 10,
             "the largest free node column")
    shot(admin, "clusters")
    admin.get_by_role("link", name="gcp-sin").click()
    admin.locator("svg.chart").first.wait_for()
    assert admin.locator("svg.chart").count() == 2
    shot(admin, "cluster")
    assert console.errors == []
    admin.context.close()
