"""The names of a member's objects DRO-DS did not create, followed per kind (`drods.members.foreign_names`):
what lets a first apply skip its GET, and when it must not."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from drods.members.client import MemberClient, MemberOptions, WatchExpired
from drods.members.foreign_names import ForeignNames
from drods.model.annotations import FOREIGN_SELECTOR, MANAGED_BY, MANAGER
from drods.sim.harness import SimProcess
from tests.members.waiting import wait_until
from tests.sim.util import api_client, running_sims

pytestmark = pytest.mark.timeout(120)
Obj = dict[str, Any]


def _cm(name: str, namespace: str = "default") -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


class _Source:
    """A member holding ``listed`` (per kind) whose watches deliver what the test pushes, or fail as told."""

    name = "fake"

    def __init__(self, listed: dict[str, list[Obj]], failures: list[BaseException] | None = None) -> None:
        self.listed = listed
        self.failures = failures or []
        self.lists: list[tuple[str, str]] = []  # (kind, selector) of each listing
        self.deliver: dict[str, Callable[[str, Obj], None]] = {}

    async def resource(self, api_version: str, kind: str) -> str:
        return kind

    async def list_versioned(self, kind: str, selector: str | None = None) -> tuple[list[Obj], str]:
        self.lists.append((kind, str(selector)))
        return list(self.listed.get(kind, [])), "1"

    async def watch_from(self, kind: str, resource_version: str, seconds: float,
                         deliver: Callable[[str, Obj], None], selector: str | None = None) -> str:
        if self.failures:
            raise self.failures.pop(0)
        self.deliver[kind] = deliver
        await asyncio.sleep(3600)
        return resource_version



async def test_unknown_until_listed_then_a_set_lookup_the_watch_keeps_current() -> None:
    source = _Source({"ConfigMap": [_cm("legacy"), _cm("kube-root-ca.crt", "shop")]})
    names = ForeignNames(source)
    assert names.absent("v1", "ConfigMap", "web", "default") is None  # not listed yet: GET
    await wait_until(lambda: "ConfigMap" in source.deliver, 10.0, "the watch")
    assert source.lists == [("ConfigMap", FOREIGN_SELECTOR)]
    assert names.absent("v1", "ConfigMap", "web", "default") is True
    assert names.absent("v1", "ConfigMap", "legacy", "default") is False
    assert names.absent("v1", "ConfigMap", "legacy", None) is False  # the member's default namespace
    assert names.absent("v1", "ConfigMap", "legacy", "shop") is True

    source.deliver["ConfigMap"]("ADDED", _cm("web"))  # someone else creates one of that name
    await wait_until(lambda: names.absent("v1", "ConfigMap", "web", "default") is False, 10.0, "web seen")
    source.deliver["ConfigMap"]("DELETED", _cm("legacy"))
    await wait_until(lambda: names.absent("v1", "ConfigMap", "legacy", "default") is True, 10.0, "legacy gone")
    await names.stop()
    assert names.absent("v1", "ConfigMap", "web", "default") is None  # stopped: nothing is followed again


async def test_kinds_beyond_the_threads_are_not_followed_until_one_goes_idle() -> None:
    now = [0.0]
    source = _Source({})
    names = ForeignNames(source, max_kinds=2, idle_seconds=300, clock=lambda: now[0])
    for kind in ("ConfigMap", "Secret"):
        names.absent("v1", kind, "x", "default")
    await wait_until(lambda: set(source.deliver) == {"ConfigMap", "Secret"}, 10.0, "two kinds followed")
    assert names.absent("v1", "Service", "x", "default") is None
    now[0] = 200.0
    assert names.absent("v1", "ConfigMap", "x", "default") is True  # asked again: not idle
    now[0] = 400.0  # Secret last asked 400 s ago, ConfigMap 200 s ago
    assert names.absent("v1", "Service", "x", "default") is None  # takes Secret's thread, lists first
    await wait_until(lambda: "Service" in source.deliver and names.following("v1", "Service"), 10.0, "Service followed")
    assert not names.following("v1", "Secret") and names.following("v1", "ConfigMap")
    await names.stop()


async def test_an_expired_watch_lists_again_at_once_and_a_broken_one_waits() -> None:
    expired = _Source({"ConfigMap": [_cm("legacy")]}, [WatchExpired("fake", "too old")])
    names = ForeignNames(expired, expired=lambda e: isinstance(e, WatchExpired), retry_seconds=3600)
    names.absent("v1", "ConfigMap", "x", "default")
    await wait_until(lambda: len(expired.lists) == 2 and names.following("v1", "ConfigMap"), 10.0, "listed again")
    await names.stop()

    broken = _Source({}, [ConnectionResetError("reset")])
    names = ForeignNames(broken, expired=lambda e: isinstance(e, WatchExpired), retry_seconds=3600)
    names.absent("v1", "ConfigMap", "x", "default")
    await wait_until(lambda: len(broken.lists) == 1 and not names.following("v1", "ConfigMap"), 10.0,
                     "the broken watch")
    assert names.absent("v1", "ConfigMap", "x", "default") is None  # waiting to list again: GET meanwhile
    assert len(broken.lists) == 1
    await names.stop()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sims(tmp_path_factory.mktemp("foreign"), {"m-foreign": ["--nodes", "1"]}) as s:
        yield s["m-foreign"]


async def test_a_member_shows_what_others_created_and_not_what_drods_applied(sim: SimProcess) -> None:
    member = MemberClient.from_kubeconfig("m-foreign", sim.kubeconfig,
                                          options=MemberOptions(connect_timeout=1.0, read_timeout=5.0, concurrency=2))
    other = k8s.CoreV1Api(api_client(sim))  # another client of the member: kubectl's part
    try:
        other.create_namespaced_config_map("default", _cm("theirs"))  # type: ignore[arg-type]
        names = member.foreign_names()
        await wait_until(lambda: names.absent("v1", "ConfigMap", "theirs", "default") is not None, 10.0, "following")
        assert names.absent("v1", "ConfigMap", "theirs", "default") is False
        await member.apply({**_cm("ours"), "metadata": {"name": "ours", "namespace": "default",
                                                       "labels": {MANAGED_BY: MANAGER}}})
        other.create_namespaced_config_map("default", _cm("later"))  # type: ignore[arg-type]
        await wait_until(lambda: names.absent("v1", "ConfigMap", "later", "default") is False, 10.0, "a later one seen")
        assert names.absent("v1", "ConfigMap", "ours", "default") is True
        other.delete_namespaced_config_map("theirs", "default")
        await wait_until(lambda: names.absent("v1", "ConfigMap", "theirs", "default") is True, 10.0, "deleted")
        assert names.lists == 1  # the watch brought every change
    finally:
        await member.close()
    assert names.absent("v1", "ConfigMap", "theirs", "default") is None
