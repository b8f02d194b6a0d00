"""The data step of a MigrationPlan with hand-made facts: the refusal of a data-less move of a workload
with volumes, ``spec.data: None``, the VolumeCopy runs per claim, the lag probe that ends CatchUp,
the write freeze with its final sync and lag-0 check, and the Jobs each run is made of."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from drods.migration.dataruns import all_runs
from drods.migration.hooks import hook_job
from drods.migration.phases import Copy, Facts, HookState, advance
from drods.model.migration import MigrationPlanSpec
from drods.model.volume_claims import VOLUMES_ROOT, workload_claims

T0 = 1_800_000_000.0
READY = {"a": True, "b": True}
PIN = {"a": 2, "b": 2}
BOTH = {"a": Copy(2, 2, True), "b": Copy(2, 2, True)}
CLAIMS = ("data-db-0", "wal-db-0", "data-db-1", "wal-db-1")
PROBE = {"image": "busybox", "command": ["lag-check"], "periodSeconds": 2}
VOLUME_COPY: dict[str, Any] = {"mover": "VolumeCopy", "image": "registry.example/rsync-tls:1",
                               "catchUp": {"maxLagSeconds": 1, "probe": PROBE}}
STS: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{
        "name": "pg", "image": "postgres:16",
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"},
                         {"name": "wal", "mountPath": "/wal"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}}, {"metadata": {"name": "wal"}}]}}


def spec(**kw: Any) -> MigrationPlanSpec:
    body: dict[str, Any] = {"workloadRef": {"kind": "StatefulSet", "name": "db"}, "sourceCluster": "a",
                            "targetCluster": "b", "trafficDrainSeconds": 0}
    body.update(kw)
    return MigrationPlanSpec.model_validate(body)


def facts(now: float, **kw: Any) -> Facts:
    base: dict[str, Any] = {"binding": "statefulset-shop-db", "placement": {"a": 2}, "copies": {"a": Copy(2, 2, True)},
                            "clusters": READY, "claims": CLAIMS, "claims_note": "volumeClaimTemplates data, wal"}
    base.update(kw)
    return Facts(now=now, **base)


def report(n: int, source: str | None = None) -> dict[str, Any]:
    """A copy Job's own report: n bytes in 2 s, the target's checksum and the source's."""
    return {"bytes": n, "seconds": 2.0, "bytesPerSecond": n // 2, "checksum": f"c{n}",
            "sourceChecksum": source or f"c{n}"}


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_a_workload_with_volumes_is_refused_without_a_data_step() -> None:
    step = advance(spec(), {}, facts(T0))
    assert step.status["phase"] == "Failed" and cond(step.status, "Failed")["reason"] == "NoDataStep"
    assert "spec.data: None" in step.status["message"] and "VolumeCopy" in step.status["message"]
    assert step.effects.pin is None and not step.effects.touch_binding  # nothing was touched


def test_data_none_moves_without_the_data_and_says_so() -> None:
    s = spec(data="None")
    st = advance(s, {}, facts(T0)).status
    assert st["phase"] == "PrepareTarget" and st["data"] == {"mover": "None", "declaredNone": True,
                                                             "claims": [{"name": c} for c in CLAIMS]}
    st = advance(s, st, facts(T0 + 1, placement=PIN, copies=BOTH)).status
    assert st["phase"] == "SwitchTraffic"
    assert cond(st, "DataCopied")["reason"] == "DataNoneDeclared" and cond(st, "CaughtUp")["status"] == "True"


def test_volume_copy_probe_and_freeze_the_whole_way() -> None:
    s = spec(data=VOLUME_COPY, switch={"freezeSeconds": 10})
    st = advance(s, {}, facts(T0)).status
    assert st["data"]["mover"] == "VolumeCopy" and st["data"]["claims"] == [{"name": c} for c in CLAIMS]
    step = advance(s, st, facts(T0 + 1, placement=PIN, copies=BOTH))
    assert step.status["phase"] == "CopyData" and step.effects.runs == ("copy-0", "copy-1", "copy-2", "copy-3")
    f = facts(T0 + 2, placement=PIN, copies=BOTH)
    some = {"copy-0": HookState("complete"), "copy-1": HookState("running")}
    assert advance(s, step.status, replace(f, hooks=some)).status["phase"] == "CopyData"
    done = {f"copy-{k}": HookState("complete", report=report(1000 * (k + 1))) for k in range(4)}
    step = advance(s, step.status, replace(f, hooks=done))
    assert step.status["data"]["claims"][1] == {"name": "wal-db-0", "bytes": 2000, "seconds": 2.0,
                                                "bytesPerSecond": 1000, "checksum": "c2000",
                                                "sourceChecksum": "c2000"}
    assert step.status["data"]["bytesCopied"] == 10000
    follow = ("catchup-0", "catchup-1", "catchup-2", "catchup-3")
    assert step.status["phase"] == "CatchUp" and step.effects.runs == (*follow, "probe-0")
    # the probe says "not yet": a new probe after periodSeconds, none before
    step = advance(s, step.status, replace(f, now=T0 + 3, hooks={"probe-0": HookState("failed", "lag 4s")}))
    assert step.status["phase"] == "CatchUp" and step.status["catchUp"]["probes"] == 1
    assert step.effects.runs == follow and step.requeue == pytest.approx(2.01)
    step = advance(s, step.status, replace(f, now=T0 + 5.1))
    assert step.effects.runs == (*follow, "probe-1")
    step = advance(s, step.status, replace(f, now=T0 + 6, hooks={"probe-1": HookState("complete")}))
    assert step.status["phase"] == "SwitchTraffic" and "fencing a" in step.status["message"]
    assert step.effects.withdrawn == frozenset({"a"}) and step.effects.runs == ()
    # the fence shows on the Binding: the final sync of every claim, then the lag-0 check
    fenced = replace(f, now=T0 + 7, withdrawn=frozenset({"a"}))
    step = advance(s, step.status, fenced)
    assert step.status["freeze"]["stage"] == "sync" and step.effects.runs == tuple(f"final-{k}" for k in range(4))
    final = {f"final-{k}": HookState("complete") for k in range(4)}
    step = advance(s, step.status, replace(fenced, now=T0 + 9, hooks=final))
    assert step.status["freeze"]["stage"] == "check" and step.effects.runs == ("probe-final",)
    step = advance(s, step.status, replace(fenced, now=T0 + 10, hooks={"probe-final": HookState("complete")}))
    assert step.status["phase"] == "RetireSource"
    assert step.status["data"]["lostWrites"] == 0 and step.status["data"]["lostWritesMeasuredBy"] == "probe"
    assert step.status["freeze"]["downtimeSeconds"] == pytest.approx(3.0)
    runs = all_runs(step.status)
    assert {"copy-3", "final-3", "probe-0", "probe-1", "probe-final"} <= set(runs)


@pytest.mark.parametrize(("hooks", "now", "reason"), [
    ({"final-0": HookState("failed", "rsync: connection reset")}, T0 + 8, "HookFailed"),
    ({f"final-{k}": HookState("complete") for k in range(4)} | {"probe-final": HookState("failed")}, T0 + 8,
     "DataBehind"),
    ({}, T0 + 18, "FreezeExceeded"),
])
def test_a_failed_or_slow_final_sync_rolls_back_and_unfences(hooks: dict[str, HookState], now: float,
                                                             reason: str) -> None:
    s = spec(data=VOLUME_COPY, switch={"freezeSeconds": 10})
    st = {**advance(s, {}, facts(T0)).status, "phase": "SwitchTraffic"}
    f = facts(T0 + 7, placement=PIN, copies=BOTH, withdrawn=frozenset({"a"}))
    st = advance(s, st, f).status
    step = advance(s, st, replace(f, now=now, hooks=hooks))
    if reason == "DataBehind":  # the check comes one pass after the sync
        step = advance(s, step.status, replace(f, now=now, hooks=hooks))
    assert step.status["phase"] == "RollingBack" and step.status["rollbackReason"] == reason
    assert step.effects.withdrawn == frozenset() and step.effects.pin == {"a": 2}  # the source serves again


def test_a_failed_copy_rolls_back() -> None:
    s = spec(data=VOLUME_COPY)
    st = {**advance(s, {}, facts(T0)).status, "phase": "CopyData"}
    step = advance(s, st, facts(T0 + 2, placement=PIN, copies=BOTH, hooks={"copy-2": HookState("failed", "EIO")}))
    assert step.status["phase"] == "RollingBack" and "copy-2: EIO" in step.status["rollbackMessage"]


def test_spec_rules() -> None:
    with pytest.raises(ValueError, match="needs data.image"):
        spec(data={"mover": "VolumeCopy"})
    with pytest.raises(ValueError, match="needs data.hook"):
        spec(data={"mover": "Hook"})
    with pytest.raises(ValueError, match="not both"):
        spec(data="None", hook={"command": {"image": "x"}})
    with pytest.raises(ValueError, match="freezeSeconds needs a data step"):
        spec(data="None", switch={"freezeSeconds": 5})
    with pytest.raises(ValueError):
        spec(data="none")  # the explicit choice is spelled None


PLAN = {"metadata": {"name": "p", "namespace": "shop", "uid": "0123456789ab"}}


def test_a_hook_job_mounts_the_workloads_claims() -> None:
    s = spec(data={"mover": "Hook", "hook": {"command": {"image": "postgres:16", "command": ["copy"]}}})
    job = hook_job(PLAN, s, "copy", "a", "b", workload_claims(STS), 2)
    pod = job["spec"]["template"]["spec"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]] == list(CLAIMS)
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    claim_of = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    # ordinal 0's claims where the workload mounts them, every claim under VOLUMES_ROOT
    assert claim_of[mounts["/var/lib/postgresql/data"]] == "data-db-0" and claim_of[mounts["/wal"]] == "wal-db-0"
    assert all(claim_of[mounts[f"{VOLUMES_ROOT}/{c}"]] == c for c in CLAIMS)
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["MIGRATION_RUN"] == "copy" and env["MIGRATION_VOLUMES"].split(",")[0] == f"{VOLUMES_ROOT}/data-db-0"
    off = spec(data={"mover": "Hook", "mountWorkloadVolumes": False, "hook": {"command": {"image": "x"}}})
    assert "volumes" not in hook_job(PLAN, off, "copy", "a", "b", workload_claims(STS), 2)["spec"]["template"]["spec"]


def test_volume_copy_and_probe_jobs() -> None:
    s = spec(data=VOLUME_COPY)
    job = hook_job(PLAN, s, "final-3", "a", "b", workload_claims(STS), 2)
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "wal-db-1"}}]
    c = pod["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert c["image"] == "registry.example/rsync-tls:1" and c["volumeMounts"][0]["mountPath"] == "/data"
    assert env["MIGRATION_CLAIM"] == "wal-db-1" and env["MIGRATION_RUN"] == "final"
    assert env["MIGRATION_TRANSPORT"] == "Rsync" and env["MIGRATION_SOURCE_CLUSTER"] == "a"
    assert job["metadata"]["name"] == "p-final-3-012345"
    probe = hook_job(PLAN, s, "probe-final", "a", "b", workload_claims(STS), 2)
    penv = {e["name"]: e["value"] for e in probe["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert penv["MIGRATION_MAX_LAG_SECONDS"] == "0" and penv["MIGRATION_RUN"] == "probe"
    penv0 = {e["name"]: e["value"] for e in hook_job(PLAN, s, "probe-0", "a", "b")["spec"]["template"]["spec"]
             ["containers"][0]["env"]}
    assert penv0["MIGRATION_MAX_LAG_SECONDS"] == "1"


@pytest.mark.parametrize(("bad", "says"), [
    (HookState("complete", report=report(5, source="other")), "checksum c5 differs from the source's other"),
    (HookState("complete"), "the copy reported no checksum")])
def test_a_copy_that_does_not_verify_rolls_back(bad: HookState, says: str) -> None:
    """CopyData is done only when every claim's copy hashes as its source did."""
    s = spec(data=VOLUME_COPY)
    st = advance(s, {}, facts(T0)).status
    st = advance(s, st, facts(T0 + 1, placement=PIN, copies=BOTH)).status
    hooks = {f"copy-{k}": HookState("complete", report=report(10)) for k in range(4)} | {"copy-2": bad}
    step = advance(s, st, facts(T0 + 2, placement=PIN, copies=BOTH, hooks=hooks))
    assert step.status["phase"] == "RollingBack" and cond(step.status, "RolledBack")["reason"] == "ChecksumMismatch"
    assert f"claim data-db-1: {says}" in step.status["message"]
    assert step.status["data"]["claims"][0]["checksum"] == "c10"
    # rolled back: the target's copy is gone, the claims made for it are not, and the plan says so (a deleted
    # plan left 20Gi on the target that nothing named)
    end = advance(s, step.status, facts(T0 + 3)).status
    assert end["phase"] == "RolledBack", end["message"]
    assert "those of its PersistentVolumeClaims (data-db-0, wal-db-0, data-db-1, wal-db-1) created on b for the " \
        "copy stay there" in end["message"], end["message"]
