"""The member controllers cache Works as records without their manifests, and read those from the
store when they need them: across updates, deletions and relists the records and the indexes over
them follow the store, and a record older than the store never writes its Work back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.controllers import manifests as M
from drods.controllers.fleet import MemberFleet, MemberInformers
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, decode_work, manifests_digest
from drods.machinery.manager import Manager
from drods.machinery.tasks import stop_tasks
from drods.members.clients import MemberClients
from drods.model import jsondoc
from drods.model.kinds import WORK
from drods.model.work import Ref, work_labels, work_name
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store import KeyValue, Store
from tests.monitor_e2e.conftest import eventually


def manifests(image: str, *, config: bool = True) -> list[dict[str, Any]]:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "shop"},
          "data": {"mode": "fast"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
    return [cm, deploy] if config else [deploy]


def work(binding: str, cluster: str, image: str, **status: Any) -> dict[str, Any]:
    return {"apiVersion": WORK.api_version, "kind": WORK.kind,
            "metadata": {"name": work_name(binding, cluster), "labels": work_labels(binding, cluster)},
            "spec": {"cluster": cluster, "binding": binding, "manifests": manifests(image), "hash": image},
            "status": status}


class Running:
    def __init__(self, store: Store, tmp: Path) -> None:
        self.store = store
        self.registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp / "encryption.key")))
        self.manager = Manager(store, self.registry)
        self.informers = MemberInformers.of(self.manager)
        self.fleet = MemberFleet(store, self.registry, self.informers,
                                 MemberClients(self.registry, MemberSettings().member_options()))
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.manager.informers.run())
        await asyncio.wait_for(self.fleet.start(), 20)

    async def stop(self) -> None:
        self.fleet.stop()
        if self.task is not None:
            await stop_tasks([self.task])

    def record(self, binding: str, cluster: str) -> WorkRecord | None:
        return self.fleet.work(WORK.key(work_name(binding, cluster)))


@pytest.fixture
async def running(store: Store, tmp_path: Path) -> AsyncIterator[Running]:
    await store.delete_prefix("/")
    r = Running(store, tmp_path)
    yield r
    await r.stop()


async def put(store: Store, obj: dict[str, Any], expect: int | None = None) -> int:
    return await store.put(WORK.key(obj["metadata"]["name"]), jsondoc.dumps(obj), expect_revision=expect)


async def test_a_cached_work_keeps_what_controllers_read_and_its_manifests_come_from_the_store(
        running: Running) -> None:
    store, fleet = running.store, running.fleet
    rev = await put(store, work("web", "a", "nginx:1", applied=True, observedHash="nginx:1"))
    await running.start()
    rec = running.record("web", "a")
    assert rec is not None and rec.revision == rev and (rec.cluster, rec.binding, rec.hash) == ("a", "web", "nginx:1")
    assert not hasattr(rec, "manifests") and rec.main == Ref("apps/v1", "Deployment", "shop", "web")
    assert rec.refs == (Ref("v1", "ConfigMap", "shop", "web-config"), rec.main)
    assert rec.digest == manifests_digest(manifests("nginx:1")) != manifests_digest(manifests("nginx:2"))
    assert rec.status == {"applied": True, "observedHash": "nginx:1"}
    assert fleet.works_of("web") == {"a": rec} and fleet.wants("a", rec.refs[0])
    whole = await fleet.work_object(rec)
    assert whole is not None and whole["spec"]["manifests"] == manifests("nginx:1")
    assert whole["metadata"]["resourceVersion"] == str(rev)

    # an update: the record follows; the old one neither reads nor writes the newer Work
    newer = work("web", "a", "nginx:2")
    newer["spec"]["manifests"] = manifests("nginx:2", config=False)
    rev2 = await put(store, newer, expect=rev)
    await eventually(lambda: _true((r := running.record("web", "a")) is not None and r.revision == rev2),
                     what="the update in the cache")
    assert await fleet.work_object(rec) is None
    assert not await fleet.write_work_status(rec, {"applied": False})
    kv = await store.get(rec.key)
    assert kv is not None and kv.mod_revision == rev2
    assert not fleet.wants("a", Ref("v1", "ConfigMap", "shop", "web-config"))  # the update dropped it
    fresh = running.record("web", "a")
    assert fresh is not None and fresh.hash == "nginx:2" and fresh.status == {}
    # a status write from the fresh record keeps the manifests the cache does not hold
    assert await fleet.write_work_status(fresh, {"applied": True, "observedHash": "nginx:2"})
    kv = await store.get(rec.key)
    assert kv is not None and jsondoc.loads(kv.value)["spec"]["manifests"] == manifests("nginx:2", config=False)
    assert jsondoc.loads(kv.value)["status"] == {"applied": True, "observedHash": "nginx:2"}

    # a deletion: the record and every index over it go
    await store.delete(rec.key)
    await eventually(lambda: _true(running.record("web", "a") is None), what="the deletion in the cache")
    assert fleet.works_of("web") == {} and not fleet.works_by_cluster.get("a")
    assert not fleet.wants("a", Ref("apps/v1", "Deployment", "shop", "web"))


async def test_a_work_just_decoded_is_not_read_back_from_the_store(running: Running,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The execution controller applies a Work moments after its event: the informer's decoder keeps
    the last Works it decoded, so that read costs no store round trip; older ones are read as before."""
    store, fleet = running.store, running.fleet
    rev = await put(store, work("web", "a", "nginx:1"))
    await running.start()
    rec = running.record("web", "a")
    assert rec is not None
    reads: list[str] = []
    real_get = store.get

    async def counted(key: str) -> KeyValue | None:
        reads.append(key)
        return await real_get(key)

    monkeypatch.setattr(store, "get", counted)
    whole = await fleet.work_object(rec)
    assert whole is not None and whole["spec"]["manifests"] == manifests("nginx:1")
    assert whole["metadata"]["resourceVersion"] == str(rev) and reads == []
    # a status write builds on the kept Work without reading it, and the record of the write is kept next
    assert await fleet.write_work_status(rec, {"applied": True, "observedHash": "nginx:1"})
    assert reads == []
    await eventually(lambda: _true((r := running.record("web", "a")) is not None and r.revision > rev),
                     what="the status write in the cache")
    fresh = running.record("web", "a")
    assert fresh is not None and (await fleet.work_object(fresh) or {}).get("status") == {
        "applied": True, "observedHash": "nginx:1"}
    assert reads == []
    # the window is bounded: once others were decoded after it, a Work is read from the store
    assert running.informers.recent_works is not None
    running.informers.recent_works.size = 1
    await put(store, work("web", "b", "nginx:1"))
    await eventually(lambda: _true(running.record("web", "b") is not None), what="the second Work in the cache")
    again = await fleet.work_object(fresh)
    assert again is not None and again["spec"]["manifests"] == manifests("nginx:1") and reads == [fresh.key]


async def test_a_relist_reports_what_changed_while_the_watch_was_away(running: Running) -> None:
    store, fleet = running.store, running.fleet
    rev_a = await put(store, work("web", "a", "nginx:1"))
    await put(store, work("web", "b", "nginx:1"))
    await running.start()
    assert set(fleet.works_of("web")) == {"a", "b"}
    await stop_tasks([running.task] if running.task else [])  # the watch goes away …
    await store.delete(WORK.key(work_name("web", "b")))
    changed = work("web", "a", "nginx:3", applied=True)
    await put(store, changed, expect=rev_a)
    await put(store, work("api", "c", "httpd:2"))
    running.task = asyncio.create_task(running.manager.informers.run())  # … and comes back: a relist
    await eventually(lambda: _true(set(fleet.works_of("web")) == {"a"} and "api" in fleet.works_by_binding),
                     what="the relist in the indexes")
    rec = running.record("web", "a")
    assert rec is not None and rec.hash == "nginx:3" and rec.status == {"applied": True}
    whole = await fleet.work_object(rec)
    assert whole is not None and whole["spec"]["manifests"] == manifests("nginx:3")
    assert fleet.works_by_cluster.get("b") == set()


def test_a_plan_and_the_work_it_writes_have_one_digest_and_a_kept_summary_has_no_manifests() -> None:
    deploy = {**manifests("nginx:1")[1], "metadata": {"name": "web", "namespace": "shop", "generation": 1}}
    planned = M.plan("web", "uid-1", deploy, [M.Target("a", 2, {"env": "prod"})], [manifests("nginx:1")[0]], [])["a"]
    assert isinstance(planned, M.ManifestSet) and planned.complete
    stored = work("web", "a", "nginx:1")
    stored["spec"].update(manifests=planned.manifests, hash=planned.hash)
    rec = decode_work(KeyValue(WORK.key(stored["metadata"]["name"]), jsondoc.dumps(stored), 3, 7, 1, 0))
    assert rec is not None and rec.digest == planned.digest  # else every pass would write the Work again
    kept = planned.summary()
    assert kept.manifests == [] and not kept.complete
    assert (kept.hash, kept.digest, kept.main_hash, kept.refs) == \
        (planned.hash, planned.digest, planned.main_hash, planned.refs)


def test_a_record_is_none_for_what_is_not_a_work() -> None:
    assert decode_work(KeyValue(WORK.key("x"), b"[]", 3, 7, 1, 0)) is None
    assert decode_work(KeyValue(WORK.key("x"), b"not json", 3, 7, 1, 0)) is None
    assert decode_work(KeyValue(WORK.key("x"), b'{"metadata": {"name": "x"}}', 3, 7, 1, 0)) is None


async def _true(value: bool) -> bool:
    return value
