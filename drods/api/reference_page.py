"""The API reference page (``/docs``), with Swagger UI's files from the swagger-ui-bundle package served
at ``/docs/assets``: FastAPI's own page loads them from a CDN, and on a control plane without internet
access it was blank. Public, as the OpenAPI document it reads (``/openapi.json``) is."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

PAGE = "/docs"
ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"


def mount(app: FastAPI) -> None:
    """Serve the page; ``app`` is made with ``docs_url=None`` (no CDN page of FastAPI's own)."""
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get(PAGE, include_in_schema=False)
    async def reference() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} reference",
                                   oauth2_redirect_url=OAUTH2_REDIRECT,
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
