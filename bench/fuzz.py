"""Fuzz campaign over a real ``drods serve`` process: hostile requests on every documented route with
every content type — JSON, YAML, merge patch, JSON patch, apply patch (and a few wrong ones) —
random and wrong-typed bodies, oversize bodies (beyond the 8 MiB limit), deeply nested JSON and YAML,
YAML alias bombs, invalid UTF-8, bogus tokens, junk paths. 90 % of the requests carry a valid admin or
operator token so they reach validation.

First every (route, method) is sent a body of each content type once, then random requests fill the
budget (the generators of ``tests/api/test_campaign.py``, seeded). Counted: answers by status, 5xx,
connection errors (no answer at all), refusals (4xx) not in the error shape (``{code, message,
details}``; ``Status`` on Kubernetes paths), and whether ``/healthz`` still answers afterwards.

Prints the conditions and a final JSON line ``{requests, status_5xx, conn_errors, routes, …}``.

    python bench/fuzz.py --requests 10000 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench.scratch import scratch_dir  # noqa: E402
from tests.api.test_campaign import MUTATING, PARAMS, _body, _deep, _object, _shape_ok, _yaml_bomb  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

CONTENT_TYPES = ["application/json", "application/yaml", "application/merge-patch+json",
                 "application/json-patch+json", "application/apply-patch+yaml"]
OVERSIZE = 9 * 1024 * 1024


# Kubernetes paths' parameters: real groups, versions and resources most of the time, so requests
# reach the handlers behind the routing, not only the 404 of an unknown resource.
K8S_PARAMS = {"group": ["apps", "multicluster.io", "policy.multicluster.io", "batch", "x.io"],
              "version": ["v1", "v1alpha1", "v2"], "ns": ["default", "team-a", "kube-system"],
              "plural": ["deployments", "clusters", "bindings", "propagationpolicies", "works", "configmaps",
                         "secrets", "services", "namespaces", "overridepolicies", "nope"],
              "sub": ["status", "scale", "proxy", "x"]}


def _fill(template: str, rng: random.Random) -> str:
    path = template
    while "{" in path:
        start = path.index("{")
        end = path.index("}", start)
        param = path[start + 1:end].split(":")[0]
        choices = K8S_PARAMS.get(param) if rng.random() < 0.8 else None
        path = path[:start] + rng.choice(choices or PARAMS) + path[end + 1:]
    return path


def _app_routes() -> list[tuple[str, str]]:
    """Every route of the app, the Kubernetes paths the OpenAPI document leaves out included."""
    from drods.server import ServerConfig, build_app
    from drods.store.sqlite import SqliteStore
    from tests.api.test_campaign import _routes

    d = scratch_dir("drods-fuzz-routes-")
    app = build_app(ServerConfig(store_url="unused://", data_dir=d), store=SqliteStore(str(d / "routes.db")))
    return sorted((p, m) for p, methods in _routes(app.routes) for m in methods
                  if m in ("GET", "POST", "PUT", "PATCH", "DELETE"))


def _typed_body(rng: random.Random, media: str) -> bytes:
    """A plausible body of that content type (often wrong for the route: that is the point)."""
    obj: Any = _object(rng)
    if media == "application/json-patch+json":
        obj = [{"op": rng.choice(["add", "replace", "remove", "test", "move", "copy", "bogus"]),
                "path": rng.choice(["/spec/replicas", "/metadata/labels/a", "/", "", "/x~2y", "/spec/0"]),
                "value": obj["spec"], "from": "/spec"} for _ in range(rng.randint(0, 3))]
    if media.endswith("yaml"):
        import yaml
        return yaml.safe_dump(obj).encode()
    return json.dumps(obj).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=1800.0, help="seconds; stops sending after it")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"conditions: python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}; "
          f"drods serve (SQLite, HTTPS) as its own process; {args.requests} requests, seed {args.seed}, "
          f"time limit {args.time_limit:g}s", flush=True)
    root = scratch_dir("drods-fuzz-")
    counts: collections.Counter[int] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()
    media_seen: collections.Counter[str] = collections.Counter()
    hit: set[tuple[str, str]] = set()
    problems: list[str] = []
    conn_errors = bad_shape = sent = 0
    with ServerProcess(root) as server:
        tokens = [server.token("admin"), server.token("operator")]
        with httpx.Client(base_url=server.url, verify=server.verify, timeout=30) as http:
            doc = http.get("/openapi.json").json()
            documented = {(p, m.upper()) for p, item in doc["paths"].items() for m in item
                          if m.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE")}
            ops = sorted(documented | set(_app_routes()))
            print(f"{len(ops)} operations ({len(documented)} in the OpenAPI document, the rest Kubernetes paths)",
                  flush=True)
            plan: list[tuple[str, str, str | None]] = [(p, m, c) for p, m in ops if m in MUTATING
                                                       for c in CONTENT_TYPES] + [(p, m, None) for p, m in ops]
            ops_set = set(ops)
            started = time.monotonic()
            while sent < args.requests and time.monotonic() - started < args.time_limit:
                headers: dict[str, str] = {}
                content: bytes | None = None
                if sent < len(plan):  # the sweep: every operation, every content type
                    template, method, media = plan[sent]
                    path = _fill(template, rng)
                    kind = "sweep"
                    if media is not None:
                        content = _typed_body(rng, media)
                else:
                    template, method = rng.choice(ops)
                    path = _fill(template, rng)
                    media = None
                    roll = rng.random()
                    if roll < 0.03:
                        kind, content, media = "oversize", b'{"x":"' + b"a" * OVERSIZE + b'"}', rng.choice(
                            CONTENT_TYPES)
                    elif roll < 0.13:
                        kind, content = "deep", _deep(rng)
                        media = rng.choice(["application/json", "application/merge-patch+json",
                                            "application/json-patch+json"])
                    elif roll < 0.18:
                        kind, media = "deep-yaml", rng.choice(["application/yaml", "application/apply-patch+yaml"])
                        content = _yaml_bomb() if rng.random() < 0.5 else ("a:\n" + "".join(
                            "  " * i + "- \n" for i in range(1, rng.choice([50, 500, 3000])))).encode()
                    elif roll < 0.5:
                        kind, media = "typed", rng.choice(CONTENT_TYPES)
                        content = _typed_body(rng, media)
                    elif method in MUTATING or roll < 0.55:
                        kind = "random"
                        content, media = _body(rng)
                    else:
                        kind = "plain"
                    if rng.random() < 0.1:
                        method = rng.choice(["GET", *MUTATING])
                    if rng.random() < 0.15:
                        path += "?" + rng.choice(["watch=false", "labelSelector=a%20in%20(", "limit=-1",
                                                  "dryRun=All", "resourceVersion=abc", "fieldManager=" + "x" * 300])
                if media is not None:
                    headers["Content-Type"] = media
                    media_seen[media] += 1
                roll = rng.random()
                if roll < 0.9:
                    headers["Authorization"] = f"Bearer {rng.choice(tokens)}"
                elif roll < 0.95:
                    headers["Authorization"] = rng.choice(["Bearer x.y.z", "Basic abc", "Bearer " + "a" * 5000])
                sent += 1
                by_kind[kind] += 1
                if (template, method) in ops_set:
                    hit.add((template, method))
                try:
                    r = http.request(method, path, content=content, headers=headers)
                except httpx.HTTPError as e:
                    conn_errors += 1
                    problems.append(f"{method} {path}: no answer ({type(e).__name__})")
                    continue
                counts[r.status_code] += 1
                if r.status_code >= 500:
                    problems.append(f"{method} {path} [{media}] -> {r.status_code}: {r.text[:200]}")
                elif r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json") \
                        and not _shape_ok(r.json()):
                    bad_shape += 1
                    problems.append(f"{method} {path} -> {r.status_code} not in the error shape: {r.text[:200]}")
            elapsed = time.monotonic() - started
            healthy = http.get("/healthz").status_code == 200
    for line in problems[:30]:
        print("problem:", line)
    print(f"by status: {dict(sorted(counts.items()))}; by kind: {dict(sorted(by_kind.items()))}")
    print(json.dumps({"requests": sent, "status_5xx": sum(n for s, n in counts.items() if s >= 500),
                      "conn_errors": conn_errors, "routes": len(hit),
                      "routes_total": len(ops), "routes_in_openapi": len(documented),
                      "bad_shape_4xx": bad_shape, "status_4xx": sum(n for s, n in counts.items() if 400 <= s < 500),
                      "content_types": dict(sorted(media_seen.items())), "healthy_after": healthy,
                      "elapsed_s": round(elapsed, 1), "requests_per_s": round(sent / elapsed, 1)}))


if __name__ == "__main__":
    main()
