"""RS256 tokens signed by a key of a JWKS URL: the key set is fetched off the event loop, and tokens
naming key ids the set does not have do not make each request a fetch."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from drods.api.auth import Role, TokenAuthority
from drods.errors import ApiError


@dataclass
class Jwks:
    url: str
    delay: float = 0.0
    fetches: int = 0
    keys: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def jwks() -> Iterator[tuple[Jwks, rsa.RSAPrivateKey]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    state = Jwks(url="", keys=[{**public, "kid": "k1", "use": "sig", "alg": "RS256"}])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            state.fetches += 1
            time.sleep(state.delay)
            body = json.dumps({"keys": state.keys}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, key
    finally:
        server.shutdown()
        server.server_close()


def token(key: rsa.RSAPrivateKey, kid: str, subject: str = "sso-user") -> str:
    now = int(time.time())
    return jwt.encode({"sub": subject, "role": "viewer", "iat": now, "exp": now + 300}, key, algorithm="RS256",
                      headers={"kid": kid})


async def test_a_slow_key_set_is_fetched_without_holding_the_event_loop(jwks: tuple[Jwks, Any]) -> None:
    state, key = jwks
    state.delay = 0.6
    authority = TokenAuthority(b"x" * 48, jwks_url=state.url)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beat = asyncio.create_task(ticker())
    try:
        principal = await authority.verify_async(token(key, "k1"))
    finally:
        beat.cancel()
    assert principal.subject == "sso-user" and principal.role is Role.VIEWER
    assert state.fetches == 1
    # the loop went on while the key set was fetched (held, it would not have ticked at all)
    assert ticks >= 10, ticks
    # a second request with the same token is answered from the cache, on the loop
    assert (await authority.verify_async(token(key, "k1"))).subject == "sso-user"
    # HS256 tokens of DRO-DS itself never wait on the key set
    own = authority.issue(Role.OPERATOR, subject="ops")
    assert (await authority.verify_async(own)).subject == "ops"


async def test_made_up_key_ids_do_not_make_every_request_a_fetch(jwks: tuple[Jwks, Any]) -> None:
    state, key = jwks
    authority = TokenAuthority(b"x" * 48, jwks_url=state.url)
    await authority.verify_async(token(key, "k1"))
    before = state.fetches
    for i in range(20):
        with pytest.raises(ApiError) as err:
            await authority.verify_async(token(key, f"made-up-{i}", subject=f"u{i}"))
        assert err.value.status == 401
    assert state.fetches - before <= 1
