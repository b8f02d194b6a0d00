"""An approved CachePlan's copy (F4): the Dataset's bytes moved into the chosen cluster, verified, and
only then a ``Cache`` location on the Dataset.

Approving a plan starts one copy Job in ``spec.cluster`` (`drods.model.data_jobs`, the same Job and
pinned Binding a MigrationPlan's VolumeCopy uses) writing into a claim of its own (named as the Job,
sized as the Dataset, mounted at ``/data``; it travels with the Job as a dependent, so the Cache copy
lives in it and goes with it): the transport client pulls the Dataset
(``COPY_DATASET``, ``COPY_SIZE_BYTES``) from ``sourceCluster`` — the plan's, else the Dataset's
Primary, else its first location — and reports its bytes, rate and both checksums on its Job. The
plan's ``status.phase`` goes ``Pending`` → ``Copying`` → ``Verifying`` → ``Ready`` (or ``Failed``):
the Dataset gains ``{cluster, kind: Cache}`` only at ``Ready``, once the copy's checksum equals its
source's. ``status`` then holds ``bytesMoved``, ``durationSeconds``, ``bytesPerSecond``, the checksums and
``transferCost`` (the bytes priced as DataLocality prices reads: GiB × the source's egress × the
reference link ÷ the link's bandwidth), and the decision journal gets the outcome (X1, ``CachePlan``).

Withdrawing — ``spec.approved: false`` after the copy, or deleting the plan — deletes the copy Job
and its claim (the member's Job and the claim holding the copy go with its Binding's Work) and takes
the location off the Dataset; a copy Job whose plan is gone is found by its label and removed the
same way. Every step is a level
read from the plan's status and the copy's Binding, so a new leader resumes where the last stopped.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.controllers.cache_decisions import cache_options, cache_runner_up
from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.decision_log import record_decisions
from drods.machinery.journal import Journal
from drods.model.annotations import CACHE_PLAN_LABEL, MANAGED_BY
from drods.model.data_jobs import (
    DATA_PATH,
    copy_figures,
    job_name,
    job_outcome,
    job_report,
    one_container_job,
    pinned_job_binding,
    verified,
    with_env,
)
from drods.model.decision import CACHE_PLAN as CACHE_PLAN_DECISION
from drods.model.detection import binding_is_for, binding_name
from drods.model.kinds import BINDING, CACHE_PLAN, DATASET, by_kind
from drods.model.migration import COPY_IMAGE
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.model.work import label_value
from drods.registry.objects import ObjectRegistry

log = logging.getLogger(__name__)
Obj = dict[str, Any]
JOB = by_kind("batch/v1", "Job")
CLAIM = by_kind("v1", "PersistentVolumeClaim")
assert JOB is not None
MANAGED_BY_CACHE = "cache-planner"
PENDING, COPYING, VERIFYING, READY, FAILED, WITHDRAWN = "Pending", "Copying", "Verifying", "Ready", "Failed", \
    "Withdrawn"
GIB = 2**30


def copy_run(plan: Mapping[str, Any]) -> tuple[str, str]:
    """(Job name, Binding name) of a plan's copy: one per plan (its uid), found again after a crash."""
    meta = plan["metadata"]
    ns = str(meta.get("namespace") or "default")
    job = job_name(str(meta["name"]), str(meta.get("uid") or ""), "cache")
    return job, binding_name("Job", ns, job)


async def delete_job_binding(registry: ObjectRegistry, namespace: str, job: str) -> None:
    """Delete the Binding of the Job ``namespace``/``job`` — only if the one under its name is that Job's
    (names collide across namespaces: `drods.model.detection.binding_is_for`)."""
    name = binding_name("Job", namespace, job)
    binding = await registry.try_get(BINDING, name)
    if not binding_is_for(binding, "Job", namespace, job):
        return
    assert binding is not None
    with contextlib.suppress(NotFound):
        await registry.delete(BINDING, name, resource_version=binding["metadata"].get("resourceVersion"))


def source_of(spec: Mapping[str, Any], ds: Mapping[str, Any], cluster: str) -> str | None:
    """Where the copy reads from: the plan's ``sourceCluster`` if it holds a copy, else the Primary, else any."""
    held = [loc for loc in (ds.get("spec") or {}).get("locations") or []
            if isinstance(loc, dict) and loc.get("cluster") != cluster]
    names = [str(loc.get("cluster")) for loc in held]
    if spec.get("sourceCluster") in names:
        return str(spec["sourceCluster"])
    primary = [str(loc.get("cluster")) for loc in held if loc.get("kind") == "Primary"]
    pick = primary or names
    return pick[0] if pick else None


def _holds(ds: Mapping[str, Any], cluster: str) -> bool:
    return any(isinstance(loc, dict) and loc.get("cluster") == cluster
               for loc in (ds.get("spec") or {}).get("locations") or [])


def copy_job(plan: Mapping[str, Any], ds: Mapping[str, Any], source: str, image: str) -> Obj:
    """The copy Job of a plan: pull the Dataset from ``source`` into this cluster, report on itself."""
    meta, spec = plan["metadata"], plan.get("spec") or {}
    ns = str(meta.get("namespace") or "default")
    size = (ds.get("spec") or {}).get("sizeGiB")
    env = [{"name": "COPY_DATASET", "value": f"{ns}/{spec.get('dataset')}"},
           {"name": "COPY_SIZE_BYTES", "value": str(int(float(size) * GIB)) if size is not None else ""},
           {"name": "COPY_SOURCE_CLUSTER", "value": source},
           {"name": "COPY_TARGET_CLUSTER", "value": str(spec.get("cluster"))},
           {"name": "MIGRATION_TRANSPORT", "value": "Rsync"}]
    name, _ = copy_run(plan)
    job_spec = one_container_job(image, [], [], [])
    pod = job_spec["template"]["spec"]
    pod["volumes"] = [{"name": "cache", "persistentVolumeClaim": {"claimName": name}}]
    pod["containers"][0].update(name="dataset-copy", volumeMounts=[{"name": "cache", "mountPath": DATA_PATH}])
    job_spec["backoffLimit"] = 2  # a transport error is retried; the copy is incremental
    with_env(job_spec, [*env, {"name": "COPY_DATA_PATH", "value": DATA_PATH}])
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": labels(plan)}, "spec": job_spec}


def copy_claim(plan: Mapping[str, Any], ds: Mapping[str, Any]) -> Obj:
    """The claim the copy fills and the Cache copy lives in: named as the Job, sized as the Dataset. It
    follows the Job to the cluster (a claim its pod mounts is a dependent of the Job's Binding), so it
    goes with the Job's Work when the copy is withdrawn."""
    meta = plan["metadata"]
    size = float((ds.get("spec") or {}).get("sizeGiB") or 0)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": copy_run(plan)[0], "namespace": str(meta.get("namespace") or "default"),
                         "labels": labels(plan)},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": f"{max(math.ceil(size * 1024), 1)}Mi"}}}}


def labels(plan: Mapping[str, Any]) -> dict[str, str]:
    meta = plan["metadata"]
    return {MANAGED_BY: MANAGED_BY_CACHE,
            CACHE_PLAN_LABEL: label_value(f"{meta.get('namespace') or 'default'}.{meta['name']}")}


def conditions(phase: str, message: str, now: float) -> list[Obj]:
    """Copied / Verified / Ready as the phase says (Kubernetes condition shape)."""
    at = rfc3339_ms(now)
    copied = phase in (VERIFYING, READY)
    ok = phase == READY
    why = {PENDING: "Pending", COPYING: "Copying", VERIFYING: "Verifying", READY: "Ready", FAILED: "CopyFailed",
           WITHDRAWN: "Withdrawn"}[phase]
    return [{"type": "Copied", "status": str(copied), "reason": "Copied" if copied else why,
             "lastTransitionTime": at},
            {"type": "Verified", "status": str(ok), "reason": "ChecksumEqual" if ok else why, "lastTransitionTime": at},
            {"type": "Ready", "status": str(ok), "reason": why, "message": message, "lastTransitionTime": at}]


@dataclass
class CacheCopies:
    """Drives approved CachePlans' copies (the cache planner calls it for every approved plan)."""

    registry: ObjectRegistry
    decisions: Journal
    clock: Callable[[], float]
    image: str = COPY_IMAGE
    timeout: float = 3600.0  # seconds a copy may run before the plan fails
    price: Callable[[str, str, float], float] | None = None  # (source, cluster, GiB) → transfer cost
    far_cost: float | None = None  # the planner's farCostPerHour: why keeping the reads remote lost

    async def advance(self, plan: Obj, ds: Obj | None) -> None:
        spec, status = plan.get("spec") or {}, dict(plan.get("status") or {})
        phase = str(status.get("phase") or PENDING)
        if not spec.get("approved"):
            if phase in (COPYING, VERIFYING, READY):
                await self.withdraw(plan, ds, "spec.approved is false: the copy is withdrawn")
            return
        if phase == READY and ds is not None and not _holds(ds, str(spec.get("cluster"))):
            await self._locate(ds, str(spec.get("cluster")), add=True)  # Ready is written first: a crash in between
        if phase in (READY, FAILED):
            return
        if ds is None:
            await self._finish(plan, FAILED, f"Dataset {spec.get('dataset')} not found")
            return
        cluster = str(spec.get("cluster"))
        if phase not in (COPYING, VERIFYING):
            source = source_of(spec, ds, cluster)
            if source is None:
                await self._finish(plan, FAILED, f"Dataset {spec.get('dataset')} has no copy to read from")
                return
            if (ds.get("spec") or {}).get("sizeGiB") is None:
                await self._finish(plan, FAILED, "the Dataset declares no sizeGiB: the copy would not know what "
                                                 "to move")
                return
            started = await self._set(plan, COPYING, f"copying {spec.get('dataset')} from {source} to {cluster}",
                                      copySource=source, copyJob=copy_run(plan)[0],
                                      copyStartTime=rfc3339_ms(self.clock()))
            if started is not None:  # recorded first: a new leader finds the run by the recorded phase
                await self._start(started, ds, source)
            return
        binding = await self.registry.try_get(BINDING, copy_run(plan)[1])
        if not binding_is_for(binding, "Job", str(plan["metadata"].get("namespace") or "default"), copy_run(plan)[0]):
            binding = None  # another object's Binding under the copy's name is not the copy's
        if binding is None:  # recorded as Copying, its Job not yet there (a crash between the two)
            await self._start(plan, ds, str(status.get("copySource")))
            return
        state, message = job_outcome(binding, cluster)
        began = parse_rfc3339(status.get("copyStartTime"))
        if state == "running" and began is not None and self.clock() - began > self.timeout:
            # a cluster that went away, or a copy that never ends, blocks nobody: its Job goes, the plan fails
            await self.withdraw(plan, None, "", keep_status=True)
            await self._finish(plan, FAILED, f"the copy did not finish within {self.timeout:g}s")
        elif state == "failed":
            await self._finish(plan, FAILED, f"the copy failed: {message}")
        elif state == "complete":
            await self._verify(plan, ds, job_report(binding, cluster))

    async def _verify(self, plan: Obj, ds: Obj, report: Obj | None) -> None:
        spec, status = plan.get("spec") or {}, dict(plan.get("status") or {})
        figures = copy_figures(report)
        if str(status.get("phase")) == COPYING:
            plan = await self._set(plan, VERIFYING, "comparing the copy's checksum with its source's") or plan
        if not verified(figures):
            why = "the copy reported no checksum" if not figures.get("checksum") else \
                f"checksum {figures['checksum']} differs from the source's {figures.get('sourceChecksum')}"
            await self._finish(plan, FAILED, f"the copy did not verify: {why}")
            return
        cluster = str(spec.get("cluster"))
        gib = float(figures.get("bytes") or 0) / GIB
        source = str(status.get("copySource") or "")
        cost = self.price(source, cluster, gib) if self.price is not None else None
        extra: Obj = {"bytesMoved": int(figures.get("bytes") or 0), "durationSeconds": figures.get("seconds"),
                      "bytesPerSecond": figures.get("bytesPerSecond"), "checksum": figures.get("checksum"),
                      "sourceChecksum": figures.get("sourceChecksum"), "readyTime": rfc3339_ms(self.clock())}
        if cost is not None:
            extra["transferCost"] = round(cost, 6)
        if await self._finish(plan, READY, f"{spec.get('dataset')} has a verified Cache copy on {cluster}", **extra):
            await self._locate(ds, cluster, add=True)  # after Ready is recorded: a location means a verified copy
        log.info("cache plan %s: ready, %s bytes on %s", plan["metadata"]["name"], extra["bytesMoved"], cluster)

    async def withdraw(self, plan: Obj | None, ds: Obj | None, message: str, *, job: tuple[str, str] | None = None,
                       namespace: str | None = None, cluster: str | None = None, keep_status: bool = False) -> None:
        """Remove the copy (its Job and Binding) and the Dataset's Cache location for the plan's cluster."""
        if plan is not None:
            job = copy_run(plan)
            namespace = str(plan["metadata"].get("namespace") or "default")
            cluster = str((plan.get("spec") or {}).get("cluster"))
        assert job is not None and namespace is not None
        if ds is not None and cluster:
            await self._locate(ds, cluster, add=False)
        assert JOB is not None and CLAIM is not None
        await delete_job_binding(self.registry, namespace, job[0])
        for kind, name, ns in ((JOB, job[0], namespace), (CLAIM, job[0], namespace)):
            with contextlib.suppress(NotFound):
                await self.registry.delete(kind, name, ns)
        if plan is not None and not keep_status:
            await self._finish(plan, WITHDRAWN, message)

    async def _start(self, plan: Obj, ds: Obj, source: str) -> None:
        """The copy Job, then its Binding (a run is started once: both exist or are made again)."""
        job = copy_job(plan, ds, source, self.image)
        ns, name = str(plan["metadata"].get("namespace") or "default"), str(plan["metadata"]["name"])
        binding = pinned_job_binding(job, str((plan.get("spec") or {}).get("cluster")), f"CachePlan {ns}/{name}",
                                     labels(plan))
        assert JOB is not None and CLAIM is not None
        for kind, obj, namespace in ((CLAIM, copy_claim(plan, ds), ns), (JOB, job, ns), (BINDING, binding, None)):
            with contextlib.suppress(AlreadyExists, Conflict):
                await self.registry.create(kind, obj, namespace)

    async def _locate(self, ds: Obj, cluster: str, *, add: bool) -> None:
        """Add (or take off) the Dataset's Cache location on ``cluster`` (compare-and-swap on what is stored)."""
        meta = ds["metadata"]
        fresh = await self.registry.try_get(DATASET, str(meta["name"]), meta.get("namespace"))
        if fresh is None:
            return
        locs = [loc for loc in (fresh.get("spec") or {}).get("locations") or [] if isinstance(loc, dict)]
        has = any(loc.get("cluster") == cluster for loc in locs)
        if add and not has:
            locs.append({"cluster": cluster, "kind": "Cache"})
        elif not add and has:
            locs = [loc for loc in locs if not (loc.get("cluster") == cluster and loc.get("kind") == "Cache")]
        else:
            return
        await self.registry.update(DATASET, {**fresh, "spec": {**fresh["spec"], "locations": locs}},
                                   meta.get("namespace"))

    async def _set(self, plan: Obj, phase: str, message: str, **extra: Any) -> Obj | None:
        meta = plan["metadata"]
        status = {**(plan.get("status") or {}), **extra, "phase": phase, "message": message,
                  "conditions": conditions(phase, message, self.clock())}
        try:
            return await self.registry.update_status(CACHE_PLAN, meta["name"], status, meta.get("namespace"),
                                                     resource_version=int(meta["resourceVersion"]))
        except (NotFound, Conflict, AlreadyExists):
            return None

    async def _finish(self, plan: Obj, phase: str, message: str, **extra: Any) -> bool:
        """An end (Ready, Failed, Withdrawn): the status, then its decision record; False if not written."""
        new = await self._set(plan, phase, message, **extra)
        if new is not None:
            await self._record(plan, phase, new.get("status") or {})
        return new is not None

    async def _record(self, plan: Obj, phase: str, status: Mapping[str, Any]) -> None:
        """The copy's outcome in the decision journal (a lost explanation never stops a copy)."""
        meta, spec = plan["metadata"], plan.get("spec") or {}
        ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
        weighed = {**spec, "sourceCluster": spec.get("sourceCluster") or status.get("copySource")}
        outcome = {k: status.get(k) for k in ("bytesMoved", "durationSeconds", "bytesPerSecond", "transferCost",
                                              "checksum", "copySource") if status.get(k) is not None}
        rec: Obj = {"type": CACHE_PLAN_DECISION,
               "subject": {"kind": "Dataset", "namespace": ns, "name": spec.get("dataset")},
               "trigger": {"reason": {READY: "CopyVerified", FAILED: "CopyFailed", WITHDRAWN: "Withdrawn"}[phase]},
               "inputs": {"copy": {"cluster": spec.get("cluster"), "sourceCluster": status.get("copySource")}},
               "options": cache_options(weighed, self.far_cost), "optionsTopK": None, "optionsOmitted": 0,
               "outcome": {"cachePlan": f"{ns}/{name}", "phase": phase, **outcome},
               "summary": str(status.get("message") or phase), "runnerUp": cache_runner_up(weighed, self.far_cost),
               "source": {"journal": "decisions", "cachePlan": f"{ns}/{name}"}}
        try:
            await record_decisions(self.decisions, [(self.clock(), rec)])
        except Exception:  # noqa: BLE001 - the journal explains, it is not the state
            log.warning("cache plan %s/%s: decision not recorded", ns, name, exc_info=True)


async def orphans(registry: ObjectRegistry, plans: set[str]) -> list[tuple[tuple[str, str], str, str, str]]:
    """Copy Jobs whose plan is gone: ((Job, Binding), namespace, dataset, cluster) of each."""
    assert JOB is not None
    out: list[tuple[tuple[str, str], str, str, str]] = []
    for job in await registry.scan(JOB):
        meta = job["metadata"]
        if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGED_BY_CACHE:
            continue
        ns = str(meta.get("namespace") or "default")
        if (meta.get("labels") or {}).get(CACHE_PLAN_LABEL) in plans:
            continue
        env = {str(e.get("name")): str(e.get("value") or "") for c in
               ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
               for e in c.get("env") or []}
        out.append(((str(meta["name"]), binding_name("Job", ns, str(meta["name"]))), ns,
                    env.get("COPY_DATASET", "").partition("/")[2], env.get("COPY_TARGET_CLUSTER", "")))
    return out
