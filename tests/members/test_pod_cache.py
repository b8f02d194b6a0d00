"""A member's pods followed by list and watch (`drods.members.pod_cache`): pruned to what the summary
and the usage read, current as pods come and go, and listed again when the watch breaks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drods.members.client import MemberClient, MemberOptions, WatchExpired
from drods.members.pod_cache import PodCache, pruned
from drods.members.summary import summarise
from drods.members.workload_usage import measure
from drods.sim.harness import SimProcess
from tests.members.test_summary import NODES
from tests.members.test_workload_usage import METRICS, PODS, _deploy
from tests.members.waiting import wait_until
from tests.sim.util import running_sims

pytestmark = pytest.mark.timeout(120)
Obj = dict[str, Any]


def _full_pod(name: str, node: str | None, phase: str = "Running", **spec: Any) -> Obj:
    """A pod as a member returns it, with the many fields no reader uses."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": "u-" + name, "labels": {"app": "web"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1"}],
                         "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "web:1", "env": [{"name": "A", "value": "1" * 200}],
                                     "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                                   "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}}],
                     "volumes": [{"name": "v", "emptyDir": {}}], **({"nodeName": node} if node else {}), **spec},
            "status": {"phase": phase, "podIP": "10.0.0.1", "hostIP": "10.1.0.1",
                       "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0}]}}


FULL = [_full_pod("web-1", "a"), _full_pod("web-2", "b", overhead={"cpu": "100m"}),
        _full_pod("web-3", "a", initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}}}]),
        _full_pod("web-4", None, phase="Pending"), _full_pod("web-5", "b", phase="Succeeded")]


def test_a_pruned_pod_summarises_and_measures_as_the_whole_one() -> None:
    assert summarise(NODES, [pruned(p) for p in FULL], None, now=0).status == \
        summarise(NODES, FULL, None, now=0).status
    for pods in (PODS, FULL):
        whole = measure([_deploy("web")], pods, METRICS)
        assert measure([_deploy("web")], [pruned(p) for p in pods], METRICS) == whole
    kept = pruned(FULL[0])
    assert "managedFields" not in kept["metadata"] and "env" not in kept["spec"]["containers"][0]
    assert kept["status"] == {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def test_cached_pods_share_their_equal_parts_and_read_as_they_were() -> None:
    """A phase and Ready condition, containers asking the same resources on one node: one object for every
    pod holding it (most of a pruned pod), read by the summary and the usage as the pods themselves."""
    cache = PodCache(_Source([]))
    twins = [_full_pod("web-1", "a"), _full_pod("web-6", "a"), *FULL[1:]]
    cache._replace([pruned(p) for p in twins])
    one, two = (next(p for p in cache.pods("shop") if p["metadata"]["name"] == n) for n in ("web-1", "web-6"))
    assert one is not two and one["status"] is two["status"] and one["spec"] is two["spec"]
    assert one["metadata"]["labels"] is two["metadata"]["labels"]
    assert summarise(NODES, cache.pods(), None, now=0).status == summarise(NODES, twins, None, now=0).status
    assert measure([_deploy("web")], cache.pods("shop"), METRICS) == measure([_deploy("web")], twins, METRICS)


class _Source:
    """A member whose watch fails as told: ``failures`` in turn (None: the watch ends normally)."""

    name = "fake"

    def __init__(self, failures: list[BaseException | None]) -> None:
        self.failures = failures
        self.listed = 0
        self.pods: list[Obj] = [_full_pod("web-1", "a")]

    async def list_pods_versioned(self) -> tuple[list[Obj], str]:
        self.listed += 1
        return list(self.pods), str(self.listed)

    async def watch_pods(self, resource_version: str, seconds: float,
                         deliver: Callable[[str, Obj], None]) -> str:
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        await asyncio.sleep(3600)
        return resource_version



async def test_an_expired_watch_lists_again_at_once_and_a_broken_one_waits() -> None:
    expired = _Source([WatchExpired("fake", "too old")])
    cache = PodCache(expired, expired=lambda e: isinstance(e, WatchExpired), retry_seconds=3600)
    cache.start()
    await wait_until(lambda: expired.listed == 2 and cache.following, 10.0, "a second listing")
    await cache.stop()

    broken = _Source([ConnectionResetError("reset")])
    cache = PodCache(broken, expired=lambda e: isinstance(e, WatchExpired), retry_seconds=3600)
    cache.start()
    await wait_until(lambda: broken.listed == 1 and not cache.following and cache.running, 10.0, "the broken watch")
    assert broken.listed == 1  # waiting retry_seconds before the next listing; the readers list meanwhile
    await cache.stop()
    assert not cache.running


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sims(tmp_path_factory.mktemp("pods"), {"m-pods": ["--nodes", "2"]}) as s:
        yield s["m-pods"]


def _deployment(name: str, replicas: int) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1",
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}}}


async def test_followed_pods_come_and_go_with_the_members(sim: SimProcess) -> None:
    opts = MemberOptions(connect_timeout=1.0, read_timeout=5.0, concurrency=2)
    member = MemberClient.from_kubeconfig("m-pods", sim.kubeconfig, options=opts)
    plain = MemberClient.from_kubeconfig("m-pods", sim.kubeconfig, options=opts)
    try:
        cache = member.follow_pods()
        await wait_until(lambda: cache.following, 10.0, "following")

        def web(n: int) -> bool:
            mine = [p for p in cache.pods("default") if p["metadata"]["labels"].get("app") == "web"]
            return len(mine) == n and all(p["status"]["phase"] == "Running" for p in mine)

        await member.apply(_deployment("web", 3))
        await wait_until(lambda: web(3), 10.0, "3 running pods of web in the cache")
        assert cache.lists == 1  # the watch brought them, no listing
        nodes = await member.nodes()
        followed, listed = await member.pods(), await plain.pods()  # the cache's, and one listing's
        assert summarise(nodes, followed, None, now=0).status == summarise(nodes, listed, None, now=0).status
        assert len(followed) == len(listed) and cache.pods("elsewhere") == []

        await member.apply(_deployment("web", 1))
        await wait_until(lambda: web(1), 10.0, "web scaled to 1 in the cache")
        await member.delete("apps/v1", "Deployment", "web", "default")
        await wait_until(lambda: web(0), 10.0, "web's pods gone from the cache")
    finally:
        await member.close()
        await plain.close()
    assert not cache.running
