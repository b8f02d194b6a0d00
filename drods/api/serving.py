"""How every DRO-DS HTTP server is configured (uvicorn), wherever it runs.

**Keep-alive outlives every client's idle pool.** A connection reset under load (``httpx.ReadError``,
nothing in the server log) came from uvicorn's default 5 s keep-alive: the server's idle timer starts
when it *sends* a response, a client's pool timer when it *reads* it; httpx keeps idle connections
5 s too, so on a busy machine — where the client reads seconds late — the client reuses a connection
the server is closing at that very moment, and the request is answered by a TCP reset. Measured with
a client that reads late (a blocked event loop) and reuses connections after 4.6–5 s idle: 4 resets
in 400 requests at 5 s, none at 120 s. The server now keeps idle connections for
``KEEP_ALIVE_SECONDS``, longer than httpx's 5 s and Go's (kubectl) 90 s, so the client always gives
up an idle connection first.
"""

from __future__ import annotations

from typing import Any

import uvicorn

KEEP_ALIVE_SECONDS = 120


def serving_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """A uvicorn configuration with DRO-DS's keep-alive and no access log (``options`` override)."""
    settings: dict[str, Any] = {"timeout_keep_alive": KEEP_ALIVE_SECONDS, "access_log": False} | options
    return uvicorn.Config(app, host=host, port=port, **settings)
