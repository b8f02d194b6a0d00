"""Every (method, path template) an app serves, found by walking its routes, so the generated
route tests cover a route the day it is added."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from starlette.routing import Mount, Route

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _walk(routes: list[Any]) -> Iterator[tuple[str, str]]:
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI's included routers
        if included is not None:
            yield from _walk(included.routes)
        elif isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield method, route.path
        elif isinstance(route, Mount):
            yield "GET", route.path


def served_routes(app: Any) -> list[tuple[str, str]]:
    return sorted(set(_walk(app.routes)))
