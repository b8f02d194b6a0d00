"""MemberClient against real `drods sim` processes: numbers, idempotence, and isolation (SEC4)."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from drods.machinery.fence import WritesRefused
from drods.members.client import (
    MemberClient,
    MemberError,
    MemberOptions,
    MemberPool,
    MemberUnavailable,
    with_credentials_checked_every,
)
from drods.sim.harness import SimProcess
from tests.sim.util import running_sims

pytestmark = pytest.mark.timeout(120)

FAST = MemberOptions(connect_timeout=1.0, read_timeout=1.5, retries=1, backoff=0.05, concurrency=2,
                     failure_threshold=2, probe_interval=30.0)


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SimProcess]]:
    with running_sims(tmp_path_factory.mktemp("members"), {
        "m-east": ["--nodes", "3", "--node-cpu", "4", "--node-memory", "8Gi", "--gpus", "2", "--gpu-model", "A100",
                   "--reserved-cpu", "250m", "--reserved-memory", "512Mi", "--region", "us-east-1",
                   "--zone", "us-east-1a", "--provider", "aws", "--city", "DFW",
                   "--cpu-utilisation", "0.5", "--memory-utilisation", "0.25"],
        "m-west": ["--nodes", "2", "--node-cpu", "8", "--node-memory", "16Gi", "--region", "us-west-2",
                   "--zone", "us-west-2b", "--provider", "gcp", "--city", "SEA",
                   "--node-pool", "count=1,cpu=32,memory=128Gi,gpus=8,gpu-model=H100,zone=us-west-2c"],
        "m-sick": ["--nodes", "1"],
    }) as s:
        yield s


@pytest.fixture
async def members(sims: dict[str, SimProcess]) -> AsyncIterator[dict[str, MemberClient]]:
    clients = {name: MemberClient.from_kubeconfig(name, sim.kubeconfig, options=FAST) for name, sim in sims.items()}
    yield clients
    for c in clients.values():
        await c.close()


def deployment(name: str, replicas: int, requests: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1",
                                                           "resources": {"requests": requests}}]}}}}


async def wait_status(m: MemberClient, name: str, ready: int) -> dict[str, Any]:
    status: dict[str, Any] | None = None
    try:
        async with asyncio.timeout(15):
            while not (status and status.get("readyReplicas") == ready):
                await asyncio.sleep(0.05)
                status = await m.status("apps/v1", "Deployment", name, "default")
    except TimeoutError:
        raise AssertionError(f"{name} not ready={ready} in 15s: {status}") from None
    return status


async def test_summary_matches_the_flags_and_the_workload(members: dict[str, MemberClient]) -> None:
    east = members["m-east"]
    await east.apply(deployment("calc", 4, {"cpu": "1", "memory": "1Gi"}))
    await east.apply(deployment("train", 1, {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1}))
    await wait_status(east, "calc", 4)
    await wait_status(east, "train", 1)
    s = await east.summary()
    doc = s.status
    # 3 nodes of 4 cores / 8Gi / 2 GPUs, 250m and 512Mi reserved each
    assert doc["cpu"] == {"capacity": 12.0, "allocatable": 11.25, "allocated": 4.5, "used": pytest.approx(2.25),
                          "measured": pytest.approx(2.25)}  # the sim serves metrics.k8s.io
    assert doc["memory"] == {"capacity": 24.0, "allocatable": 22.5, "allocated": 5.0, "used": pytest.approx(1.25),
                             "measured": pytest.approx(1.25)}
    assert doc["gpu"] == {"capacity": 6.0, "allocatable": 6.0, "allocated": 1.0, "used": 1.0}
    assert doc["pods"] == {"capacity": 330.0, "used": 5}
    # first fit: node 0 takes 3 calc + train (3.5 cores), node 1 the 4th calc, node 2 stays empty
    assert doc["largestNodeFree"] == {"cpu": 3.75, "memory": 7.5, "gpu": 2.0}
    assert doc["waterLevel"] == pytest.approx(4.5 / 11.25)
    assert s.node_count == 3 and s.ready_nodes == 3 and s.metrics_available
    assert s.topology() == {"region": "us-east-1", "zones": ["us-east-1a"], "provider": "aws", "city": "DFW"}
    assert s.gpu_models == ["A100"] and (s.kubernetes_version or "").startswith("v1.")
    for name in ("calc", "train"):
        await east.delete("apps/v1", "Deployment", name, "default")


async def test_summary_of_a_mixed_pool_cluster(members: dict[str, MemberClient]) -> None:
    s = await members["m-west"].summary()
    doc = s.status
    assert doc["cpu"]["capacity"] == 48.0 and doc["memory"]["capacity"] == 160.0 and doc["gpu"]["capacity"] == 8.0
    assert doc["cpu"]["allocated"] == 0.0 and doc["cpu"]["used"] == 0.0 and doc["waterLevel"] == 0.0
    assert doc["largestNodeFree"] == {"cpu": 32.0, "memory": 128.0, "gpu": 8.0}
    assert s.topology() == {"region": "us-west-2", "zones": ["us-west-2b", "us-west-2c"], "provider": "gcp",
                            "city": "SEA"}
    assert s.gpu_models == ["H100"] and s.node_count == 3


async def test_apply_and_delete_are_idempotent(members: dict[str, MemberClient]) -> None:
    west = members["m-west"]
    manifest = deployment("idem", 2, {"cpu": "100m"})
    first = await west.apply(manifest)
    second = await west.apply(manifest)
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    assert second["metadata"]["generation"] == 1  # nothing changed
    read = await west.get("apps/v1", "Deployment", "idem", "default")
    assert read is not None and read["metadata"]["uid"] == first["metadata"]["uid"]
    status = await wait_status(west, "idem", 2)
    assert status["observedGeneration"] == 1
    manifest["spec"]["replicas"] = 3
    assert (await west.apply(manifest))["metadata"]["generation"] == 2
    await wait_status(west, "idem", 3)
    assert await west.delete_manifest(manifest) is True
    assert await west.delete_manifest(manifest) is False
    assert await west.get("apps/v1", "Deployment", "idem", "default") is None
    assert await west.status("apps/v1", "Deployment", "idem", "default") is None
    # namespaces and cluster-scoped kinds go through the same path
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "drods-team"}}
    await west.apply(ns)
    await west.apply(ns)
    assert [n["metadata"]["name"] for n in await west.list_objects("v1", "Namespace")].count("drods-team") == 1
    assert await west.delete("v1", "Namespace", "drods-team") is True


async def test_cluster_errors_are_not_retried_or_counted_as_outages(members: dict[str, MemberClient]) -> None:
    west = members["m-west"]
    with pytest.raises(MemberError) as err:
        await west.apply(deployment("nowhere", 1, {"cpu": "1"}, namespace="missing-ns"))
    assert err.value.status == 404 and "missing-ns" in err.value.message
    with pytest.raises(MemberError):
        await west.apply({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert west.state.ready and west.state.consecutive_failures == 0


async def test_from_endpoint_with_token_and_ca(sims: dict[str, SimProcess]) -> None:
    doc = yaml.safe_load(sims["m-east"].kubeconfig.read_text())
    server = doc["clusters"][0]["cluster"]["server"]
    ca = base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])
    token = doc["users"][0]["user"]["token"]
    m = MemberClient.from_endpoint("east-by-endpoint", server, token, ca_cert=ca, options=FAST)
    try:
        assert len(await m.nodes()) == 3
    finally:
        await m.close()
    wrong = MemberClient.from_endpoint("east-bad-token", server, "not-a-token", ca_cert=ca, options=FAST)
    try:
        with pytest.raises(MemberError) as err:
            await wrong.nodes()
        assert err.value.status == 401
        with pytest.raises(MemberError) as err:  # a read's refusal is an error, not an absent object
            await wrong.get("v1", "Namespace", "default")
        assert err.value.status == 401
    finally:
        await wrong.close()


def test_credentials_are_checked_at_most_every_interval() -> None:
    """The kubeconfig loader's hook (which installs a fresh hook of its own each time it runs) is
    called once per interval however many requests go out, and again after it."""
    calls: list[int] = []

    def loader_hook(c: Any) -> None:
        calls.append(1)
        c.refresh_api_key_hook = loader_hook  # as the loader does: a new closure each time

    cfg: Any = k8s.Configuration()
    cfg.refresh_api_key_hook = loader_hook
    with_credentials_checked_every(cfg, 3600.0)
    for _ in range(100):
        cfg.refresh_api_key_hook(cfg)
    assert len(calls) == 1 and cfg.refresh_api_key_hook is not loader_hook
    every: Any = k8s.Configuration()
    every.refresh_api_key_hook = loader_hook
    with_credentials_checked_every(every, 0.0)
    for _ in range(3):
        every.refresh_api_key_hook(every)
    assert len(calls) == 4
    plain: Any = k8s.Configuration()  # client certificates: no hook, none added
    with_credentials_checked_every(plain, 1.0)
    assert plain.refresh_api_key_hook is None


async def test_a_partitioned_cluster_does_not_delay_the_others(
        sims: dict[str, SimProcess], members: dict[str, MemberClient]) -> None:
    sick, east, west = members["m-sick"], members["m-east"], members["m-west"]
    pool = MemberPool()
    for m in members.values():
        pool.add(m)
    await sick.apply(deployment("warm", 1, {"cpu": "10m"}))  # discovery done while healthy
    sims["m-sick"].fault("partition")
    try:
        # more operations than the sick cluster has threads: they queue behind its timeouts
        dead = [asyncio.create_task(sick.apply(deployment(f"d{i}", 1, {"cpu": "10m"}))) for i in range(4)]
        started = time.monotonic()
        healthy = await asyncio.wait_for(asyncio.gather(
            east.summary(), west.summary(), east.apply(deployment("live", 1, {"cpu": "10m"})),
            west.get("v1", "Namespace", "default")), timeout=5)
        healthy_elapsed = time.monotonic() - started
        assert healthy[0].node_count == 3 and healthy[1].node_count == 3
        assert not any(t.done() for t in dead), "healthy work finished while the sick cluster's is still hanging"
        assert healthy_elapsed < FAST.read_timeout
        results = await asyncio.gather(*dead, return_exceptions=True)
        assert all(isinstance(r, MemberUnavailable) for r in results), results
        assert sick.state.condition == "NotReady" and sick.state.consecutive_failures >= FAST.failure_threshold
        assert "Timeout" in (sick.state.last_error or "")
        assert pool.states()["m-east"].ready and pool.states()["m-west"].ready
        # NotReady: calls fail fast instead of queueing behind timeouts
        t = time.monotonic()
        with pytest.raises(MemberUnavailable, match="NotReady"):
            await sick.version()
        assert time.monotonic() - t < 0.1
    finally:
        sims["m-sick"].fault("up")
    assert (await sick.probe()).startswith("v1.")  # a probe always goes through
    assert sick.state.ready and sick.state.consecutive_failures == 0
    await east.delete("apps/v1", "Deployment", "live", "default")


async def test_a_down_cluster_fails_fast_and_recovers(sims: dict[str, SimProcess],
                                                      members: dict[str, MemberClient]) -> None:
    sick = members["m-sick"]
    assert await sick.probe()
    sims["m-sick"].fault("down")
    try:
        t = time.monotonic()
        with pytest.raises(MemberUnavailable):
            await sick.summary()
        assert time.monotonic() - t < 1.0, "connection refused is immediate; retries back off briefly"
        assert sick.state.condition == "NotReady" and "Connection" in (sick.state.last_error or "")
        summaries = await pool_summaries(members)
        assert isinstance(summaries["m-sick"], MemberUnavailable)
        assert summaries["m-east"].node_count == 3  # type: ignore[union-attr]
    finally:
        sims["m-sick"].fault("up")
    assert await sick.probe()


async def pool_summaries(members: dict[str, MemberClient]) -> dict[str, Any]:
    pool = MemberPool()
    for m in members.values():
        pool.add(m)
    return await pool.summaries()


async def test_a_kind_follows_its_definition_in_the_member(members: dict[str, MemberClient]) -> None:
    """Discovery as the member has it now: a CRD installed after the first contact serves its kind at
    once; removed, an apply answers 404; installed again, cluster-scoped this time, the kind is applied
    where the member now serves it."""
    east = members["m-east"]
    gadget = {"apiVersion": "gadgets.example.org/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"n": 1}}
    with pytest.raises(MemberError) as err:
        await east.apply(gadget)
    assert err.value.status == 404 and "does not serve" in err.value.message
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.gadgets.example.org"},
           "spec": {"group": "gadgets.example.org", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    await east.apply(crd)
    assert (await east.resource("gadgets.example.org/v1", "Gadget")).path == "/apis/gadgets.example.org/v1/gadgets"
    assert (await east.apply(gadget))["metadata"]["namespace"] == "default"
    assert await east.delete_manifest(crd) is True
    with pytest.raises(MemberError) as err:
        await east.apply(gadget)
    assert err.value.status == 404
    crd["spec"]["scope"] = "Cluster"
    await east.apply(crd)
    again = await east.apply(gadget)
    assert again["spec"] == {"n": 1} and "namespace" not in again["metadata"]
    assert not (await east.resource("gadgets.example.org/v1", "Gadget")).namespaced
    assert await east.delete_manifest(crd) is True


async def test_a_write_the_leadership_no_longer_allows_is_never_sent(sims: dict[str, SimProcess]) -> None:
    """A leader whose lease may have lapsed (paused past its TTL) reads, but sends no write: the member
    keeps what the new leader applied, and the refusal says nothing of the member's health."""
    allowed = [True]
    west = MemberClient.from_kubeconfig("m-west", sims["m-west"].kubeconfig,
                                        options=replace(FAST, may_write=lambda: allowed[0]))
    try:
        manifest = deployment("fenced", 1, {"cpu": "100m"})
        await west.apply(manifest)
        allowed[0] = False
        stale = {**manifest, "spec": {**manifest["spec"], "replicas": 2}}
        for write in (west.apply(stale), west.delete_manifest(manifest)):
            with pytest.raises(WritesRefused):
                await write
        got = await west.get("apps/v1", "Deployment", "fenced", "default")  # reads still go
        assert got is not None and got["spec"]["replicas"] == 1
        assert west.state.condition == "Ready" and west.state.consecutive_failures == 0
        allowed[0] = True
        assert await west.delete_manifest(manifest) is True
    finally:
        await west.close()
