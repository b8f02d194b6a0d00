"""Writes of many objects at once: keys the caller knows are absent are created without a read and
guarded by their absence; a caller's own object can go in the same transaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drods.errors import Conflict
from drods.model import jsondoc
from drods.model.kinds import SERVICE_ROUTE
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store import Compare, Put
from drods.store.base import Store
from drods.store.sqlite import SqliteStore


def route(name: str) -> dict[str, Any]:
    return {"apiVersion": SERVICE_ROUTE.api_version, "kind": SERVICE_ROUTE.kind, "metadata": {"name": name},
            "spec": {"serviceId": name, "strategy": "experienceFirst", "routes": []}}


class CountingGets(SqliteStore):
    gets = 0

    async def get(self, key: str):  # type: ignore[no-untyped-def]
        self.gets += 1
        return await super().get(key)


async def test_absent_keys_are_created_without_a_read_and_refused_if_they_exist(tmp_path: Path) -> None:
    store = CountingGets(str(tmp_path / "s.db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    try:
        key = SERVICE_ROUTE.key("a.example")
        await registry.batch_upsert([(SERVICE_ROUTE, route("a.example"))], trusted=True, absent={key})
        assert store.gets == 0
        kv = await store.get(key)
        assert kv is not None and jsondoc.loads(kv.value)["metadata"]["uid"]
        before = kv.mod_revision
        with pytest.raises(Conflict):  # the caller's cache was wrong: the guard answers, nothing changes
            await registry.batch_upsert([(SERVICE_ROUTE, route("a.example")), (SERVICE_ROUTE, route("b.example"))],
                                        trusted=True, absent={key, SERVICE_ROUTE.key("b.example")})
        assert (await store.get(key)).mod_revision == before  # type: ignore[union-attr]
        assert await store.get(SERVICE_ROUTE.key("b.example")) is None
    finally:
        await store.close()


async def test_a_callers_own_write_lands_in_the_same_transaction_or_nothing_does(tmp_path: Path) -> None:
    store: Store = SqliteStore(str(tmp_path / "s.db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    try:
        own = "/own/binding"
        rev0 = await store.put(own, b"v0")
        key = SERVICE_ROUTE.key("a.example")
        made = await registry.upsert_with([(SERVICE_ROUTE, route("a.example"))],
                                          [(Compare(own, "mod", "=", rev0), Put(own, b"v1"))], trusted=True,
                                          absent={key})
        own_kv, route_kv = await store.get(own), await store.get(key)
        assert own_kv is not None and route_kv is not None
        assert own_kv.value == b"v1" and own_kv.mod_revision == route_kv.mod_revision == made
        with pytest.raises(Conflict):  # the caller's object moved since it read it: nothing is written
            await registry.upsert_with([(SERVICE_ROUTE, route("b.example"))],
                                       [(Compare(own, "mod", "=", rev0), Put(own, b"v2"))], trusted=True)
        assert (await store.get(own)).value == b"v1"  # type: ignore[union-attr]
        assert await store.get(SERVICE_ROUTE.key("b.example")) is None
        store.max_txn_ops = 2  # more than one transaction holds: the caller is told, nothing is written
        assert await registry.upsert_with([(SERVICE_ROUTE, route("b.example")), (SERVICE_ROUTE, route("c.example"))],
                                          [(Compare(own, "mod", "=", made), Put(own, b"v2"))]) is None
        assert await store.get(SERVICE_ROUTE.key("b.example")) is None
    finally:
        await store.close()
