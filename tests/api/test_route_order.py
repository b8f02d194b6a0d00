"""Every route the API serves is the one a request on its own path reaches: the table is matched in
order (FastAPI walks it route by route), so a generic pattern placed before a specific one would hide it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Match, Route

from drods.server import ServerConfig, build_app
from drods.store.sqlite import SqliteStore
from tests.api.served_routes import served_routes

_PARAM = re.compile(r"\{(\w+)(?::path)?\}")


def _reached(routes: list[Any], scope: dict[str, Any]) -> tuple[Match, Route | None]:
    """The route a request reaches, in the table's order (an included router is matched in its place);
    a path matched for another method only (405) counts when nothing matches whole."""
    partial: Route | None = None
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            match, found = _reached(included.routes, scope)
        elif isinstance(route, Route):
            match, _ = route.matches(scope)
            found = route
        else:
            continue
        if match == Match.FULL:
            return match, found
        if match == Match.PARTIAL and partial is None:
            partial = found
    return (Match.PARTIAL, partial) if partial is not None else (Match.NONE, None)


def _sample_path(template: str) -> str:
    return _PARAM.sub(lambda m: "a/b" if m.group(0).endswith(":path}") else f"x-{m.group(1)}", template)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d: Path = tmp_path_factory.mktemp("routes")
    return build_app(ServerConfig(store_url="unused://", data_dir=d / "data"), store=SqliteStore(str(d / "drods.db")))


def test_every_route_is_reached_by_a_request_on_its_own_path(app: Any) -> None:
    hidden = []
    for method, template in served_routes(app):
        if template.startswith(("/docs", "/ui", "/redoc")):
            continue
        scope = {"type": "http", "method": method, "path": _sample_path(template), "root_path": "",
                 "query_string": b"", "headers": [], "app": app}
        match, route = _reached(app.router.routes, scope)
        if match != Match.FULL or route is None or route.path != template:
            hidden.append((method, template, route.path if route is not None else None))
    assert hidden == [], "routes a more general one placed before them answers instead"
