"""W1: a cluster name in a policy that no registered cluster has is reported as such by the dry run —
counted, named with the fields that give it, and said by ``drods whatif`` — never refused (Karmada
accepts names of clusters that do not exist yet)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.store.sqlite import SqliteStore
from tests.scheduler_e2e.conftest import Plane, serve
from tests.whatif_e2e.test_dryrun import fleet, whatif


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data") as p:
        yield p


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop"},
          "spec": {"replicas": 2, "template": {"spec": {"containers": [
              {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def test_a_typo_in_cluster_names_is_counted_and_named(plane: Plane) -> None:
    await fleet(plane)  # a, b, c, d
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "p"},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}],
                       "placement": {"clusterAffinity": {"clusterNames": ["a", "bb"], "exclude": ["zz"]}}}}
    out = await whatif(plane, {"workload": DEPLOY, "policy": policy})
    ex = out["explanation"]
    assert out["phase"] == "Scheduled" and {p["cluster"] for p in out["placement"]} == {"a"}
    assert ex["unknownClusters"] == 2
    assert ex["unknownClusterNames"] == ["bb", "zz"]
    assert ex["unknownClusterFields"] == {"bb": ["placement.clusterAffinity.clusterNames"],
                                          "zz": ["placement.clusterAffinity.exclude"]}

    # every name unknown: nothing placed, and the answer says why rather than only "not in clusterNames"
    body = {"binding": {"name": "web", "replicas": 3, "resources": {"cpu": 1}, "placement": {
        "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["eu-1"],
                               "overflowAffinities": [{"affinityName": "spill", "clusterNames": ["c", "us-9"]}]}],
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                              "weightPreference": {"dynamicWeight": "WaterLevel"}}}}}
    out = await whatif(plane, body)
    ex = out["explanation"]
    assert ex["unknownClusters"] == 2 and ex["unknownClusterNames"] == ["eu-1", "us-9"]
    assert ex["unknownClusterFields"]["us-9"] == ["placement.clusterAffinities[0].overflowAffinities[0].clusterNames"]
    assert {p["cluster"] for p in out["placement"]} == {"c"}

    # a name the changes add to the copy is known; a policy naming only registered clusters has no such keys
    out = await whatif(plane, {**body, "changes": [{"addCluster": {"name": "eu-1"}}, {"addCluster": {"name": "us-9"}}]})
    assert out["explanation"]["unknownClusters"] == 0 and "unknownClusterNames" not in out["explanation"]
    r = await plane.call("GET", "/api/v1/clusters")
    assert {c["name"] for c in r.json()["items"]} == {"a", "b", "c", "d"}, "a dry run registers nothing"


async def test_whatif_command_says_no_cluster_named(plane: Plane, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from drods.cli.main import app

    await fleet(plane)
    f = tmp_path / "deploy.yaml"
    f.write_text("""apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 2
  template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
---
apiVersion: multicluster.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p}
spec:
  placement: {clusterAffinity: {clusterNames: [prod-eu-1]}}
""")
    common = ["--server", plane.url, "--token", plane.tokens["viewer"]]

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(app, ["whatif", "-f", str(f), *args, *common], env={"COLUMNS": "200"})

    r = await asyncio.to_thread(invoke)
    assert r.exit_code == 0, r.output
    assert "no cluster named 'prod-eu-1' (placement.clusterAffinity.clusterNames)" in r.output, r.output
    r = await asyncio.to_thread(invoke, "-o", "json")
    out = json.loads(r.output)
    assert out["phase"] == "Unschedulable" and out["placement"] == []
    assert out["explanation"]["unknownClusters"] == 1 and out["explanation"]["unknownClusterNames"] == ["prod-eu-1"]
