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


def hook_pod(run: str, phase: str = "Running", mounted: bool = True) -> dict[str, Any]:
    """A Hook mover's run in the target (your Job: the sim runs it for its run time, whatever it says)."""
    env = {"MIGRATION_RUN": run, "MIGRATION_SOURCE_CLUSTER": "src", "MIGRATION_TARGET_CLUSTER": "dst",
           "MIGRATION_WORKLOAD": "StatefulSet/shop/db", "MIGRATION_PLAN": "shop/move"}
    spec: dict[str, Any] = {"containers": [{"env": [{"name": k, "value": v} for k, v in env.items()]}]}
    if mounted:
        spec["volumes"] = [{"name": "migration-claim-0", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    return {"metadata": {"name": f"move-{run}-abc-x", "namespace": "shop", "annotations": {}}, "spec": spec,
            "status": {"phase": phase}}


def source_claim(writes: int, fenced: bool = False) -> dict[str, Any]:
    c = target_claim(writes, 1000 + writes * 4096)
    c["metadata"]["annotations"]["sim.drods.io/write-rate"] = "10"
    if fenced:
        c["metadata"]["annotations"][ANN_READ_ONLY] = "true"
    return c


def writes_of(c: dict[str, Any]) -> int:
    return int(ann(c)["sim.drods.io/writes"])


def test_a_hook_copy_takes_no_writes_before_it_is_promoted(tmp_path: Path) -> None:
    """Walkthrough AJ #5: with the Hook mover the target's copy took writes from PrepareTarget on (292 writes
    of its own against the source's 670 at the switch). Like a VolumeCopy copy, a Hook's copy holds the
    source's content and is a replica of it — no writes of its own — until the final run (the source
    fenced) or the plan's end promotes it."""
    src, dst, clock = Network(tmp_path, "src"), Network(tmp_path, "dst"), WriteClock()
    src.publish([source_claim(670)])

    def step(pods: list[dict[str, Any]], c: dict[str, Any], at: float) -> dict[str, Any]:
        out = data_pass([STS], [writer(), *pods], [c], dst, clock, at, "now", 1e6)
        return next((u for u in out.update if u["metadata"]["name"] == "data-db-0"), c)

    c = step([], target_claim(5, 1000 + 5 * 4096), T0)  # PrepareTarget: the copy's writer starts
    c = step([hook_pod("copy")], c, T0 + 1)  # CopyData: the hook's copy
    assert ann(c)[ANN_REPLICA_OF] == "src" and writes_of(c) == 670, ann(c)
    assert ann(c)["sim.drods.io/checksum"] == checksum(1000 + 670 * 4096, 670)
    c = step([hook_pod("copy", "Succeeded")], c, T0 + 5)  # the writer ran 4 s more: no write of its own
    assert writes_of(c) == 670 and ann(c)[ANN_REPLICA_OF] == "src"
    src.publish([source_claim(700)])  # the standby follows its source while the plan's runs are there
    c = step([hook_pod("copy", "Succeeded")], c, T0 + 8)
    assert writes_of(c) == 700 and ann(c)[ANN_REPLICA_OF] == "src"
    # the final run: the source fenced first (through the shared directory), then the rest, promoted
    final = [hook_pod("copy", "Succeeded"), hook_pod("final")]
    c = step(final, c, T0 + 9)
    assert json.loads((tmp_path / "fences" / "src" / "dst.json").read_text()) == ["shop/data-db-0"]
    assert ann(c)[ANN_REPLICA_OF] == "src"
    src.publish([source_claim(702, fenced=True)])
    c = step(final, c, T0 + 10)
    assert ANN_REPLICA_OF not in ann(c) and writes_of(c) == 702
    c = step(final, c, T0 + 11)  # promoted: it takes the workload's writes now
    c = step(final, c, T0 + 13)
    assert writes_of(c) > 702 and ANN_REPLICA_OF not in ann(c)


def test_a_copy_left_a_replica_by_a_plan_that_ended_is_promoted(tmp_path: Path) -> None:
    """No final run (no freeze) or a rollback: once the plan's runs are gone the copy is the workload's
    own claim, with the data as of its last sync, and takes writes."""
    src, dst, clock = Network(tmp_path, "src"), Network(tmp_path, "dst"), WriteClock()
    src.publish([source_claim(670)])
    (c,) = data_pass([STS], [writer(), hook_pod("copy", mounted=False)], [target_claim(5)], dst, clock, T0,
                     "now", 1e6).update
    assert ann(c)[ANN_REPLICA_OF] == "src" and writes_of(c) == 670  # found by its workload's name
    (c,) = data_pass([STS], [writer()], [c], dst, clock, T0 + 1, "now", 1e6).update
    assert ANN_REPLICA_OF not in ann(c) and writes_of(c) == 670
    assert role(hook_pod("copy")) == "hook"


def test_a_hook_run_on_the_source_leaves_the_sources_claims_alone(tmp_path: Path) -> None:
    src, clock = Network(tmp_path, "src"), WriteClock()
    mine = source_claim(670)
    out = data_pass([STS], [hook_pod("copy"), hook_pod("final")], [mine], src, clock, T0, "now", 1e6)
    assert out.update == [] and not (tmp_path / "fences").exists()
