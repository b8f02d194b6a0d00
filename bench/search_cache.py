"""How the search cache (Karmada's karmada-search, `drods.members.search_cache`) holds up as it grows.

    python bench/search_cache.py [--clusters 10] [--objects 2000] [--watchers 20] [--events 5000]

Fills the cache as the controller does after a list (``--objects`` Deployments in each of
``--clusters`` members, 50 namespaces), then measures, in process (no HTTP, no members):

- ``ingest_us``: µs per object of a list's ingestion (copy, annotation, revision, history);
- ``relist_unchanged_us``: µs per object of a relist where nothing changed (no event);
- ``list_all_ms`` / ``list_selector_ms`` / ``get_ms``: a query over every member's Deployments,
  with a label selector matching one app in each member, and by namespace and name;
- ``event_us``: µs per watch event applied while ``--watchers`` watches are open (fan-out included);
- ``bytes_per_object``: what the cache holds per object (tracemalloc).

Prints the conditions, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drods.members.search_cache import CachedKind, Query, SearchCache  # noqa: E402
from drods.model.selector import parse_selector  # noqa: E402


def _deployment(i: int, rv: int) -> dict[str, Any]:
    ns, name = f"team-{i % 50}", f"app-{i:06d}"
    return {"metadata": {"name": name, "namespace": ns, "uid": f"u-{i}", "resourceVersion": str(rv),
                         "generation": 1, "labels": {"app": name, "tier": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "main", "image": "registry.example.com/shop/web:1.4.2",
                          "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}},
            "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1}}


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


async def run(clusters: int, objects: int, watchers: int, events: int) -> dict[str, Any]:
    kinds = [CachedKind(f"member-{c}", "apps/v1", "Deployment", "deployments", True) for c in range(clusters)]
    lists = {k: [_deployment(i, 100 + i) for i in range(objects)] for k in kinds}
    weighed = SearchCache()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in kinds:
        weighed.scope(k, ())
        weighed.replace(k, lists[k])
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del weighed
    cache = SearchCache()
    ingest = 0.0
    for k in kinds:
        cache.scope(k, ())
        ingest += _timed(lambda k=k: cache.replace(k, lists[k]))
    total = clusters * objects
    relist = sum(_timed(lambda k=k: cache.replace(k, lists[k])) for k in kinds)
    everything = Query("apps", "v1", "deployments")
    one_app = Query("apps", "v1", "deployments", selector=parse_selector("app=app-000007"))
    by_name = Query("apps", "v1", "deployments", namespace="team-7", name="app-000007")
    list_all = _timed(lambda: cache.find(everything))
    list_selector = _timed(lambda: cache.find(one_app))
    get = _timed(lambda: cache.find(by_name))
    assert len(cache.find(one_app)) == clusters and len(cache.find(by_name)) == clusters
    subs = [cache.subscribe(cache.revision) for _ in range(watchers)]
    t0 = time.perf_counter()
    for e in range(events):
        k = kinds[e % clusters]
        cache.apply(k, "MODIFIED", _deployment(e % objects, 10_000_000 + e))
    event = time.perf_counter() - t0
    assert all(s.queue.qsize() == min(events, 4096) or s.queue.qsize() == 1 for s in subs)
    return {"clusters": clusters, "objects": total, "watchers": watchers, "events": events,
            "ingest_us": round(ingest / total * 1e6, 2), "relist_unchanged_us": round(relist / total * 1e6, 2),
            "list_all_ms": round(list_all * 1e3, 2), "list_selector_ms": round(list_selector * 1e3, 2),
            "get_ms": round(get * 1e3, 2), "event_us": round(event / events * 1e6, 2),
            "bytes_per_object": round(held / total)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clusters", type=int, default=10)
    p.add_argument("--objects", type=int, default=2000, help="Deployments per member")
    p.add_argument("--watchers", type=int, default=20)
    p.add_argument("--events", type=int, default=5000)
    a = p.parse_args()
    print(f"conditions: python {sys.version.split()[0]}, {os.cpu_count()} cpus (shared), {a.clusters} members x "
          f"{a.objects} Deployments, {a.watchers} open watches, {a.events} events; in process, no HTTP")
    print(json.dumps(asyncio.run(run(a.clusters, a.objects, a.watchers, a.events))))


if __name__ == "__main__":
    main()
