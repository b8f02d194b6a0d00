"""``drods scheduler`` as its own process: a third-party plugin through a profile, and leader election.

Two scheduler processes share one etcd with an API server: only the lease holder binds (every
decision names its scheduler in the history); SIGKILL the leader and the other takes over within
the lease TTL. The profile enables a plugin that is installed only as an entry point.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from drods.scheduler.profile import Profile
from drods.scheduler.registry import load_entry_points
from drods.security.envelope import KEYRING_FILE
from drods.store.etcd import EtcdStore
from tests.scheduler.test_profile import PLUGIN_SRC
from tests.scheduler_e2e.conftest import Plane, eventually, fast_settings, placement, serve
from tests.server_process import ServerProcess

PROFILE = """
name: colourful
filters: [Readiness, NoBlue, ResourceFit, WaterLevelLimit]
scores: {PreferGreen: 1}
"""


@pytest.fixture
def plugin_dist(tmp_path: Path) -> Iterator[Path]:
    """A package installed only as a .dist-info with an entry point (on sys.path for this test)."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "drods_colour_plugins.py").write_text(PLUGIN_SRC)
    dist = root / "drods_colour_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: drods-colour-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [drods.scheduler.plugins]
        colour = drods_colour_plugins
    """))
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("drods_colour_plugins", None)
        importlib.invalidate_caches()


async def _colour_fleet(plane: Plane) -> None:
    for name in ("green", "blue", "red"):
        await plane.cluster(name, 10 if name == "blue" else 40, {"color": name})


async def test_custom_plugin_from_entry_point_in_profile(plugin_dist: Path, tmp_path: Path) -> None:
    from drods.store.sqlite import SqliteStore

    load_entry_points(refresh=True)
    profile = Profile.from_yaml(PROFILE)
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", profile=profile) as plane:
        await _colour_fleet(plane)
        await plane.seen("green", "blue", "red")
        st = await plane.place({"name": "paint", "replicas": 3, "resources": {"cpu": 1}})
        assert placement(st) == {"green": 3}
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "paint"})
        e = r.json()["items"][0]
        assert e["profile"] == "colourful" and e["filters"]["reasons"] == {"blue": "blue is banned"}
        assert e["scores"]["PreferGreen"] == {"green": 100.0} and e["baseWeights"] == {"PreferGreen": 1.0}


@pytest.fixture
async def etcd_plane(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Plane]:
    """An API server (no scheduler in it) over the session's etcd."""
    store = EtcdStore([etcd_endpoint])
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "api", settings=fast_settings(), scheduler=False) as plane:
        yield plane


def _info(proc: ServerProcess) -> dict[str, Any]:
    with proc.client() as c:
        return c.get("/api/v1/scheduler").json()  # type: ignore[no-any-return]


async def test_two_scheduler_processes_only_the_leader_binds(etcd_plane: Plane, etcd_endpoint: str,
                                                              plugin_dist: Path, tmp_path: Path) -> None:
    plane = etcd_plane
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE)
    for name in ("sched-1", "sched-2"):  # one keyring: Bindings are sealed at rest
        (tmp_path / name).mkdir()
        shutil.copy(tmp_path / "api" / KEYRING_FILE, tmp_path / name / KEYRING_FILE)
    procs = {name: ServerProcess(tmp_path / name, command="scheduler",
                                 args=["--store", f"etcd://{etcd_endpoint}", "--id", name, "--lease-ttl", "2",
                                       "--profile", str(profile), "--log-level", "warning"],
                                 env={"PYTHONPATH": str(plugin_dist)})
             for name in ("sched-1", "sched-2")}
    try:
        for p in procs.values():
            p.start()
        await _colour_fleet(plane)

        async def elected() -> str | None:
            r = await plane.call("GET", "/api/v1/scheduler")
            return r.json()["leader"]  # type: ignore[no-any-return]

        leader = await eventually(elected, what="a scheduler leader")
        standby = next(n for n in procs if n != leader)
        assert _info(procs[leader])["local"]["leading"] is True
        assert _info(procs[standby])["local"]["leading"] is False

        for i in range(5):
            await plane.bind({"name": f"before-{i}", "replicas": 2, "resources": {"cpu": 1}})
        for i in range(5):
            st = await plane.decided(f"before-{i}", 20)
            assert placement(st) == {"green": 2}, st
        r = await plane.call("GET", "/api/v1/history/schedules")
        assert {e["scheduler"] for e in r.json()["items"]} == {leader}
        # The standby kept a warm view and decided nothing.
        info = _info(procs[standby])["local"]
        assert info["synced"] and info["clusters"] == 3
        with procs[standby].client() as c:
            assert "karmada_scheduler_schedule_attempts_total{" not in c.get("/metrics").text

        # Kill the leader outright: the lease expires and the standby takes over.
        killed = time.monotonic()
        procs[leader].kill()
        await plane.bind({"name": "after", "replicas": 2, "resources": {"cpu": 1}})
        st = await plane.decided("after", 20)
        took = time.monotonic() - killed
        assert placement(st) == {"green": 2}
        assert took < 2 + 5, took  # lease TTL 2 s, plus keep-alive granularity and scheduling
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "after"})
        assert r.json()["items"][0]["scheduler"] == standby
        assert (await plane.call("GET", "/api/v1/scheduler")).json()["leader"] == standby
    finally:
        for p in procs.values():
            p.stop(check=False)
    assert all(p.proc is None for p in procs.values())


async def test_scheduler_process_exits_cleanly(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path / "s", command="scheduler",
                         args=["--store", f"sqlite://{tmp_path / 's.db'}", "--log-level", "warning"])
    with proc:
        async def ready() -> bool:
            try:
                return bool(await asyncio.to_thread(lambda: _info(proc)["local"]["leading"]))
            except httpx.HTTPError:
                return False

        await eventually(ready, what="a lone scheduler to lead")
    # ServerProcess.__exit__ asserts the SIGTERM exit status was 0
