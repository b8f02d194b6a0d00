"""How `drods sim fault NAME …` reaches a running sim.

A running sim writes ``STATE_DIR/NAME.json`` (mode 0600): its pid, API server URL, kubeconfig path and
a *control port* on 127.0.0.1 with a random token. The control port is separate from the API port so
it still answers while the API is "down". Protocol: one JSON line in, one JSON line out, e.g.
``{"token": "…", "action": "fault", "mode": "slow", "ms": 200}`` → ``{"ok": true, "fault": {…}}``.
The state file is removed when the sim exits cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_LINE = 64 * 1024


def state_path(state_dir: Path, name: str) -> Path:
    return state_dir / f"{name}.json"


def write_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=2)
    os.replace(tmp, path)


def read_state(state_dir: Path, name: str) -> dict[str, Any]:
    path = state_path(state_dir, name)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise LookupError(f"no running sim named {name!r} (no {path})") from e
    return data


def list_states(state_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(state_dir.glob("*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


class ControlServer:
    """The sim's side: accepts commands from `send_command` on 127.0.0.1."""

    def __init__(self, handler: Handler, port: int = 0) -> None:
        self.handler = handler
        self.token = secrets.token_urlsafe(24)
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, limit=MAX_LINE)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError:
                reply: dict[str, Any] = {"ok": False, "error": "send one JSON object per line"}
            else:
                if not secrets.compare_digest(str(request.get("token", "")), self.token):
                    reply = {"ok": False, "error": "bad token"}
                else:
                    try:
                        reply = {"ok": True, **await self.handler(request)}
                    except ValueError as e:
                        reply = {"ok": False, "error": str(e)}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()


def send_command(state_dir: Path, name: str, payload: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """The CLI's side (blocking): send one command to the named sim and return its reply."""
    import socket

    state = read_state(state_dir, name)
    with socket.create_connection(("127.0.0.1", int(state["controlPort"])), timeout=timeout) as sock:
        sock.sendall(json.dumps({**payload, "token": state["controlToken"]}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            buf += chunk
    reply: dict[str, Any] = json.loads(buf or b"{}")
    if not reply.get("ok"):
        raise RuntimeError(reply.get("error", "sim refused the command"))
    return reply
