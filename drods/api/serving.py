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

**A request the HTTP parser refuses is answered in the API's error shape.** uvicorn answers a request
its parser cannot read — malformed, or a request line and headers beyond the parser's limit (a URL of
~70 KB: a label selector naming thousands of values) — before the application sees it, with a plain-text
400; `ParserRefusals` gives the same 400 in the API's words (SPEC API0c): ``{code, message, details}``, a
Kubernetes ``Status`` on a Kubernetes path (as far as the parser read it).
"""

from __future__ import annotations

from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from drods.api.status import error_body
from drods.errors import BadRequest
from drods.model import jsondoc

KEEP_ALIVE_SECONDS = 120


class ParserRefusals(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol, its parser's refusals answered as every other error of the API."""

    def send_400_response(self, msg: str) -> None:
        path = getattr(self, "url", b"").partition(b"?")[0].decode("latin-1")  # what the parser read of it
        refusal = BadRequest(f"{msg} The request is malformed, or its request line and headers are too long (a "
                             "query that long goes in a request body, or in parts).")
        body = jsondoc.dumps(error_body(path, refusal))
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body),
                 b"connection: close\r\n\r\n"]
        self.transport.write(b"".join([*head, body]))
        self.transport.close()


def serving_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """A uvicorn configuration with DRO-DS's keep-alive, its parser's refusals in the API's error shape and no
    access log (``options`` override)."""
    settings: dict[str, Any] = {"timeout_keep_alive": KEEP_ALIVE_SECONDS, "access_log": False,
                                "http": ParserRefusals} | options
    return uvicorn.Config(app, host=host, port=port, **settings)
