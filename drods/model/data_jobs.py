"""Jobs that move data, sent to one member: a MigrationPlan's data runs and a CachePlan's copy.

Both go out the way every workload goes out — a ``batch/v1`` Job template in the plan's namespace
and a Binding pinned to the one member that runs it — and come back the one way member status comes
back: on the Work, rolled up into the Binding's ``status.clusters[]`` (``complete``, the Job's
``Failed`` condition, and the ``report`` the Job wrote on itself, `drods.model.annotations.RUN_REPORT`).
Shared here so the migration controller and the cache planner build and read them alike.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from drods.model.annotations import PINNED_PLACEMENT
from drods.model.detection import binding_name, pod_requests
from drods.model.kinds import BINDING
from drods.model.migration import pin_annotation

Obj = dict[str, Any]
DATA_PATH = "/data"  # where a copy Job mounts the claim it fills


def job_name(owner: str, uid: str, run: str) -> str:
    """``<owner>-<run>-<6 hex of the owner's uid>`` within 63 characters: one run per owner, found again
    by name after a crash."""
    tail = f"-{run}-{uid.replace('-', '')[:6]}"
    return f"{owner[:63 - len(tail)].rstrip('-.')}{tail}"


def one_container_job(image: str, command: list[str], args: list[str], env: list[dict[str, Any]]) -> Obj:
    container: Obj = {"name": "hook", "image": image}
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = copy.deepcopy(env)
    return {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}


def volume_copy_job(image: str, transport: str, claim: str, env: list[Obj]) -> Obj:
    """One claim's copy, run where the copy goes with that cluster's claim of the same name at
    ``/data``; the transport client pulls the source's claim (MIGRATION_CLAIM) from
    MIGRATION_SOURCE_CLUSTER, and writes its report (bytes, rate, both checksums) onto its Job."""
    env.extend([{"name": "MIGRATION_CLAIM", "value": claim}, {"name": "MIGRATION_TRANSPORT", "value": transport},
                {"name": "MIGRATION_DATA_PATH", "value": DATA_PATH}])
    job = one_container_job(image, [], [], [])
    pod = job["template"]["spec"]
    pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    pod["containers"][0].update(name="volume-copy", volumeMounts=[{"name": "data", "mountPath": DATA_PATH}])
    job["backoffLimit"] = 2  # a transport error is retried; the copy is incremental
    return job


def with_env(job_spec: Obj, env: list[Obj]) -> None:
    """``env`` on every container of the Job's pod (replacing same-named entries); restartPolicy Never."""
    pod = job_spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Never")
    names = {x["name"] for x in env}
    for c in pod.get("containers") or []:
        c["env"] = [e for e in c.get("env") or [] if e.get("name") not in names] + env


def pinned_job_binding(job: Mapping[str, Any], cluster: str, by: str, labels: Mapping[str, str]) -> Obj:
    """The Binding that sends ``job`` to ``cluster`` only (pinned by ``by``, so even a cordoned
    cluster may run it)."""
    meta = job["metadata"]
    ns, name = str(meta["namespace"]), str(meta["name"])
    spec = job.get("spec") or {}
    replicas = int(spec.get("parallelism") or 1)
    return {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
            "metadata": {"name": binding_name("Job", ns, name), "labels": dict(labels),
                         "annotations": {PINNED_PLACEMENT: pin_annotation(by, {cluster: replicas})}},
            "spec": {"resource": {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name},
                     "replicas": replicas, "resources": pod_requests(spec.get("template")),
                     "targetClusters": [cluster]}}


def _entry(binding: Mapping[str, Any] | None, cluster: str) -> Mapping[str, Any] | None:
    for e in ((binding or {}).get("status") or {}).get("clusters") or []:
        if isinstance(e, dict) and e.get("cluster") == cluster and not e.get("removing"):
            return e
    return None


def job_outcome(binding: Mapping[str, Any] | None, cluster: str) -> tuple[str, str]:
    """(absent | running | complete | failed, message) of a pinned Job from its Binding's status. A
    failed Job's message leads with the cause its run wrote in its report (``error``: "no space left
    on device"), which the Job's own condition ("backoff limit") does not carry."""
    if binding is None:
        return "absent", ""
    status = binding.get("status") or {}
    e = _entry(binding, cluster)
    if e is not None:
        if e.get("complete"):
            return "complete", ""
        for c in e.get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == "Failed" and c.get("status") == "True":
                why = str(c.get("message") or c.get("reason") or "the Job failed")
                cause = (e.get("report") or {}).get("error") if isinstance(e.get("report"), dict) else None
                return "failed", f"{cause} ({why})" if isinstance(cause, str) and cause else why
    if status.get("phase") == "Failed":
        return "failed", str(status.get("message") or "its Binding failed")
    return "running", ""


def job_report(binding: Mapping[str, Any] | None, cluster: str) -> Obj | None:
    """What the Job reported about itself (`drods.model.annotations.RUN_REPORT`), once its member told."""
    e = _entry(binding, cluster)
    report = (e or {}).get("report")
    return dict(report) if isinstance(report, dict) else None


def copy_figures(report: Mapping[str, Any] | None) -> Obj:
    """``{bytes, bytesPerSecond, checksum, sourceChecksum}`` of a copy's report (the numbers it gave)."""
    out: Obj = {}
    for key in ("bytes", "bytesPerSecond", "seconds"):
        v = (report or {}).get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[key] = v
    for key in ("checksum", "sourceChecksum"):
        v = (report or {}).get(key)
        if isinstance(v, str) and v:
            out[key] = v
    return out


def verified(figures: Mapping[str, Any]) -> bool:
    """The copy's content hashes as its source's did when the copy was taken."""
    return bool(figures.get("checksum")) and figures.get("checksum") == figures.get("sourceChecksum")
