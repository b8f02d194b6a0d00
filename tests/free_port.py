"""A loopback port for a test server to bind later, chosen where nothing else is handed ports.

``bind(("127.0.0.1", 0))`` returns a port from the kernel's ephemeral range — the range outgoing
connections take their source ports from. Between choosing such a port and the server binding it,
any client connection of the run (to etcd, to a member, to another server) can take it. Ports below
that range are handed out only by asking for them, so a port chosen there stays free unless another
test server chooses it too (``ServerProcess`` then retries with another)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _below_ephemeral() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_port() -> int:
    """A port free now on 127.0.0.1, below the ephemeral range when there is room for it."""
    top = _below_ephemeral()
    for _ in range(100):
        port = random.randrange(LOWEST, top) if top > LOWEST + 1_000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free loopback port")
