"""Flow affinity's answers (`drods.steering.flows.resolve`): ``pinned`` is true when the answer is the
instance the flow already had, and a re-pin's reason names its case (docs/steering.md, flow affinity).

On a MAX route (no instance meets the SLA: ``eligible`` is empty) every resolution re-pinned and said
``pinned: false`` with "X no longer meets the SLA"; an expired pin and a flow id pinned from another
client site said the same."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.model.keys import flow_key
from drods.steering.flows import resolve
from drods.store import Store
from drods.store.sqlite import SqliteStore

SID = "ghost.example"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = SqliteStore(str(tmp_path / "drods.db"))
    yield s
    await s.close()


def route(site: str, *clusters: str, eligible: tuple[str, ...] | None = None, metric: Any = 10.0) -> dict[str, Any]:
    w = 1.0 / len(clusters)
    return {"clientSite": site, "instances": [{"cluster": c, "weight": w, "metric": metric} for c in clusters],
            "eligible": list(clusters if eligible is None else eligible)}


async def test_a_max_route_keeps_the_flow_on_its_instance(store: Store) -> None:
    lhr = route("LHR", "azure-lhr", eligible=(), metric="MAX")
    first = await resolve(store, SID, lhr, "f1", 300)
    assert first is not None and (first.cluster, first.pinned) == ("azure-lhr", False)
    assert first.reason == "a new flow: pinned to azure-lhr from the route"
    for _ in range(2):
        again = await resolve(store, SID, lhr, "f1", 300)
        assert again is not None and (again.cluster, again.pinned) == ("azure-lhr", True), again
        assert "no instance meets the SLA for LHR" in again.reason and "no longer" not in again.reason


async def test_a_max_route_that_moved_repins_saying_so(store: Store) -> None:
    await resolve(store, SID, route("LHR", "azure-lhr", eligible=(), metric="MAX"), "f1", 300)
    moved = await resolve(store, SID, route("LHR", "gcp-sin", eligible=(), metric="MAX"), "f1", 300)
    assert moved is not None and (moved.cluster, moved.pinned) == ("gcp-sin", False)
    assert moved.reason.startswith("azure-lhr is no longer eligible for LHR (no instance meets the SLA"), moved


async def test_an_instance_leaving_the_eligible_list_repins(store: Store) -> None:
    await resolve(store, SID, route("DFW", "aws-dfw"), "f1", 300)
    kept = await resolve(store, SID, route("DFW", "azure-lhr", eligible=("aws-dfw", "azure-lhr")), "f1", 300)
    assert kept is not None and (kept.cluster, kept.pinned) == ("aws-dfw", True)
    assert kept.reason == "the flow keeps its instance (within the SLA)"
    left = await resolve(store, SID, route("DFW", "azure-lhr"), "f1", 300)
    assert left is not None and (left.cluster, left.pinned) == ("azure-lhr", False)
    assert left.reason.startswith("aws-dfw is no longer eligible for DFW"), left


async def test_a_flow_id_from_another_client_site_is_not_called_ineligible(store: Store) -> None:
    """f1 pinned from DFW to aws-dfw, then asked from LHR where aws-dfw meets the SLA too."""
    await resolve(store, SID, route("DFW", "aws-dfw"), "f1", 300)
    lhr = await resolve(store, SID, route("LHR", "aws-dfw"), "f1", 300)
    assert lhr is not None and (lhr.cluster, lhr.pinned) == ("aws-dfw", False)
    assert lhr.reason == "flow id 'f1' was pinned to aws-dfw from client site DFW, not LHR: pinned to aws-dfw " \
        "from the route"
    assert "no longer" not in lhr.reason


async def test_an_expired_pin_says_so(store: Store) -> None:
    """The pin's lease is gone though its key is still read (expiry sweeps run apart from reads)."""
    await store.put(flow_key(SID, "f1"), json.dumps({"cluster": "aws-dfw", "clientSite": "DFW",
                                                     "lease": 987654321}).encode())
    res = await resolve(store, SID, route("DFW", "aws-dfw"), "f1", 300)
    assert res is not None and (res.cluster, res.pinned) == ("aws-dfw", False)
    assert res.reason == "the flow's pin to aws-dfw expired: pinned to aws-dfw from the route"


async def test_a_look_answers_without_pinning_or_renewing(store: Store) -> None:
    """``pin=False`` (``?dryRun=All``): a new flow's answer is what it would get, nothing is written; a
    pinned flow is answered its instance, its pin left as it was."""
    dfw = route("DFW", "aws-dfw")
    look = await resolve(store, SID, dfw, "f1", 300, pin=False)
    assert look is not None and (look.cluster, look.pinned) == ("aws-dfw", False)
    assert "would be pinned to aws-dfw" in look.reason and "not pinned" in look.reason
    assert await store.get(flow_key(SID, "f1")) is None
    await resolve(store, SID, dfw, "f1", 300)
    pinned = await store.get(flow_key(SID, "f1"))
    assert pinned is not None
    kept = await resolve(store, SID, route("DFW", "azure-lhr", eligible=("aws-dfw", "azure-lhr")), "f1", 300,
                         pin=False)
    assert kept is not None and (kept.cluster, kept.pinned) == ("aws-dfw", True)
    moved = await resolve(store, SID, route("DFW", "azure-lhr"), "f1", 300, pin=False)
    assert moved is not None and (moved.cluster, moved.pinned) == ("azure-lhr", False)
    after = await store.get(flow_key(SID, "f1"))
    assert after is not None and after.mod_revision == pinned.mod_revision, "a look rewrote the pin"
