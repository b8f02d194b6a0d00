"""The dashboard's files: served by the façade app at /ui (public, strict CSP), not by a sim's app;
every module a page imports exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from drods.api.app import create_app
from drods.api.context import ApiContext
from drods.store.sqlite import SqliteStore
from drods.ui import STATIC

IMPORT = re.compile(r"""^\s*import\s[^"']*["'](\.{1,2}/[^"']+)["']""", re.MULTILINE)


@pytest.fixture
def ctx(tmp_path: Path) -> ApiContext:
    return ApiContext.build(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data")


@pytest.fixture
def client(ctx: ApiContext) -> Iterator[TestClient]:
    with TestClient(create_app(ctx)) as c:
        yield c


def test_ui_is_served_publicly_with_a_strict_policy(client: TestClient) -> None:
    r = client.get("/ui", follow_redirects=False)
    assert r.status_code in (307, 308) and r.headers["location"].endswith("/ui/")
    page = client.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="js/main.js">' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    js = client.get("/ui/js/views/fleet.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]


def test_missing_files_and_escapes_are_404_in_the_usual_error_shape(client: TestClient) -> None:
    r = client.get("/ui/js/nope.js")
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"
    assert client.get("/ui/%2e%2e/__init__.py").status_code == 404
    assert client.get("/ui/..%2f__init__.py").status_code == 404


def test_a_member_app_without_the_facade_serves_no_dashboard(ctx: ApiContext) -> None:
    with TestClient(create_app(ctx, flat_api=False)) as c:
        assert c.get("/ui/").status_code == 404


def test_every_relative_import_resolves_to_a_shipped_module() -> None:
    modules = sorted(STATIC.rglob("*.js"))
    assert len(modules) >= 10
    for module in modules:
        for ref in IMPORT.findall(module.read_text()):
            target = (module.parent / ref).resolve()
            assert target.is_file() and STATIC in target.parents, f"{module.relative_to(STATIC)} imports {ref}"
    # index.html preloads every module (no import waterfall on the first load).
    preloaded = set(re.findall(r'<link rel="modulepreload" href="([^"]+)">', (STATIC / "index.html").read_text()))
    assert preloaded == {str(m.relative_to(STATIC)) for m in modules} - {"js/main.js"}
    # No network at run time: nothing refers to another origin.
    for f in [*modules, *STATIC.rglob("*.html"), *STATIC.rglob("*.css")]:
        assert not re.search(r"""(src|href)=["']https?:|url\(\s*["']?https?:|from\s+["']https?:""", f.read_text()), f
