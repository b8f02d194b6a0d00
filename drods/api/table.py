"""Server-side printing (``as=Table``): the columns ``kubectl get`` shows, decided by the server.

Every table is a list of `Column`s — a dotted JSON path or a small formatter of the object — per
kind, in two sets: the control plane's own (`_COLUMNS`, by kind name) and what kube-apiserver
prints for the built-in kinds (`KUBERNETES_COLUMNS`, after ``pkg/printers/internalversion``). The
same kind prints differently on the two kinds of server (a Deployment on the control plane is a
template placed on clusters; on a member it is a live object), so a server whose Kind table
is a plain cluster's (``drods sim``) serves `PrintedKind`s that carry their columns.

The control plane's Deployment prints where its copies run and their measured use, which are its
Binding's status (``status.clusters[]``, ``status.usage``), not the template's (its status keeps to
``DeploymentStatus``: `drods.controllers.status`): the caller reads the Bindings (`bindings_of`) and
those columns read them as ``binding.status.…``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from drods.errors import NotFound
from drods.model.annotations import learned_users_forgotten
from drods.model.conditions import condition
from drods.model.detection import binding_is_for, binding_name
from drods.model.kinds import BINDING, Kind
from drods.model.timefmt import parse_datetime
from drods.registry.objects import ObjectRegistry

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Column:
    """One column: ``cell`` is a dotted path into the object or a function of it. ``default``
    stands in for an unset or empty value (what the API server would have defaulted);
    ``priority`` 1 columns appear only with ``kubectl get -o wide``."""

    name: str
    cell: str | Callable[[Obj], Any]
    type: str = "string"
    priority: int = 0
    default: Any = None
    format: str = ""

    def value(self, obj: Obj) -> Any:
        value = self.cell(obj) if callable(self.cell) else _get(obj, self.cell)
        if value is None or value == "":
            value = self.default
        return "" if value is None else value

    def definition(self) -> dict[str, Any]:
        description = self.cell if isinstance(self.cell, str) else self.cell.__name__.strip("_").replace("_", " ")
        return {"name": self.name, "type": self.type, "format": self.format, "description": description,
                "priority": self.priority}


@dataclass(frozen=True)
class PrintedKind(Kind):
    """A Kind that brings its own columns (instead of the control plane's for its name)."""

    columns: tuple[Column, ...] = ()


def wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def _row_object(kind: Kind, obj: Obj, include: str | None) -> Obj | None:
    """What a row carries, as ``?includeObject=`` asks: the object whole (``Object``: what ``kubectl get
    --sort-by=.lastTimestamp`` sorts on), nothing (``None``), else its metadata."""
    if include == "Object":
        return {"kind": kind.kind, "apiVersion": kind.api_version, **obj}
    if include == "None":
        return None
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def _columns(kind: Kind) -> tuple[Column, ...]:
    if kind.custom is not None and kind.custom.printer_columns:  # a CRD's printer columns after the name
        return (NAME, *(_printer_column(*c) for c in kind.custom.printer_columns))
    return kind.columns if isinstance(kind, PrintedKind) and kind.columns else \
        _GROUP_COLUMNS.get((kind.group, kind.kind)) or _COLUMNS.get(kind.kind) \
        or (KUBERNETES_COLUMNS.get(kind.kind) if kind.spec_model is None and kind.custom is None else None) \
        or _PLAIN  # a built-in kind the control plane has no view of its own for prints as a cluster does


def reads_binding(kind: Kind) -> bool:
    """Whether ``kind``'s columns read each object's Binding (``binding.status.…``) besides the object."""
    return any(isinstance(c.cell, str) and c.cell.startswith("binding.") or
               getattr(c.cell, "__name__", "").startswith("binding.") for c in _columns(kind))


async def bindings_of(registry: ObjectRegistry, kind: Kind, items: Sequence[Obj]) -> list[Obj | None] | None:
    """Each object's Binding (None where it has none) when ``kind``'s columns read it, else None: the one
    of the detector's name (`binding_name`), one read each; else, for a template the binding controller
    has written a status on, one made by hand whose ``spec.resource`` names it (one list of the
    Bindings, only then: a page of unplaced Deployments, which have no status, reads no more)."""
    if not reads_binding(kind):
        return None

    def ident(obj: Obj) -> tuple[str, str, str | None]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or ""), meta.get("uid")

    def places(b: Obj | None, obj: Obj) -> bool:
        ns, name, uid = ident(obj)
        return binding_is_for(b, kind.kind, ns, name, api_version=kind.api_version, uid=uid)

    async def named(obj: Obj) -> Obj | None:
        ns, name, _ = ident(obj)
        try:
            b = await registry.get(BINDING, binding_name(kind.kind, ns, name))
        except NotFound:
            return None
        return b if places(b, obj) else None

    found: list[Obj | None] = list(await asyncio.gather(*(named(o) for o in items)))
    # a template with a status and no Binding of the detector's name is placed by one made by hand
    # (POST /api/v1/bindings with its resource): look those up in one list; an unplaced one has none
    if any(b is None and o.get("status") for o, b in zip(items, found, strict=True)):
        every, _ = await registry.list(BINDING)
        found = [b if b is not None or not o.get("status") else next((x for x in every if places(x, o)), None)
                 for o, b in zip(items, found, strict=True)]
    return found


def to_table(kind: Kind, items: list[Obj], revision: int, include: str | None = None,
             bindings: Sequence[Obj | None] | None = None) -> Obj:
    """``bindings``: each item's Binding (`bindings_of`), which ``binding.status.…`` columns read."""
    columns = _columns(kind)
    seen = items if bindings is None else [{**o, "binding": b or {}} for o, b in zip(items, bindings, strict=True)]
    rows = [{"cells": [c.value(view) for c in columns], "object": _row_object(kind, obj, include)}
            for obj, view in zip(items, seen, strict=True)]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": str(revision)},
            "columnDefinitions": [c.definition() for c in columns], "rows": rows}


# ---- shared helpers ---------------------------------------------------------------------------------


def _get(obj: Any, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _list(obj: Obj, path: str) -> list[Any]:
    value = _get(obj, path)
    return value if isinstance(value, list) else []


def _int(obj: Obj, path: str, default: int = 0) -> int:
    value = _get(obj, path)
    return value if isinstance(value, int) else default




def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``: what kubectl prints for ages (``90s``, ``5m30s``, ``3h5m``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y" if days % 365 == 0 else f"{days // 365}y{days % 365}d"
    return f"{days // 365}y"


def since(text: Any) -> str:
    then = parse_datetime(text)
    if then is None:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def _printer_column(name: str, path: str, type_: str, priority: int) -> Column:
    """A definition's printer column; a ``date`` prints as an age, as kube-apiserver prints it."""
    if type_ == "date":
        def age(obj: Obj) -> str:
            return since(_get(obj, path))
        return Column(name, age, "string", priority)
    return Column(name, path, type_, priority)


def _age(obj: Obj) -> str:
    return since(_get(obj, "metadata.creationTimestamp"))


NAME = Column("Name", "metadata.name", format="name")
AGE = Column("Age", _age)
_PLAIN: tuple[Column, ...] = (NAME, AGE)


# ---- the control plane's kinds ----------------------------------------------------------------------


def _ready_condition(obj: Obj) -> str:
    cond = condition(obj, "Ready")
    return "Unknown" if cond is None else str(cond.get("status"))


def _nodes(obj: Obj) -> str | None:
    ns = _get(obj, "status.nodeSummary") or {}
    return f"{ns.get('readyNum', 0)}/{ns.get('totalNum', 0)}" if ns else None


def _summary(resource: str, total: str = "allocatable", parts: tuple[str, ...] = ("allocated", "used")
             ) -> Callable[[Obj], str | None]:
    """``allocated/used of allocatable`` of one resource of the member's summary."""
    def cell(obj: Obj) -> str | None:
        got = _get(obj, f"status.resourceSummary.{resource}") or {}

        def shown(key: str) -> str:  # a value the member did not state is not a 0
            v = got.get(key)
            return f"{v:g}" if isinstance(v, int | float) else "-"
        return f"{'/'.join(shown(p) for p in parts)} of {shown(total)}" if got else None

    cell.__name__ = resource
    return cell


def _taints(obj: Obj) -> str | None:
    rows = _list(obj, "spec.taints")
    return ",".join(f"{t.get('key')}:{t.get('effect')}" for t in rows if isinstance(t, dict)) or None


def _water(obj: Obj) -> str | None:
    wl = _get(obj, "status.resourceSummary.waterLevel")
    return f"{wl:.0%}" if isinstance(wl, int | float) else None


def _heartbeat(obj: Obj) -> str | None:
    cond = condition(obj, "Ready")
    return since(cond["lastHeartbeatTime"]) if cond is not None and cond.get("lastHeartbeatTime") else None


def _replicas_ready(obj: Obj) -> str:
    """ready / desired — desired being the total of the Binding that places the template where it has one:
    under a FederatedHPA the autoscaler's count (Karmada writes it into the template; DRO-DS leaves the
    template's ``spec.replicas`` the user's, and READY read 6/2). A Binding made by hand with no replicas
    places what the template asks for."""
    desired = _get(obj, "binding.spec.replicas")
    if not isinstance(desired, int) or isinstance(desired, bool) or desired <= 0:
        desired = _get(obj, "spec.replicas") or 0
    return f"{_get(obj, 'status.readyReplicas') or 0}/{desired}"


def _per_cluster(path: str) -> Callable[[Obj], str | None]:
    def cell(obj: Obj) -> str | None:
        rows = _list(obj, path)
        return ",".join(f"{r.get('cluster')}:{r.get('replicas', 0)}" for r in rows if isinstance(r, dict)) or None

    cell.__name__ = path
    return cell


def _usage(resource: str, path: str) -> Callable[[Obj], str | None]:
    """``used/requested`` of the workload's ready pods over its clusters (a Binding's ``status.usage``);
    ``<unknown>`` when no member's metrics were read."""
    def cell(obj: Obj) -> str | None:
        usage = _get(obj, path)
        if not isinstance(usage, dict):
            return None
        part = usage.get(resource)
        if not isinstance(part, dict):
            return "<unknown>"
        return f"{part.get('used')}/{part.get('requested')}"

    cell.__name__ = f"{path}.{resource}"
    return cell


def _pods_ready(path: str) -> Callable[[Obj], str | None]:
    def cell(obj: Obj) -> str | None:
        if not isinstance(_get(obj, path), dict):
            return None
        return f"{_get(obj, f'{path}.readyPods') or 0}/{_get(obj, f'{path}.pods') or 0}"

    cell.__name__ = f"{path}.pods"
    return cell


def usage_columns(path: str) -> tuple[Column, ...]:
    """The measured-use columns (``-o wide``) of the usage document at ``path``."""
    return (Column("CPU(used/req)", _usage("cpu", path), priority=1, default="<none>"),
            Column("Memory(used/req)", _usage("memory", path), priority=1, default="<none>"),
            Column("Pods(ready)", _pods_ready(path), priority=1, default="<none>"))


USAGE_COLUMNS = usage_columns("status.usage")


def _manifest_count(obj: Obj) -> int:
    return len(_list(obj, "spec.manifests"))


def _work_applied(obj: Obj) -> str:
    """True once the agent applied this very spec; False (with its message in status) when it failed."""
    st = _get(obj, "status") or {}
    if not st or st.get("observedHash") != _get(obj, "spec.hash"):
        return "Pending"
    return "True" if st.get("applied") else "False"


def _routes(obj: Obj) -> str | None:
    """``DFW→gcp-sin:71%+azure-lhr:29%,LHR→az-lhr(MAX)``: per client site its instances heaviest first
    (ties by name), with weights when there are several — the first by name was shown, which for a
    balanced route was often not the one most flows go to."""
    cells = []
    for r in _list(obj, "spec.routes"):
        if not isinstance(r, dict):
            continue
        instances = sorted((i for i in r.get("instances") or [] if isinstance(i, dict)),
                           key=lambda i: (-_weight(i), str(i.get("cluster"))))
        if not instances:
            continue
        flag = "(MAX)" if any(i.get("metric") == "MAX" for i in instances) else ""
        if len(instances) == 1:
            served = str(instances[0].get("cluster"))
        else:
            served = "+".join(f"{i.get('cluster')}:{round(_weight(i) * 100)}%" for i in instances)
        cells.append(f"{r.get('clientSite')}→{served}{flag}")
    return ",".join(cells) or None


def _weight(instance: dict[str, Any]) -> float:
    w = instance.get("weight")
    return float(w) if isinstance(w, int | float) and not isinstance(w, bool) else 0.0


def _import_clusters(obj: Obj) -> str | None:
    return ",".join(str(c) for c in _list(obj, "spec.clusters")) or None


def _plan_target(obj: Obj) -> str | None:
    return _get(obj, "spec.targetCluster") or _get(obj, "status.targetCluster")


def _workload_ref(obj: Obj) -> str | None:
    ref = _get(obj, "spec.workloadRef") or {}
    return f"{ref.get('kind', 'StatefulSet')}/{ref['name']}" if isinstance(ref, dict) and ref.get("name") else None


def _users(obj: Obj) -> str | None:
    """Issue 34: the users of the last decision as ``source:place=share,…`` (None: it knew none)."""
    users = _get(obj, "status.users")
    if not isinstance(users, dict) or not users.get("source"):
        return None
    sites = ",".join(f"{_place(u)}={float(u.get('weight') or 0):g}" for u in users.get("sites") or []
                     if isinstance(u, dict))
    # users learned for a registration since deleted: the last decision's, no longer learned (FORGET)
    source = "learned(forgotten)" if learned_users_forgotten(obj) else str(users["source"])
    return f"{source}:{sites}" if sites else source


def _place(user: dict[str, Any]) -> str:
    return next((str(user[k]) for k in ("site", "city", "region") if k in user), "?")


_COLUMNS: dict[str, tuple[Column, ...]] = {
    "Cluster": (NAME, Column("Mode", "spec.syncMode", default="Push"), Column("Region", "spec.region"),
                Column("Provider", "spec.provider"), Column("City", "spec.city"), Column("Ready", _ready_condition),
                Column("Version", "status.kubernetesVersion"), Column("Nodes", _nodes),
                Column("CPU(alloc/used)", _summary("cpu")), Column("Water", _water), Column("Heartbeat", _heartbeat),
                AGE, Column("Zone", "spec.zone", priority=1, default="<none>"),
                Column("APIEndpoint", "spec.endpoint", priority=1, default="<none>"),
                Column("Memory(alloc/used)", _summary("memory"), priority=1, default="<none>"),
                Column("Pods(used)", _summary("pods", "capacity", ("used",)), priority=1, default="<none>"),
                Column("Taints", _taints, priority=1, default="<none>"),
                Column("Cordoned", "spec.unschedulable", "boolean", priority=1, default=False)),
    "Binding": (NAME, Column("Replicas", "spec.replicas", "integer"), Column("Phase", "status.phase"),
                Column("Clusters", _per_cluster("status.placement")), AGE, *USAGE_COLUMNS,
                Column("Cost/h", "status.estimatedHourlyCost", "number", priority=1, default="<none>"),
                Column("Users", _users, priority=1, default="none")),
    "Deployment": (NAME, Column("Ready", _replicas_ready), Column("Up-to-date", "status.updatedReplicas", "integer"),
                   Column("Available", "status.availableReplicas", "integer"),
                   Column("Clusters", _per_cluster("binding.status.clusters")), AGE,
                   *usage_columns("binding.status.usage")),
    "Work": (NAME, Column("Cluster", "spec.cluster"), Column("Binding", "spec.binding"),
             Column("Manifests", _manifest_count, "integer"), Column("Applied", _work_applied), AGE),
    "ServiceRegistration": (NAME, Column("Service", "spec.serviceId"),
                            Column("Strategy", "spec.strategy", default="experienceFirst"),
                            Column("Phase", "status.phase"), AGE),
    "ServiceRoute": (NAME, Column("Strategy", "spec.strategy"), Column("Routes", _routes),
                     Column("Changes", "spec.changes", "integer"), AGE),
    "ServiceImport": (NAME, Column("Type", "spec.type"), Column("Clusters", _import_clusters), AGE),
    "CachePlan": (NAME, Column("Dataset", "spec.dataset"), Column("Cluster", "spec.cluster"),
                  Column("From", "status.copySource", default="<none>"),
                  Column("Approved", "spec.approved", "boolean", default=False),
                  Column("Phase", "status.phase", default="Pending"), Column("Bytes", "status.bytesMoved", "integer"),
                  Column("Cost", "status.transferCost", "number", priority=1),
                  Column("Message", "status.message", priority=1), AGE),
    # Karmada's printer columns (autoscaling.karmada.io's FederatedHPA is the same object)
    "FederatedHPA": (NAME, Column("Reference-Kind", "spec.scaleTargetRef.kind"),
                     Column("Reference-Name", "spec.scaleTargetRef.name"),
                     Column("MinPods", "spec.minReplicas", "integer", default=1),
                     Column("MaxPods", "spec.maxReplicas", "integer"),
                     Column("Replicas", "status.currentReplicas", "integer"), AGE),
    "CronFederatedHPA": (NAME, Column("Reference-Kind", "spec.scaleTargetRef.kind"),
                         Column("Reference-Name", "spec.scaleTargetRef.name"), AGE),
    "MigrationPlan": (NAME, Column("Workload", _workload_ref), Column("From", "spec.sourceCluster"),
                      Column("To", _plan_target), Column("Phase", "status.phase", default="Pending"),
                      Column("Trigger", "spec.trigger", priority=1, default="Operator"),
                      Column("Message", "status.message", priority=1), AGE),
}


# Kinds whose name another group shares, by (group, kind): Karmada's, as its CRDs' printer columns say
_KARMADA_PROPAGATION = (NAME, Column("Conflict-Resolution", "spec.conflictResolution", default="Abort"),
                        Column("Priority", "spec.priority", "integer", default=0), AGE)
_GROUP_COLUMNS: dict[tuple[str, str], tuple[Column, ...]] = {
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (NAME, Column("Created At", "metadata.creationTimestamp",
                                                                        format="date")),
    ("config.karmada.io", "ResourceInterpreterCustomization"): (
        NAME, Column("Target-API-Version", "spec.target.apiVersion"), Column("Target-Kind", "spec.target.kind"), AGE),
    ("policy.karmada.io", "PropagationPolicy"): _KARMADA_PROPAGATION,
    ("policy.karmada.io", "ClusterPropagationPolicy"): _KARMADA_PROPAGATION,
    ("policy.karmada.io", "FederatedResourceQuota"): (
        NAME, Column("Overall", lambda o: _quantities(_get(o, "status.overall")), default="<none>"),
        Column("Overall_Used", lambda o: _quantities(_get(o, "status.overallUsed")), default="<none>"), AGE),
}


def _quantities(value: Any) -> str | None:
    """A resource list as kubectl prints one in a column (``map[cpu:20 memory:10Gi]``)."""
    if not isinstance(value, dict) or not value:
        return None
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(value.items())) + "]"


# ---- Kubernetes' built-in kinds, as kube-apiserver prints them ----------------------------------------


def _format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``a=1,b=2`` sorted, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _format_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: requirements sorted by key, ``<none>`` for none."""
    if not isinstance(selector, dict):
        return "<none>"
    terms: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                "DoesNotExist": f"!{key}"}.get(op, "<error>")
        terms.append((key, text))
    return ",".join(text for _, text in sorted(terms)) or "<none>"


def _template_containers(obj: Obj) -> list[Obj]:
    return [c for c in _list(obj, "spec.template.spec.containers") if isinstance(c, dict)]


def _containers(obj: Obj) -> str:
    return ",".join(str(c.get("name", "")) for c in _template_containers(obj))


def _images(obj: Obj) -> str:
    return ",".join(str(c.get("image", "")) for c in _template_containers(obj))


def _selector(obj: Obj) -> str:
    return _format_selector(_get(obj, "spec.selector"))


def _condition_true(obj: Obj, type_: str) -> bool:
    for cond in _list(obj, "status.conditions"):
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond.get("status") == "True"
    return False


def _ready_of_desired(obj: Obj) -> str:
    """Deployments and StatefulSets: ready / desired (``spec.replicas`` defaults to 1)."""
    return f"{_int(obj, 'status.readyReplicas')}/{_int(obj, 'spec.replicas', 1)}"


# Pods: printPod. READY counts ready containers, STATUS is the most telling container state.


def _pod_summary(pod: Obj) -> tuple[str, str, str]:
    """(READY, STATUS, RESTARTS) the way ``kubectl get pods`` shows them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or [] if isinstance(c, dict)}
    sidecar = {name for name, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecar)
    ready = restarts = sidecar_restarts = 0
    last_restart = last_sidecar_restart = None
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    def later(a: datetime | None, cs: Obj) -> datetime | None:
        finished = parse_datetime(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        return finished if finished and (a is None or finished > a) else a

    initializing = False
    inits = status.get("initContainerStatuses") or []
    for i, cs in enumerate(inits):
        restarts += int(cs.get("restartCount") or 0)
        last_restart = later(last_restart, cs)
        is_sidecar = cs.get("name") in sidecar
        if is_sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            last_sidecar_restart = later(last_sidecar_restart, cs)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated and terminated.get("exitCode", 0) == 0:
            continue
        if is_sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated:
            reason = "Init:" + (terminated.get("reason") or (f"Signal:{terminated['signal']}" if terminated.get(
                "signal") else f"ExitCode:{terminated.get('exitCode', 0)}"))
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(pod, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_restart = later(last_restart, cs)
            state = cs.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated:
                reason = f"Signal:{terminated['signal']}" if terminated.get("signal") \
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(pod, "Ready") else "NotReady"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restart_text = str(restarts)
    if restarts and last_restart is not None:
        restart_text += f" ({human_duration((datetime.now(UTC) - last_restart).total_seconds())} ago)"
    return f"{ready}/{total}", reason, restart_text


def _pod_ready(pod: Obj) -> str:
    return _pod_summary(pod)[0]


def _pod_status(pod: Obj) -> str:
    return _pod_summary(pod)[1]


def _pod_restarts(pod: Obj) -> str:
    return _pod_summary(pod)[2]


def _pod_ip(pod: Obj) -> str | None:
    ips = _list(pod, "status.podIPs")
    return (ips[0].get("ip") if ips and isinstance(ips[0], dict) else None) or _get(pod, "status.podIP")


def _readiness_gates(pod: Obj) -> str:
    gates = _list(pod, "spec.readinessGates")
    if not gates:
        return "<none>"
    conditions = {c.get("type"): c.get("status") for c in _list(pod, "status.conditions") if isinstance(c, dict)}
    true = sum(1 for g in gates if isinstance(g, dict) and conditions.get(g.get("conditionType")) == "True")
    return f"{true}/{len(gates)}"


# Nodes: printNode.


def _node_status(node: Obj) -> str:
    cond = condition(node, "Ready")
    states = ["Unknown" if cond is None else "Ready" if cond.get("status") == "True" else "NotReady"]
    if _get(node, "spec.unschedulable"):
        states.append("SchedulingDisabled")
    return ",".join(states)


def _node_roles(node: Obj) -> str:
    roles = set()
    for key, value in (_get(node, "metadata.labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key.removeprefix("node-role.kubernetes.io/"):
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _address(type_: str) -> Callable[[Obj], str | None]:
    def cell(node: Obj) -> str | None:
        for a in _list(node, "status.addresses"):
            if isinstance(a, dict) and a.get("type") == type_:
                return str(a.get("address"))
        return None

    cell.__name__ = type_
    return cell


# Workloads: printDaemonSet, printJob.


def _node_selector(obj: Obj) -> str:
    return _format_labels(_get(obj, "spec.template.spec.nodeSelector"))


def _job_status(job: Obj) -> str:
    if _condition_true(job, "Complete"):
        return "Complete"
    if _condition_true(job, "Failed"):
        return "Failed"
    if _get(job, "metadata.deletionTimestamp"):
        return "Terminating"
    for type_ in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _condition_true(job, type_):
            return type_
    return "Running"


def _job_completions(job: Obj) -> str:
    succeeded = _int(job, "status.succeeded")
    completions, parallelism = _get(job, "spec.completions"), _get(job, "spec.parallelism")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    if isinstance(parallelism, int) and parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _job_duration(job: Obj) -> str | None:
    started = parse_datetime(_get(job, "status.startTime"))
    if started is None:
        return None
    finished = parse_datetime(_get(job, "status.completionTime")) or datetime.now(UTC)
    return human_duration((finished - started).total_seconds())


# Services: printService.


def _cluster_ip(svc: Obj) -> str:
    ips = _list(svc, "spec.clusterIPs")
    return str(ips[0]) if ips else _get(svc, "spec.clusterIP") or "<none>"


def _external_ip(svc: Obj) -> str:
    kind = _get(svc, "spec.type") or "ClusterIP"
    external = [str(ip) for ip in _list(svc, "spec.externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = [str(i.get("ip") or i.get("hostname")) for i in _list(svc, "status.loadBalancer.ingress")
                   if isinstance(i, dict) and (i.get("ip") or i.get("hostname"))]
        return ",".join(ingress + external) or "<pending>"
    if kind == "ExternalName":
        return str(_get(svc, "spec.externalName") or "")
    return "<unknown>"


def _ports(svc: Obj) -> str:
    pieces = []
    for p in _list(svc, "spec.ports"):
        if not isinstance(p, dict):
            continue
        node_port = f":{p['nodePort']}" if p.get("nodePort") else ""
        pieces.append(f"{p.get('port')}{node_port}/{p.get('protocol') or 'TCP'}")
    return ",".join(pieces) or "<none>"


def _service_selector(svc: Obj) -> str:
    return _format_labels(_get(svc, "spec.selector"))


# Config and identity: printConfigMap, printSecret, printServiceAccount.


def _data_count(obj: Obj) -> int:
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    string_data = obj.get("stringData") or {}  # the API server folds stringData into data on write
    return len(data) + len(binary) + len([k for k in string_data if k not in data])


def _secret_count(sa: Obj) -> int:
    return len(_list(sa, "secrets"))


# Events: printEvent.


def _event_first_seen(ev: Obj) -> str:
    return since(ev.get("firstTimestamp") or ev.get("eventTime"))


def _event_last_seen(ev: Obj) -> str:
    series = ev.get("series") or {}
    if series.get("lastObservedTime"):
        return since(series["lastObservedTime"])
    return since(ev.get("lastTimestamp")) if ev.get("lastTimestamp") else _event_first_seen(ev)


def _event_object(ev: Obj) -> str:
    involved = ev.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def _event_source(ev: Obj) -> str:
    source = ev.get("source") or {}
    component = source.get("component") or ev.get("reportingComponent") or ev.get("reportingController") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


def _event_count(ev: Obj) -> int:
    series = ev.get("series") or {}
    return int(series.get("count") or ev.get("count") or 1)


def _event_message(ev: Obj) -> str:
    return str(ev.get("message") or "").strip()


_ACCESS = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _access_modes(pvc: Obj) -> str:
    return ",".join(_ACCESS.get(str(m), str(m)) for m in _list(pvc, "status.accessModes"))


def _slice_ports(es: Obj) -> str:
    ports = [str(p.get("port")) for p in _list(es, "ports") if isinstance(p, dict) and p.get("port") is not None]
    return ",".join(ports) or "<unset>"


def _slice_endpoints(es: Obj) -> str:
    """The first three addresses and how many more, as kubectl prints a slice's."""
    addresses = [str(a) for e in _list(es, "endpoints") if isinstance(e, dict) for a in e.get("addresses") or []]
    if not addresses:
        return "<unset>"
    more = f" + {len(addresses) - 3} more..." if len(addresses) > 3 else ""
    return ",".join(addresses[:3]) + more


def _wide(name: str, cell: str | Callable[[Obj], Any], type_: str = "string", default: Any = None) -> Column:
    return Column(name, cell, type_, priority=1, default=default)


def _count(name: str, path: str) -> Column:
    """An integer status field the API server's types never omit: 0 when unset."""
    return Column(name, path, "integer", default=0)


def _cron_last(obj: Obj) -> str:
    return since(_get(obj, "status.lastScheduleTime")) if _get(obj, "status.lastScheduleTime") else "<none>"


def _ingress_hosts(ing: Obj) -> str:
    hosts = [str(r.get("host")) for r in _list(ing, "spec.rules") if isinstance(r, dict) and r.get("host")]
    return ",".join(hosts) or "*"


def _ingress_address(ing: Obj) -> str:
    return ",".join(str(i.get("ip") or i.get("hostname") or "") for i in _list(ing, "status.loadBalancer.ingress")
                    if isinstance(i, dict))


_WORKLOAD_WIDE = (_wide("Containers", _containers), _wide("Images", _images), _wide("Selector", _selector))
KUBERNETES_COLUMNS: dict[str, tuple[Column, ...]] = {
    "ReplicaSet": (NAME, _count("Desired", "spec.replicas"), _count("Current", "status.replicas"),
                   _count("Ready", "status.readyReplicas"), AGE, *_WORKLOAD_WIDE),
    "CronJob": (NAME, Column("Schedule", "spec.schedule"), Column("Timezone", "spec.timeZone", default="<none>"),
                Column("Suspend", lambda o: "True" if _get(o, "spec.suspend") else "False"),
                Column("Active", lambda o: len(_list(o, "status.active")), "integer"),
                Column("Last Schedule", _cron_last), AGE),
    "Ingress": (NAME, Column("Class", "spec.ingressClassName", default="<none>"), Column("Hosts", _ingress_hosts),
                Column("Address", _ingress_address), Column("Ports", lambda o: "80, 443" if _list(o, "spec.tls")
                                                            else "80"), AGE),
    "Pod": (NAME, Column("Ready", _pod_ready), Column("Status", _pod_status), Column("Restarts", _pod_restarts), AGE,
            _wide("IP", _pod_ip, default="<none>"), _wide("Node", "spec.nodeName", default="<none>"),
            _wide("Nominated Node", "status.nominatedNodeName", default="<none>"),
            _wide("Readiness Gates", _readiness_gates)),
    "Node": (NAME, Column("Status", _node_status), Column("Roles", _node_roles), AGE,
             Column("Version", "status.nodeInfo.kubeletVersion"),
             _wide("Internal-IP", _address("InternalIP"), default="<none>"),
             _wide("External-IP", _address("ExternalIP"), default="<none>"),
             _wide("OS-Image", "status.nodeInfo.osImage", default="<unknown>"),
             _wide("Kernel-Version", "status.nodeInfo.kernelVersion", default="<unknown>"),
             _wide("Container-Runtime", "status.nodeInfo.containerRuntimeVersion", default="<unknown>")),
    "Namespace": (NAME, Column("Status", "status.phase"), AGE),
    "Deployment": (NAME, Column("Ready", _ready_of_desired), _count("Up-to-date", "status.updatedReplicas"),
                   _count("Available", "status.availableReplicas"), AGE,
                   _wide("Containers", _containers), _wide("Images", _images), _wide("Selector", _selector)),
    "StatefulSet": (NAME, Column("Ready", _ready_of_desired), AGE,
                    _wide("Containers", _containers), _wide("Images", _images)),
    "DaemonSet": (NAME, _count("Desired", "status.desiredNumberScheduled"),
                  _count("Current", "status.currentNumberScheduled"), _count("Ready", "status.numberReady"),
                  _count("Up-to-date", "status.updatedNumberScheduled"),
                  _count("Available", "status.numberAvailable"), Column("Node Selector", _node_selector), AGE,
                  _wide("Containers", _containers), _wide("Images", _images), _wide("Selector", _selector)),
    "Job": (NAME, Column("Status", _job_status), Column("Completions", _job_completions),
            Column("Duration", _job_duration), AGE,
            _wide("Containers", _containers), _wide("Images", _images), _wide("Selector", _selector)),
    "Service": (NAME, Column("Type", "spec.type", default="ClusterIP"), Column("Cluster-IP", _cluster_ip),
                Column("External-IP", _external_ip), Column("Port(s)", _ports), AGE,
                _wide("Selector", _service_selector)),
    "PersistentVolumeClaim": (NAME, Column("Status", "status.phase", default="Pending"),
                              Column("Volume", "spec.volumeName"),
                              Column("Capacity", "status.capacity.storage"), Column("Access Modes", _access_modes),
                              Column("StorageClass", "spec.storageClassName"),
                              Column("VolumeAttributesClass", "spec.volumeAttributesClassName", default="<unset>"),
                              AGE, _wide("VolumeMode", "spec.volumeMode", default="Filesystem")),
    "EndpointSlice": (NAME, Column("AddressType", "addressType"), Column("Ports", _slice_ports),
                      Column("Endpoints", _slice_endpoints), AGE),
    "ConfigMap": (NAME, Column("Data", _data_count, "integer"), AGE),
    "Secret": (NAME, Column("Type", "type", default="Opaque"), Column("Data", _data_count, "integer"), AGE),
    "ServiceAccount": (NAME, Column("Secrets", _secret_count, "integer"), AGE),
    "Event": (Column("Last Seen", _event_last_seen), Column("Type", "type"), Column("Reason", "reason"),
              Column("Object", _event_object), _wide("Subobject", "involvedObject.fieldPath"),
              _wide("Source", _event_source), Column("Message", _event_message),
              _wide("First Seen", _event_first_seen), _wide("Count", _event_count, "integer"),
              _wide("Name", "metadata.name")),
}
