"""A plan's data hook as objects the control plane already propagates: a ``batch/v1`` Job template in
the plan's namespace and a Binding pinned to the one member that runs it (the target by default).

So the hook goes out (`drods.model.data_jobs`, shared with the cache planner's copies) like any
workload — a Work applied by the execution controller (push) or the
member's agent (pull) — and its outcome comes back the one way member status comes back: on the
Work, rolled up into the hook Binding's ``status.clusters[]`` (``complete``, and the Job's
``Failed`` condition). Names carry the plan's uid, so a run is created once per plan: a pass
repeated after a crash finds it and does not start the copy again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from drods.model.annotations import MANAGED_BY, PLAN_LABEL
from drods.model.data_jobs import job_name, one_container_job, pinned_job_binding, volume_copy_job, with_env
from drods.model.migration import MANAGED_BY_MIGRATION, MigrationPlanSpec, plan_ref
from drods.model.volume_claims import Claims, mount_claims
from drods.model.work import label_value

Obj = dict[str, Any]


def plan_label(namespace: str, name: str) -> str:
    return label_value(f"{namespace}.{name}")


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
        job_spec = one_container_job(probe.image, probe.command, probe.args, probe.env)
    elif step.mover == "VolumeCopy":
        if stage == "catchup" and step.catchUp is not None:
            env.append({"name": "MIGRATION_FOLLOW", "value": "true"})  # keep syncing until the final run
        names = claims.names(spec.workloadRef.name, replicas)
        k = int(index or 0)
        job_spec = volume_copy_job(step.image or "", step.transport, names[k] if 0 <= k < len(names) else "", env)
    else:
        assert step.hook is not None
        if step.hook.jobTemplate is not None:
            tmpl = copy.deepcopy(step.hook.jobTemplate)
            job_spec = tmpl["spec"]
            tmeta = dict(tmpl.get("metadata") or {})
        else:
            cmd = step.hook.command
            assert cmd is not None
            job_spec = one_container_job(cmd.image, cmd.command, cmd.args, cmd.env)
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if step.mountWorkloadVolumes and claims:
            paths = mount_claims(pod, claims, spec.workloadRef.name, replicas)
            env.append({"name": "MIGRATION_VOLUMES", "value": ",".join(paths)})
    with_env(job_spec, env)
    labels = {**(tmeta.get("labels") or {}), PLAN_LABEL: plan_label(ns, name), MANAGED_BY: MANAGED_BY_MIGRATION}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {**tmeta, "name": job_name(name, str(meta.get("uid") or ""), run), "namespace": ns,
                         "labels": labels},
            "spec": job_spec}


def hook_binding(job: Mapping[str, Any], cluster: str, plan_namespace: str, plan_name: str) -> Obj:
    """The Binding that sends the hook Job to ``cluster`` only (pinned, so even a cordoned source may run it)."""
    ns = str(job["metadata"]["namespace"])
    return pinned_job_binding(job, cluster, plan_ref(plan_namespace, plan_name),
                              {MANAGED_BY: MANAGED_BY_MIGRATION, PLAN_LABEL: plan_label(ns, plan_name)})
