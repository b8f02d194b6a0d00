"""The member-side list-and-watch loop (`drods.members.reflector`) against a fake member: a listing
replaces, events follow in order on the event loop, an expiry lists again at once and any other failure
``retry_seconds`` later, a resync lists after each watch length, and ``synced`` says when it is current."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from drods.members.reflector import Deliver, KindCalls, Reflector, without_managed_fields
from tests.members.waiting import wait_until

pytestmark = pytest.mark.timeout(60)
Obj = dict[str, Any]


class Expired(Exception):
    pass


def _obj(name: str) -> Obj:
    return {"metadata": {"name": name}}


class _Source:
    """A member: each listing fails as ``list_failures`` say in turn, then lists ``items``; each watch
    fails as ``watch_failures`` say (None: it runs), delivers ``events`` from a worker thread once, and
    then ends after its ``seconds`` (``ends``) or goes on until cancelled."""

    def __init__(self, *, list_failures: list[BaseException] | None = None,
                 watch_failures: list[BaseException | None] | None = None,
                 events: list[tuple[str, Obj]] | None = None, ends: bool = False) -> None:
        self.list_failures = list_failures or []
        self.watch_failures = watch_failures or []
        self.events = events or []
        self.ends = ends
        self.items = [_obj("a"), _obj("b")]
        self.lists: list[float] = []  # when each listing was made
        self.watched: list[str] = []  # the resourceVersion each watch started from
        self.lengths: list[float] = []  # the seconds each watch was asked to run
        self.failed_at = 0.0
        self.gate = asyncio.Event()  # a listing waits until it is set
        self.gate.set()

    async def list(self) -> tuple[list[Obj], str]:
        await self.gate.wait()
        self.lists.append(time.monotonic())
        if self.list_failures:
            self.failed_at = time.monotonic()
            raise self.list_failures.pop(0)
        return list(self.items), f"rv{len(self.lists)}"

    async def watch(self, resource_version: str, seconds: float, deliver: Deliver) -> str:
        self.watched.append(resource_version)
        self.lengths.append(seconds)
        failure = self.watch_failures.pop(0) if self.watch_failures else None
        if failure is not None:
            self.failed_at = time.monotonic()
            raise failure
        events, self.events = self.events, []
        await asyncio.to_thread(lambda: [deliver(*e) for e in events])
        if not self.ends:
            await asyncio.Event().wait()
        await asyncio.sleep(seconds)
        return resource_version + "+"


class _Held:
    """What a reflector's user holds: the names listed, then changed by each event."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ops: list[tuple[str, str]] = []  # ("REPLACE", "a,b") or (event, name), in order
        self.threads: set[int] = set()  # where the events were applied
        self.unsynced = 0

    def replace(self, names: list[str]) -> None:
        self.names = list(names)
        self.ops.append(("REPLACE", ",".join(names)))

    def apply(self, event: str, name: str) -> None:
        self.threads.add(threading.get_ident())
        self.ops.append((event, name))
        if event == "DELETED":
            self.names.remove(name)
        else:
            self.names.append(name)


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _reflector(source: _Source, held: _Held, *, retry_seconds: float = 3600, watch_seconds: float = 60,
               **kw: Any) -> Reflector[str]:
    def unsynced() -> None:
        held.unsynced += 1

    return Reflector[str](name="fake", list_call=source.list, watch_call=source.watch, replace=held.replace,
                          apply=held.apply, transform=_name, unsynced=unsynced,
                          expired=lambda e: isinstance(e, Expired), watch_seconds=watch_seconds,
                          retry_seconds=retry_seconds, **kw)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_listing_then_its_events_in_order_on_the_event_loop() -> None:
    source = _Source(events=[("ADDED", _obj("c")), ("DELETED", _obj("a")), ("MODIFIED", _obj("c2"))])
    held = _Held()
    r = _reflector(source, held)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(held.ops) == 4, 5.0, "the listing and three events")
    assert held.ops == [("REPLACE", "a,b"), ("ADDED", "c"), ("DELETED", "a"), ("MODIFIED", "c2")]
    assert held.names == ["b", "c", "c2"] and r.synced
    assert held.threads == {threading.get_ident()}  # delivered from a worker thread, applied here
    assert source.watched == ["rv1"]  # from the listing's resourceVersion
    await _stop(task)


async def test_an_expired_watch_lists_again_at_once_and_a_broken_one_waits_retry_seconds() -> None:
    expired, held = _Source(watch_failures=[Expired()]), _Held()
    r = _reflector(expired, held, retry_seconds=3600)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(expired.lists) == 2 and r.synced, 5.0, "listed again at once")
    assert expired.watched == ["rv1", "rv2"] and held.unsynced == 1
    await _stop(task)

    broken, held = _Source(watch_failures=[ConnectionResetError("reset")]), _Held()
    r = _reflector(broken, held, retry_seconds=0.3)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(broken.lists) == 2 and r.synced, 5.0, "listed again after retry_seconds")
    assert broken.lists[1] - broken.failed_at >= 0.3
    await _stop(task)


async def test_an_expired_listing_waits_unless_told_to_list_again_at_once() -> None:
    source, held = _Source(list_failures=[Expired()]), _Held()
    r = _reflector(source, held, retry_seconds=3600)  # not synced: as any failure
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(source.lists) == 1 and held.unsynced == 1, 5.0, "the failed listing")
    await asyncio.sleep(0.05)
    assert len(source.lists) == 1 and not r.synced
    await _stop(task)

    source, held = _Source(list_failures=[Expired()]), _Held()
    r = _reflector(source, held, retry_seconds=3600, expired_unsynced=True)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(source.lists) == 2 and r.synced, 5.0, "listed again at once")
    await _stop(task)


async def test_a_resync_lists_again_after_each_watch_and_stays_synced() -> None:
    source, held = _Source(ends=True), _Held()
    r = _reflector(source, held, watch_seconds=0.01, resync=True)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(source.lists) >= 3, 5.0, "three listings")
    assert source.watched[:2] == ["rv1", "rv2"] and r.synced and held.unsynced == 0
    await _stop(task)

    source, held = _Source(ends=True), _Held()  # without: the watch goes on from where it stopped
    r = _reflector(source, held, watch_seconds=0.01)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(source.watched) >= 3, 5.0, "three watches")
    assert source.watched[:3] == ["rv1", "rv1+", "rv1++"] and len(source.lists) == 1
    await _stop(task)


async def test_each_watch_runs_a_length_of_its_own_up_to_watch_seconds() -> None:
    """Between half of ``watch_seconds`` and all of it, drawn per watch: members joined together do not
    end their watches (and list again) all at once every length."""
    source, held = _Source(ends=True), _Held()
    r = _reflector(source, held, watch_seconds=0.02, resync=True)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: len(source.lengths) >= 20, 5.0, "twenty watches")
    await _stop(task)
    assert all(0.01 <= s <= 0.02 for s in source.lengths), source.lengths
    assert max(source.lengths) - min(source.lengths) > 0.003, source.lengths


async def test_synced_only_once_listed_and_not_after_a_failure() -> None:
    source, held = _Source(watch_failures=[None, ConnectionResetError("reset")]), _Held()
    source.gate.clear()
    r = _reflector(source, held)
    task = asyncio.create_task(r.run())
    await asyncio.sleep(0.05)
    assert not r.synced and source.lists == []  # listing
    source.gate.set()
    await wait_until(lambda: r.synced, 5.0, "listed")
    task.cancel()  # its watch held open, then …
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not r.synced and held.unsynced == 1

    task = asyncio.create_task(r.run())  # … a watch that breaks
    await wait_until(lambda: len(source.watched) == 2 and held.unsynced == 2, 5.0, "the broken watch")
    assert not r.synced and len(source.lists) == 2  # waiting retry_seconds
    await _stop(task)


async def test_stop_cancels_the_watch_and_a_declined_listing_ends_it() -> None:
    source, held = _Source(), _Held()
    r = _reflector(source, held)
    task = asyncio.create_task(r.run())
    await wait_until(lambda: r.synced, 5.0, "following")
    await _stop(task)
    assert not r.synced and held.unsynced == 1 and len(source.lists) == 1
    await asyncio.sleep(0.05)
    assert len(source.lists) == 1 and source.watched == ["rv1"]

    def declined(_names: list[str]) -> bool:  # nobody wants the listing
        return False

    r = Reflector[str](name="fake", list_call=source.list, watch_call=source.watch, replace=declined,
                       apply=held.apply, transform=_name, watch_seconds=60, retry_seconds=3600)
    await asyncio.wait_for(r.run(), 5.0)  # ends by itself
    assert not r.synced and len(source.lists) == 2


async def test_kind_calls_watch_the_member_and_resource_they_listed() -> None:
    calls: list[tuple[str, Any]] = []

    class Member:
        def __init__(self, name: str) -> None:
            self.name = name

        async def resource(self, api_version: str, kind: str) -> str:
            return f"{self.name}/{api_version}/{kind}"

        async def list_versioned(self, res: Any, label_selector: str | None = None) -> tuple[list[Obj], str]:
            calls.append(("list", (res, label_selector)))
            return [], "7"

        async def watch_from(self, res: Any, resource_version: str, seconds: float, deliver: Deliver,
                             label_selector: str | None = None) -> str:
            calls.append(("watch", (res, resource_version, seconds, label_selector)))
            return resource_version

    members = iter([Member("m1"), Member("m2")])
    kind = KindCalls(lambda: next(members), ("apps/v1", "Deployment"), "managed=true")
    _, rv = await kind.list()
    await kind.watch(rv, 5.0, lambda _e, _o: None)
    await kind.list()
    assert calls == [("list", ("m1/apps/v1/Deployment", "managed=true")),
                     ("watch", ("m1/apps/v1/Deployment", "7", 5.0, "managed=true")),
                     ("list", ("m2/apps/v1/Deployment", "managed=true"))]


async def test_started_and_stopped_by_itself_and_not_synced_until_it_lists_again() -> None:
    """`start` runs it on the running loop; what it held from a loop that ended is not current:
    started again it is not synced until its new listing."""
    source, held = _Source(), _Held()
    r = _reflector(source, held)
    r.start()
    assert r.running and not r.following
    await wait_until(lambda: r.following, 5.0, "following")
    task = r._task
    await r.stop()
    assert task is not None and task.cancelled() and not r.running and not r.synced
    assert held.unsynced == 1

    r.synced = True  # as a run on a loop that ended would leave it
    source.gate.clear()  # the next listing waits
    r.start()
    assert not r.following  # held nothing current until it lists
    source.gate.set()
    await wait_until(lambda: r.following, 5.0, "listed again")
    await r.stop()


def test_managed_fields_are_dropped_and_nothing_else() -> None:
    obj = {"kind": "Deployment", "metadata": {"name": "a", "managedFields": [{"manager": "drods"}], "uid": "u"},
           "spec": {"replicas": 2}, "status": {"readyReplicas": 2}}
    out = without_managed_fields(obj)
    assert out == {"kind": "Deployment", "metadata": {"name": "a", "uid": "u"}, "spec": {"replicas": 2},
                   "status": {"readyReplicas": 2}}
    assert obj["metadata"]["managedFields"] == [{"manager": "drods"}]  # the member's document is untouched
    bare = {"kind": "ConfigMap", "metadata": {"name": "b"}}
    assert without_managed_fields(bare) is bare
