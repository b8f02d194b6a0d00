"""A hardening campaign (SEC4): 10,000 malformed or hostile requests against a real HTTP API server —
random and wrong-typed bodies on every route, deep JSON and YAML, YAML alias bombs, invalid UTF-8,
huge bodies, bogus headers and paths, slow clients that never finish — 90 % of them with a valid
admin or operator token so they reach validation. Nothing answers 5xx, every refusal is in the one
error shape, and a refused request changes no object. Seeded: a failure replays."""

from __future__ import annotations

import asyncio
import collections
import json
import random
import string
from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute

from tests.api.conftest import Api

REQUESTS = 10_000
SEED = 20261125
MUTATING = ("POST", "PUT", "PATCH", "DELETE")
PARAMS = ["a", "default", "team-a", "x" * 300, "..", "%2e%2e", "%00", "ünï", "a.b", "-", "1" * 40]
MEDIA = ["application/json", "application/yaml", "application/merge-patch+json", "application/json-patch+json",
         "application/apply-patch+yaml", "application/strategic-merge-patch+json", "text/plain", "", "*/*"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.35:
        return rng.choice([None, True, False, 0, -1, 2**70, 1.5, float("1e308"), "", "x" * rng.randint(1, 50),
                           "\u0000", "🙂", "${jndi}", "<script>", "a=b", "0/0"])
    if roll < 0.7:
        return {rng.choice(["name", "spec", "metadata", "kind", "replicas", "labels", "x" * 10, "", "$ref"]):
                _value(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def _object(rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": rng.choice(["multicluster.io/v1alpha1", "apps/v1", "v1", "x/y", ""]),
            "kind": rng.choice(["Cluster", "Binding", "Deployment", "Secret", "PropagationPolicy", "Nope"]),
            "metadata": {"name": rng.choice(PARAMS[:3] + ["Bad_Name", ""]), "labels": _value(rng, 4)},
            "spec": _value(rng, 1)}


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice([101, 1_000, 50_000])
    return rng.choice([b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth, b"[" * depth])


def _yaml_bomb() -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines).encode()


def _body(rng: random.Random) -> tuple[bytes, str]:
    roll = rng.random()
    if roll < 0.45:
        return json.dumps(_object(rng) if rng.random() < 0.6 else _value(rng)).encode(), "application/json"
    if roll < 0.55:
        return _deep(rng), rng.choice(["application/json", "application/merge-patch+json"])
    if roll < 0.62:
        deep_yaml = "a:\n" + "".join("  " * i + "- \n" for i in range(1, rng.choice([50, 500, 3000])))
        return rng.choice([_yaml_bomb(), deep_yaml.encode()]), "application/yaml"
    if roll < 0.72:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))), rng.choice(MEDIA)
    if roll < 0.8:
        return rng.choice([b"", b"{", b"null", b"[]", b'"s"', b"1e999999", b'{"a":1,"a":2}']), rng.choice(MEDIA)
    return json.dumps(_value(rng)).encode(), rng.choice(MEDIA)


def _path(rng: random.Random, routes: list[tuple[str, list[str]]]) -> tuple[str, str]:
    if rng.random() < 0.05:
        junk = "".join(rng.choice(string.printable[:94]) for _ in range(rng.randint(1, 40)))
        # (no leading "//": a client reads that as a host, not a path, and never sends it)
        return rng.choice(["GET", "POST", "DELETE"]), "/" + junk.replace("?", "").replace("#", "").lstrip("/")
    template, methods = rng.choice(routes)
    path = template
    while "{" in path:
        start = path.index("{")
        path = path[:start] + rng.choice(PARAMS) + path[path.index("}", start) + 1:]
    method = rng.choice(methods) if rng.random() < 0.85 else rng.choice(["GET", *MUTATING, "OPTIONS"])
    if rng.random() < 0.2:
        path += "?" + rng.choice(["watch=false", "labelSelector=a%20in%20(", "limit=-1", "startTime=x",
                                  "fieldSelector=metadata.name=a", "dryRun=All", "resourceVersion=abc"])
    return method, path


def _routes(top: list[Any]) -> list[tuple[str, list[str]]]:
    """Every API route of the app (included routers too) as (path template, methods)."""
    found: set[tuple[str, tuple[str, ...]]] = set()
    pending = list(top)
    while pending:
        r = pending.pop()
        if isinstance(r, APIRoute):
            if not r.path.startswith(("/docs", "/redoc")):
                found.add((r.path, tuple(sorted(r.methods or ()))))
        elif hasattr(r, "original_router"):
            pending.extend(r.original_router.routes)
    return [(p, list(m)) for p, m in sorted(found)]


async def _objects(api: Api) -> tuple[tuple[str, int], ...]:
    store = api.app.state.ctx.store  # type: ignore[attr-defined]
    kvs, _ = await store.range("/registry/")
    return tuple((kv.key, kv.mod_revision) for kv in kvs)


async def _slow_client(port: int) -> None:
    """Sends half a request and goes quiet; the server must carry on regardless."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /api/v1/clusters HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"na")
    await writer.drain()
    await asyncio.sleep(0.5)
    writer.close()


def _shape_ok(doc: Any) -> bool:
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return "message" in doc and "code" in doc
    return isinstance(doc, dict) and {"code", "message", "details"} <= doc.keys()


async def test_ten_thousand_hostile_requests(api: Api) -> None:
    rng = random.Random(SEED)
    routes = _routes(api.app.routes)  # type: ignore[attr-defined]
    assert len(routes) > 40
    port = int(str(api.client.base_url).rsplit(":", 1)[1])
    slow = [asyncio.create_task(_slow_client(port)) for _ in range(5)]
    counts: collections.Counter[int] = collections.Counter()
    authorised = 0
    problems: list[str] = []
    check: Callable[[], Any] = lambda: _objects(api)  # noqa: E731
    before = await check()
    for i in range(REQUESTS):
        method, path = _path(rng, routes)
        headers: dict[str, str] = {}
        roll = rng.random()
        if roll < 0.9:
            headers["Authorization"] = f"Bearer {api.tokens[rng.choice(['admin', 'operator'])]}"
            authorised += 1
        elif roll < 0.95:
            headers["Authorization"] = rng.choice(["Bearer x.y.z", "Basic abc", "Bearer", "Bearer " + "a" * 5000])
        content: bytes | None = None
        if method in MUTATING or rng.random() < 0.05:
            content, media = _body(rng)
            if i % 3000 == 17:  # a few bodies beyond the size limit
                content, media = b'{"x":"' + b"a" * (9 * 1024 * 1024) + b'"}', "application/json"
            headers["Content-Type"] = media
        r = await api.client.request(method, path, content=content, headers=headers)
        counts[r.status_code] += 1
        if r.status_code >= 500:
            problems.append(f"{method} {path} -> {r.status_code}: {r.text[:200]}")
        elif r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json") \
                and not _shape_ok(r.json()):
            problems.append(f"{method} {path} -> {r.status_code} not in the error shape: {r.text[:200]}")
        if r.status_code >= 400 and method in MUTATING:
            after = await check()
            if after != before:
                problems.append(f"{method} {path} -> {r.status_code} but objects changed")
        before = await check() if r.status_code < 400 and method in MUTATING else before
    await asyncio.gather(*slow)
    assert (await api.client.get("/healthz")).status_code == 200
    print(f"\n{REQUESTS} requests ({authorised} with a valid token), by status: {dict(sorted(counts.items()))}")
    assert authorised >= 0.9 * REQUESTS * 0.97
    assert not problems, "\n".join(problems[:20])
