"""A fleet of 1,000 clusters stays fluid: the fleet view opens with every card's ``NN%`` within 1 s of
navigation start, and a live update of one cluster rewrites that one card and no other.

The page and its modules come from the real server; the cluster list, its watch and the realtime
stream are answered by Playwright (`page.route`) with 1,000 synthetic clusters, so what is measured is
the browser's side — list, stream, draw — not the time to register 1,000 clusters (`bench/ui.py`
measures the whole path against a server holding them)."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.members_e2e.conftest import Env
from tests.ui_e2e.conftest import Browse, shot

N = 1000
REGIONS = ("us-east", "us-west", "eu-west", "eu-north", "ap-south", "ap-northeast", "ap-southeast", "sa-east")
OPEN_S = 1.0
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


class Fleet:
    """Answers the dashboard's streams; later watch requests are held open until ``push``."""

    def __init__(self) -> None:
        self.held: list[Any] = []

    def clusters(self, route: Any) -> None:
        if "watch=true" not in route.request.url:
            route.fulfill(json={"items": [_cluster(i) for i in range(N)], "metadata": {"resourceVersion": "1"}})
        else:
            self.held.append(route)  # a watch with nothing to say yet stays open

    def realtime(self, route: Any) -> None:
        if not getattr(self, "sent", False):
            self.sent = True
            route.fulfill(body=json.dumps(REALTIME) + "\n", content_type="application/x-ndjson")
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


def _open(browse: Browse, env: Env) -> tuple[Any, Fleet]:
    context = browse.browser.new_context(viewport={"width": 1280, "height": 800},
                                         ignore_https_errors=env.server.cert is not None)
    context.add_init_script(f"sessionStorage.setItem('drods.token', {json.dumps(env.server.token('viewer'))})")
    fleet = Fleet()
    context.route("**/apis/multicluster.io/v1alpha1/clusters*", fleet.clusters)
    context.route("**/apis/multicluster.io/v1alpha1/bindings*", fleet.bindings)
    context.route("**/api/v1/monitor/realtime*", fleet.realtime)
    return context.new_page(), fleet


def test_a_thousand_cluster_fleet_opens_within_a_second_and_one_update_changes_one_card(
        browse: Browse, env: Env) -> None:
    times = []
    for _ in range(2):  # the better of two loads: one stall of a shared CPU is not the page's
        page, fleet = _open(browse, env)
        t0 = time.perf_counter()
        page.goto(f"{env.server.url}/ui/#/fleet", wait_until="commit")
        handle = page.wait_for_function(ALL_RENDERED, arg=[N], polling="raf", timeout=30_000)
        times.append((float(handle.json_value()) / 1000, time.perf_counter() - t0))
        if min(t[0] for t in times) <= OPEN_S:
            break
        page.context.close()
    best = min(t[0] for t in times)
    print(f"fleet of {N} clusters: every NN% on screen {best:.3f} s after navigation start (loads: {times})")
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
