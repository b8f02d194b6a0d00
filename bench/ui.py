"""Dashboard bench: the fleet view's page load with N clusters (default 1,000).

Starts its own ``drods serve`` (SQLite), registers N pull-mode clusters in 8 regions and 40 cities
and sends one metrics report for each (water levels spread over 0–95 %), waits until the monitor's
realtime view has every one of them, then opens ``/ui/`` in headless Chromium (Debian's, driven by
Playwright; the token is already in sessionStorage, as after a sign-in) and measures the time
from navigation start until every cluster's card shows its water level as ``NN%``. Repeated
``--runs`` times in fresh browser contexts; the target is ≤ 2 s.

Prints the conditions, then one final JSON line of figures.

    python bench/ui.py [--clusters 1000] [--runs 5] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.server_process import ServerProcess  # noqa: E402

REGIONS = ("us-east", "us-west", "us-central", "eu-west", "eu-north", "ap-south", "ap-northeast", "ap-southeast")
TARGET_S = 2.0

ALL_RENDERED = """([n, selector]) => {
  const cells = document.querySelectorAll(selector);
  if (cells.length !== n) return false;
  for (const c of cells) if (!/^\\d{1,3}%$/.test(c.textContent)) return false;
  return performance.now();
}"""


async def populate(server: ServerProcess, n: int, concurrency: int = 16) -> float:
    headers = {"Authorization": f"Bearer {server.token('admin')}"}
    sem = asyncio.Semaphore(concurrency)
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=server.url, verify=server.verify, headers=headers, timeout=60) as client:

        async def one(i: int) -> None:
            name = f"c{i:04d}"
            region = REGIONS[i % len(REGIONS)]
            async with sem:
                r = await client.post("/api/v1/clusters", json={
                    "name": name, "syncMode": "Pull", "region": region, "city": f"C{i % 40:02d}",
                    "provider": ("aws", "gcp", "azure")[i % 3]})
                assert r.status_code == 201, r.text
                cpu = (i * 37) % 96  # 0..95 %, spread over the fleet
                r = await client.put("/api/v1/metrics", json={
                    "cluster": name, "timestamp": datetime.now(UTC).isoformat(), "cpuCapacity": 64,
                    "cpuUsage": cpu, "memoryCapacity": 256, "memoryAvailable": 200})
                assert r.status_code == 200, r.text

        await asyncio.gather(*(one(i) for i in range(n)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            body = (await client.get("/api/v1/monitor/realtime")).json()
            if sum(1 for d in body["clusters"].values() if d["waterLevel"] is not None) >= n:
                break
            await asyncio.sleep(0.2)
        else:
            raise SystemExit("the realtime view never showed every cluster")
    return time.perf_counter() - started


def measure(server: ServerProcess, n: int, runs: int, chromium: str, view: str = "fleet",
            selector: str = "a.card .wl") -> list[dict[str, float]]:
    from playwright.sync_api import sync_playwright

    token = server.token("viewer")
    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        for _ in range(runs):
            context = browser.new_context(viewport={"width": 1280, "height": 800},
                                          ignore_https_errors=server.cert is not None)
            context.add_init_script(f"sessionStorage.setItem('drods.token', {json.dumps(token)})")
            page = context.new_page()
            t0 = time.perf_counter()
            page.goto(f"{server.url}/ui/#/{view}", wait_until="commit")
            handle = page.wait_for_function(ALL_RENDERED, arg=[n, selector], polling="raf", timeout=60_000)
            wall = time.perf_counter() - t0
            in_page_ms = float(handle.json_value())  # ms since navigation start, when the last NN% was there
            phases = page.evaluate("""() => {
              const m = (name) => { const e = performance.getEntriesByName(name)[0]; return e ? e.startTime : null; };
              const draws = performance.getEntriesByName('drods:fleet draw').map(e => e.duration);
              return {list: m('drods:listed /apis/multicluster.io/v1alpha1/clusters'),
                      realtime: m('drods:realtime first line'), draw: Math.max(0, ...draws)};
            }""")
            out.append({"wall_s": wall, "page_s": in_page_ms / 1000, "list_s": (phases["list"] or 0) / 1000,
                        "realtime_s": (phases["realtime"] or 0) / 1000, "draw_s": phases["draw"] / 1000})
            context.close()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--chromium", default=os.environ.get("DRODS_CHROMIUM", "/usr/bin/chromium"))
    args = ap.parse_args()
    print(f"fleet view page load: {args.clusters} clusters, {args.runs} runs, chromium {args.chromium}, "
          f"{platform.machine()} × {os.cpu_count()} CPUs, Python {platform.python_version()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="drods-bench-ui-") as tmp, ServerProcess(Path(tmp) / "server") as server:
        setup_s = asyncio.run(populate(server, args.clusters))
        print(f"registered and reported {args.clusters} clusters in {setup_s:.1f} s", flush=True)
        results = measure(server, args.clusters, args.runs, args.chromium)
        table = measure(server, args.clusters, 3, args.chromium, "clusters", "table.data td.wl")
    page = sorted(r["page_s"] for r in results)
    wall = sorted(r["wall_s"] for r in results)
    for i, r in enumerate(results):
        print(f"run {i + 1}: every NN% rendered {r['page_s'] * 1000:.0f} ms after navigation start "
              f"({r['wall_s'] * 1000:.0f} ms wall clock; cluster list parsed at {r['list_s'] * 1000:.0f} ms, "
              f"first realtime line at {r['realtime_s'] * 1000:.0f} ms, "
              f"longest fleet draw {r['draw_s'] * 1000:.0f} ms)")
    worst = max(page)
    print(f"median {statistics.median(page) * 1000:.0f} ms, worst {worst * 1000:.0f} ms; target ≤ {TARGET_S:g} s: "
          f"{'met' if worst <= TARGET_S else 'NOT met'}")
    table_s = statistics.median(r["page_s"] for r in table)
    print(f"clusters table (not part of the target): every row's water level rendered after {table_s * 1000:.0f} ms "
          "(median of 3)")
    print(json.dumps({"bench": "ui_fleet_load", "clusters": args.clusters, "runs": args.runs,
                      "median_s": round(statistics.median(page), 3), "worst_s": round(worst, 3),
                      "median_wall_s": round(statistics.median(wall), 3), "target_s": TARGET_S,
                      "met": worst <= TARGET_S, "clusters_table_median_s": round(table_s, 3)}))


if __name__ == "__main__":
    main()
