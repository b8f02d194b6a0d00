"""A resolve that only looks (``?dryRun=All``: an operator checking where a route goes, a dashboard) is
no user's demand: however often a viewer looks from another site, the learned users and the replicas
stay where the clients are; the same viewer token resolving as a client does move them. Every wait
is a deadline; the one bounded watch is the learner's own hysteresis (``SETTLE_S``) plus margin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

from drods.model.annotations import LEARNED_USERS
from tests.scheduler_e2e.conftest import Plane, eventually
from tests.users_e2e.test_follow_users import RESOLVE, SETTLE_S, Demand, binding, follows, majority, plane, setup

__all__ = ["plane"]  # the fixture, shared with the follow-users tests


async def _counts(plane: Plane) -> dict[str, int]:
    """Client site → requests counted for shop.example, summed over the API processes."""
    kvs, _ = await plane.store.range("/steering/demand/shop.example/")
    out: dict[str, int] = {}
    for kv in kvs:
        for site, n in (json.loads(kv.value).get("counts") or {}).items():
            out[site] = out.get(site, 0) + int(n)
    return out


@contextlib.asynccontextmanager
async def looking(plane: Plane, site: str, errors: list[str]) -> AsyncIterator[None]:
    """A viewer looking from ``site`` ~50 times a second with ``?dryRun=All``."""
    async def run() -> None:
        i = 0
        while True:
            i += 1
            r = await plane.call("GET", RESOLVE.format(site=site) + f"{i}&dryRun=All", role="viewer")
            if r.status_code != 200 or r.json().get("dryRun") is not True:
                errors.append(r.text)
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_looking_resolves_do_not_move_learned_users(plane: Plane) -> None:
    await setup(plane)
    errors: list[str] = []
    async with Demand(plane).running() as demand:  # clients from east, ~20 a second
        obj = await follows(plane, "east", "c-east", within_s=SETTLE_S + 15.0)
        learned = obj["metadata"]["annotations"][LEARNED_USERS]
        first_time = obj["status"]["scheduledTime"]
        async with looking(plane, "west", errors):
            east_before = (await _counts(plane)).get("east", 0)
            deadline = time.monotonic() + SETTLE_S + 3.0  # longer than a move from west would take to settle
            while time.monotonic() < deadline:
                obj = await binding(plane)
                assert obj["metadata"]["annotations"][LEARNED_USERS] == learned, "looking moved the learned users"
                assert majority(obj) == "c-east" and obj["status"]["scheduledTime"] == first_time, obj["status"]
                await asyncio.sleep(0.2)
            counts = await _counts(plane)
            assert counts.get("east", 0) > east_before, "the clients' demand kept being counted meanwhile"
            assert "west" not in counts, counts
        assert not errors, errors[:3]

        # the same token resolving as a client (no dryRun) is demand: the replicas follow it
        demand.site = "west"
        await follows(plane, "west", "c-west", within_s=SETTLE_S + 15.0)
    assert not demand.errors, demand.errors[:3]


async def test_a_bad_dry_run_value_is_refused(plane: Plane) -> None:
    await setup(plane)
    before = await _counts(plane)
    r = await plane.call("GET", RESOLVE.format(site="west") + "&dryRun=Yes", role="viewer")
    assert r.status_code == 400 and r.json()["code"] == "BAD_REQUEST", r.text
    assert r.json()["details"] == {"dryRun": "Yes"}

    async def flushed() -> bool:  # a client's next resolve writes the counts; the refused one is not in them
        r = await plane.call("GET", RESOLVE.format(site="east"), role="viewer")
        assert r.status_code == 200, r.text
        return (await _counts(plane)).get("east", 0) > before.get("east", 0)

    await eventually(flushed, 10.0, "a client's resolve to be counted")
    assert "west" not in await _counts(plane)
