"""The sim's storage model without a server: claims provisioned from templates, writes at a pod's rate
that stop when fenced, a VolumeCopy pod that takes size ÷ bandwidth and leaves the source's exact
content, the fence between two sims through their shared directory, and the lag probe's verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from drods.sim.datapass import data_pass, progress_of
from drods.sim.movers import copy_step, dataset_step, probe_exit, role
from drods.sim.storage import ANN_READ_ONLY, ANN_REPLICA_OF, Network, Published, WriteClock, checksum

T0 = 1_800_000_000.0
STS: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop", "uid": "u1"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": {"spec": {"containers": []}},
             "volumeClaimTemplates": [{"metadata": {"name": "data", "annotations": {"sim.drods.io/used-bytes": "1000"}},
                                       "spec": {"resources": {"requests": {"storage": "1Mi"}}}}]}}


def writer(ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "db-0", "namespace": "shop", "annotations": {"sim.drods.io/write-rate": "10"},
                         "ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": True}]},
            "spec": {}, "status": {"phase": "Running", "conditions": [{"type": "Ready",
                                                                     "status": "True" if ready else "False"}]}}


def mover(run: str, claim: str = "data-db-0", **env: str) -> dict[str, Any]:
    e = {"MIGRATION_RUN": run, "MIGRATION_CLAIM": claim, "MIGRATION_SOURCE_CLUSTER": "src", **env}
    return {"metadata": {"name": f"p-{run}-0-abc-x", "namespace": "shop", "annotations": {}},
            "spec": {"containers": [{"env": [{"name": k, "value": v} for k, v in e.items()]}]},
            "status": {"phase": "Running"}}


def ann(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"]["annotations"])


def test_claims_are_provisioned_and_written_until_fenced(tmp_path: Path) -> None:
    net, clock = Network(tmp_path, "src"), WriteClock()
    out = data_pass([STS], [writer()], [], net, clock, T0, "now", 1e6)
    (c,) = out.create
    assert c["metadata"]["name"] == "data-db-0" and c["status"]["phase"] == "Bound"
    assert c["status"]["capacity"] == {"storage": "1Mi"} and ann(c)["sim.drods.io/used-bytes"] == "1000"
    out = data_pass([STS], [writer()], [c], net, clock, T0 + 0.1, "now", 1e6)
    assert out.update == []  # the writer's clock starts now: no burst for the time before
    out = data_pass([STS], [writer()], [c], net, clock, T0 + 2.15, "now", 1e6)
    (c,) = out.update
    assert ann(c)["sim.drods.io/writes"] == "20" and ann(c)["sim.drods.io/used-bytes"] == str(1000 + 20 * 4096)
    assert json.loads((tmp_path / "src.json").read_text())["shop/data-db-0"]["writes"] == 20
    # another sim asks for the claim to be fenced: read-only, and no more writes
    Network(tmp_path, "dst").request_fences({"src": {"shop/data-db-0"}})
    out = data_pass([STS], [writer()], [c], net, clock, T0 + 3, "now", 1e6)
    (c,) = out.update
    assert ann(c)[ANN_READ_ONLY] == "true" and ann(c)["sim.drods.io/writes"] == "20"
    assert data_pass([STS], [writer()], [c], net, clock, T0 + 9, "now", 1e6).update == []
    Network(tmp_path, "dst").request_fences({})  # released
    (c,) = data_pass([STS], [writer()], [c], net, clock, T0 + 10, "now", 1e6).update
    assert ANN_READ_ONLY not in ann(c)


def target_claim(writes: int = 0, used: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "data-db-0", "namespace": "shop",
                         "annotations": {"sim.drods.io/writes": str(writes), "sim.drods.io/used-bytes": str(used)}},
            "status": {"capacity": {"storage": "1Gi"}}}


def test_a_copy_takes_size_over_bandwidth_and_leaves_the_sources_content() -> None:
    src = Published(used=10_000_000, writes=500, read_only=False, rate=10)
    pod = mover("copy")
    step = copy_step(pod, target_claim(), src, T0, 5_000_000)  # 5 MB/s: 2 s
    assert step.exit_code is None
    pod["metadata"]["annotations"]["sim.drods.io/copy"] = step.pod_annotation
    step = copy_step(pod, target_claim(), Published(10_040_960, 510, False, 10), T0 + 1.9, 5_000_000)
    assert step.exit_code is None  # later writes do not move the goal of this run
    pod["metadata"]["annotations"]["sim.drods.io/copy"] = step.pod_annotation
    step = copy_step(pod, target_claim(), src, T0 + 2.0, 5_000_000)
    assert step.exit_code == 0 and step.claim is not None
    a = ann(step.claim)
    assert a["sim.drods.io/writes"] == "500" and a[ANN_REPLICA_OF] == "src"
    assert a["sim.drods.io/checksum"] == checksum(10_000_000, 500)
    assert json.loads(step.pod_annotation or "{}")["seconds"] == 2.0
    # what the transport writes on its Job: the bytes, the rate, its checksum and the source's
    assert step.report == {"bytes": 10_000_000, "seconds": 2.0, "bytesPerSecond": 5_000_000,
                           "checksum": checksum(10_000_000, 500), "sourceChecksum": checksum(10_000_000, 500)}


def test_a_dataset_copy_takes_size_over_bandwidth_and_reports() -> None:
    """A CachePlan's copy pod: COPY_SIZE_BYTES at the sim's bandwidth, then exit 0 with its report."""
    pod = {"metadata": {"name": "c-0", "namespace": "ml", "annotations": {}},
           "spec": {"containers": [{"env": [{"name": "COPY_DATASET", "value": "ml/clicks"},
                                            {"name": "COPY_SIZE_BYTES", "value": "4000000"}]}]},
           "status": {"phase": "Running"}}
    assert role(pod) == "dataset"
    step = dataset_step(pod, T0, 2_000_000)  # 2 MB/s: 2 s
    assert step.exit_code is None and step.report is None
    pod["metadata"]["annotations"]["sim.drods.io/copy"] = step.pod_annotation
    step = dataset_step(pod, T0 + 1.5, 2_000_000)
    assert step.exit_code is None
    pod["metadata"]["annotations"]["sim.drods.io/copy"] = step.pod_annotation
    step = dataset_step(pod, T0 + 2.0, 2_000_000)
    assert step.exit_code == 0 and step.report is not None
    assert step.report["bytes"] == 4_000_000 and step.report["seconds"] == 2.0
    assert step.report["checksum"] == step.report["sourceChecksum"] == checksum(4_000_000, 0)


def test_the_final_run_waits_for_the_fence_and_promotes() -> None:
    pod = mover("final")
    assert copy_step(pod, target_claim(490), Published(10_000, 500, False), T0, 1e6).exit_code is None
    step = copy_step(pod, target_claim(490), Published(10_000, 500, True), T0, 1e6)
    pod["metadata"]["annotations"]["sim.drods.io/copy"] = step.pod_annotation
    step = copy_step(pod, target_claim(490), Published(10_000, 500, True), T0 + 1, 1e6)
    assert step.exit_code == 0 and step.claim is not None and ANN_REPLICA_OF not in ann(step.claim)
    assert ann(step.claim)["sim.drods.io/writes"] == "500"


def test_a_copy_that_does_not_fit_fails() -> None:
    small = {**target_claim(), "status": {"capacity": {"storage": "1Mi"}}}
    step = copy_step(mover("copy"), small, Published(3_000_000, 0, False), T0, 1e6)
    assert step.exit_code == 1 and "no space left" in step.message
    assert step.report == {"error": step.message}  # written on its Job: the cause reaches the plan


def test_the_probe_judges_the_lag_in_seconds_of_writes() -> None:
    probe = {"spec": {"containers": [{"env": [
        {"name": "MIGRATION_MAX_LAG_SECONDS", "value": "1"},
        {"name": "MIGRATION_WORKLOAD", "value": "StatefulSet/shop/db"},
        {"name": "MIGRATION_SOURCE_CLUSTER", "value": "src"}]}]}, "metadata": {"name": "x"}}
    copy = target_claim(495)
    copy["metadata"]["annotations"][ANN_REPLICA_OF] = "src"
    claims = {("shop", "data-db-0"): copy}
    assert probe_exit(probe, claims, {"src": {"shop/data-db-0": Published(0, 500, False, rate=10)}}) == 0
    assert probe_exit(probe, claims, {"src": {"shop/data-db-0": Published(0, 520, False, rate=10)}}) == 1
    fresh = {("shop", "data-db-0"): target_claim(0)}  # not a copy yet
    assert probe_exit(probe, fresh, {"src": {"shop/data-db-0": Published(0, 5, False, rate=10)}}) == 1
    assert progress_of({"metadata": {}}) == {}


def test_a_follower_leaves_a_copy_the_final_run_promoted() -> None:
    """A catch-up run that follows the source (its Job not deleted yet when the final run ends) must not
    turn the promoted copy back into a replica: it would take no writes after the switch."""
    follow = mover("catchup")
    follow["spec"]["containers"][0]["env"].append({"name": "MIGRATION_FOLLOW", "value": "true"})
    replica = target_claim(490)
    replica["metadata"]["annotations"][ANN_REPLICA_OF] = "src"
    follow["metadata"]["annotations"]["sim.drods.io/copy"] = copy_step(
        follow, replica, Published(10_000, 500, False), T0, 1e6).pod_annotation
    step = copy_step(follow, replica, Published(10_000, 500, False), T0 + 1, 1e6)  # a replica behind: follows
    assert step.claim is not None and ann(step.claim)[ANN_REPLICA_OF] == "src"
    promoted = target_claim(500)  # the final run popped replica-of
    step = copy_step(follow, promoted, Published(10_000, 500, True), T0 + 2, 1e6)
    assert step.claim is None and step.exit_code is None
