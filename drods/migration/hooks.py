"""A plan's data hook as objects the control plane already propagates: a ``batch/v1`` Job template in
the plan's namespace and a Binding pinned to the one member that runs it (the target by default).

So the hook goes out like any workload — a Work applied by the execution controller (push) or the
member's agent (pull) — and its outcome comes back the one way member status comes back: on the
Work, rolled up into the hook Binding's ``status.clusters[]`` (``complete``, and the Job's
``Failed`` condition). Names carry the plan's uid, so a run is created once per plan: a pass
repeated after a crash finds it and does not start the copy again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from drods.migration.volumes import Claims, mount_claims
from drods.model.annotations import MANAGED_BY, PINNED_PLACEMENT, PLAN_LABEL
from drods.model.detection import binding_name, pod_requests
from drods.model.kinds import BINDING
from drods.model.migration import MANAGED_BY_MIGRATION, MigrationPlanSpec, pin_annotation, plan_ref
from drods.model.work import label_value

Obj = dict[str, Any]


def plan_label(namespace: str, name: str) -> str:
    return label_value(f"{namespace}.{name}")


def job_name(plan: str, uid: str, run: str) -> str:
    tail = f"-{run}-{uid.replace('-', '')[:6]}"
    return f"{plan[:63 - len(tail)].rstrip('-.')}{tail}"


def split_run(run: str) -> tuple[str, str]:
    """(stage, index) of a run name: ``copy`` → (copy, ""), ``copy-2`` → (copy, 2), ``probe-final``."""
    stage, _, index = run.partition("-")
    return stage, index


def hook_job(plan: Mapping[str, Any], spec: MigrationPlanSpec, run: str, source: str, target: str,
             claims: Claims | None = None, replicas: int = 0) -> Obj:
    """The Job of one data run — a Hook run (``copy``, ``catchup``, ``final``), a VolumeCopy run of one
    claim (``copy-K`` …) or a lag probe (``probe-N``, ``probe-final``) — with the plan in its environment."""
    step = spec.data_step()
    assert step is not None
    meta = plan["metadata"]
    ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
    stage, index = split_run(run)
    claims = claims or Claims()
    env = [{"name": "MIGRATION_PLAN", "value": f"{ns}/{name}"}, {"name": "MIGRATION_RUN", "value": stage},
           {"name": "MIGRATION_SOURCE_CLUSTER", "value": source},
           {"name": "MIGRATION_TARGET_CLUSTER", "value": target},
           {"name": "MIGRATION_WORKLOAD", "value": f"{spec.workloadRef.kind}/{ns}/{spec.workloadRef.name}"}]
    tmeta: Obj = {}
    if stage == "probe":
        assert step.catchUp is not None
        probe = step.catchUp.probe
        lag = 0.0 if index == "final" else step.catchUp.maxLagSeconds
        env.append({"name": "MIGRATION_MAX_LAG_SECONDS", "value": f"{lag:g}"})
        job_spec = _one_container_job(probe.image, probe.command, probe.args, probe.env)
    elif step.mover == "VolumeCopy":
        if stage == "catchup" and step.catchUp is not None:
            env.append({"name": "MIGRATION_FOLLOW", "value": "true"})  # keep syncing until the final run
        job_spec = _volume_copy_job(step.image or "", step.transport, claims.names(spec.workloadRef.name, replicas),
                                    int(index or 0), env)
    else:
        assert step.hook is not None
        if step.hook.jobTemplate is not None:
            tmpl = copy.deepcopy(step.hook.jobTemplate)
            job_spec = tmpl["spec"]
            tmeta = dict(tmpl.get("metadata") or {})
        else:
            cmd = step.hook.command
            assert cmd is not None
            job_spec = _one_container_job(cmd.image, cmd.command, cmd.args, cmd.env)
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if step.mountWorkloadVolumes and claims:
            paths = mount_claims(pod, claims, spec.workloadRef.name, replicas)
            env.append({"name": "MIGRATION_VOLUMES", "value": ",".join(paths)})
    pod = job_spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Never")
    for c in pod.get("containers") or []:
        c["env"] = [e for e in c.get("env") or [] if e.get("name") not in {x["name"] for x in env}] + env
    labels = {**(tmeta.get("labels") or {}), PLAN_LABEL: plan_label(ns, name), MANAGED_BY: MANAGED_BY_MIGRATION}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {**tmeta, "name": job_name(name, str(meta.get("uid") or ""), run), "namespace": ns,
                         "labels": labels},
            "spec": job_spec}


def _one_container_job(image: str, command: list[str], args: list[str], env: list[dict[str, Any]]) -> Obj:
    container: Obj = {"name": "hook", "image": image}
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = copy.deepcopy(env)
    return {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}


def _volume_copy_job(image: str, transport: str, claims: list[str], index: int, env: list[Obj]) -> Obj:
    """VolumeCopy: one claim's copy, run in the target with the target's claim of the same name at
    /data; the transport client pulls the source's claim (MIGRATION_CLAIM) from MIGRATION_SOURCE_CLUSTER."""
    claim = claims[index] if 0 <= index < len(claims) else ""
    env.extend([{"name": "MIGRATION_CLAIM", "value": claim}, {"name": "MIGRATION_TRANSPORT", "value": transport},
                {"name": "MIGRATION_DATA_PATH", "value": "/data"}])
    job = _one_container_job(image, [], [], [])
    pod = job["template"]["spec"]
    pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    pod["containers"][0].update(name="volume-copy", volumeMounts=[{"name": "data", "mountPath": "/data"}])
    job["backoffLimit"] = 2  # a transport error is retried; the copy is incremental
    return job


def hook_binding(job: Mapping[str, Any], cluster: str, plan_namespace: str, plan_name: str) -> Obj:
    """The Binding that sends the hook Job to ``cluster`` only (pinned, so even a cordoned source may run it)."""
    meta = job["metadata"]
    ns, name = str(meta["namespace"]), str(meta["name"])
    spec = job.get("spec") or {}
    replicas = int(spec.get("parallelism") or 1)
    return {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
            "metadata": {"name": binding_name("Job", ns, name),
                         "labels": {MANAGED_BY: MANAGED_BY_MIGRATION, PLAN_LABEL: plan_label(ns, plan_name)},
                         "annotations": {PINNED_PLACEMENT: pin_annotation(plan_ref(plan_namespace, plan_name),
                                                                          {cluster: replicas})}},
            "spec": {"resource": {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name},
                     "replicas": replicas, "resources": pod_requests(spec.get("template")),
                     "targetClusters": [cluster]}}


def hook_outcome(binding: Mapping[str, Any] | None, cluster: str) -> tuple[str, str]:
    """(absent | running | complete | failed, message) of a hook run from its Binding's status."""
    if binding is None:
        return "absent", ""
    status = binding.get("status") or {}
    for e in status.get("clusters") or []:
        if not isinstance(e, dict) or e.get("cluster") != cluster or e.get("removing"):
            continue
        if e.get("complete"):
            return "complete", ""
        for c in e.get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == "Failed" and c.get("status") == "True":
                return "failed", str(c.get("message") or c.get("reason") or "the Job failed")
    if status.get("phase") == "Failed":
        return "failed", str(status.get("message") or "its Binding failed")
    return "running", ""
