"""A ``drods serve`` process watches each key prefix once: its components share the manager's informers."""

from __future__ import annotations

import re
from pathlib import Path

from drods.model.keys import STATUS_PREFIX, SUBSCRIPTIONS_PREFIX, SURGE_KEY
from drods.model.kinds import BINDING, CLUSTER
from tests.server_process import ServerProcess, wait_until

WATCHES = re.compile(r'^drods_store_watches\{prefix="([^"]*)"\} (\S+)$', re.MULTILINE)
# read by several components each (scheduler, monitoring, member controllers, steering, …)
SHARED = (CLUSTER.key_prefix(), STATUS_PREFIX, SURGE_KEY, BINDING.key_prefix(), SUBSCRIPTIONS_PREFIX)


def test_serve_opens_one_store_watch_per_prefix(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data") as server, server.client() as http:
        watches: dict[str, float] = {}

        def all_open() -> bool:
            r = http.get("/metrics")
            assert r.status_code == 200, r.text
            watches.clear()
            watches.update({prefix: float(n) for prefix, n in WATCHES.findall(r.text)})
            return all(watches.get(p, 0) >= 1 for p in SHARED)

        wait_until(all_open, 30, "the components' watches")
        assert {p: watches[p] for p in SHARED} == {p: 1.0 for p in SHARED}
        assert {p: n for p, n in watches.items() if n > 1} == {}, watches
