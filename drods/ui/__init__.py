"""The dashboard (UI1): static files served by the API server at ``/ui``.

The pages are plain ES modules and hand-written CSS shipped inside this package, so the browser
needs nothing from the network and nothing is built at install or test time. ``/ui`` itself is
public (there is nothing secret in the code); every API call the pages make carries the bearer
token the user typed, and the API checks it as it checks any client's.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).resolve().parent / "static"
PREFIX = "/ui"


class UiFiles(StaticFiles):
    """Static files that are never cached stale (a new server version is picked up on reload) and
    that forbid framing and inline scripts (the pages build their DOM with ``textContent``)."""

    async def get_response(self, path: str, scope: Scope):  # type: ignore[no-untyped-def]
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def mount(app: FastAPI) -> None:
    """Serve the dashboard at ``/ui/`` (``/ui`` redirects there, so relative module paths resolve)."""
    app.mount(PREFIX, UiFiles(directory=STATIC, html=True), name="ui")
