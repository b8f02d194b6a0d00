"""The resource interpreter: where a kind keeps its replicas, its pod template and its status, how
member statuses add up, and which objects it names that must follow it (Karmada's
ResourceInterpreterCustomization idea, declared as data — paths, never code in the object).

Built-ins cover the Kubernetes workload kinds. A ``ResourceInterpreterCustomization``
(``multicluster.io/v1alpha1``, applied with kubectl; fields in docs/resources.md) overrides or
extends them for one apiVersion/kind at run time: the fields it sets replace the built-in ones, the
others stay. The detector reads replicas and requests through it (a kind with a replica path is
divided across clusters like a Deployment; one without goes whole to every selected cluster), the
binding controller writes each cluster's share at the replica path, sends the objects the
customization names with it, and aggregates member statuses by its rule.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from drods.model.lua_customization import (
    KARMADA_CONFIG_GROUP,
    KarmadaInterpreterCustomizationSpec,
    LuaCustomization,
    LuaScriptError,
    ReplicaNeeds,
)
from drods.model.selector import LabelSelector

log = logging.getLogger(__name__)
_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


def _check_path(v: str) -> str:
    if not _PATH.match(v):
        raise ValueError("must be a dotted path of field names, e.g. spec.size")
    return v


FieldPath = Annotated[str, AfterValidator(_check_path)]


# ---------------------------------------------------------------------- the object (declarative)
class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InterpreterTarget(_Model):
    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)


class StatusAggregation(_Model):
    """How the members' statuses of a copy add up into the template's status."""

    sum: list[FieldPath] = Field(default_factory=list)  # integer fields: the template's is the sum over clusters
    conditions: FieldPath | None = None  # a conditions list: a type is True only when True on every cluster
    readyReplicas: FieldPath | None = None  # a member's ready count (shown per cluster on the Binding)


class DependencyRule(_Model):
    """An object of ``apiVersion``/``kind`` in the workload's namespace, named at ``nameFrom``,
    follows the workload to its clusters (Karmada's GetDependencies, declared)."""

    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    nameFrom: FieldPath


class ResourceInterpreterCustomizationSpec(_Model):
    """Where a kind keeps its replicas, pod template and status, and what it depends on."""

    target: InterpreterTarget
    replicas: FieldPath | None = None
    podTemplate: FieldPath | None = None
    statusAggregation: StatusAggregation | None = None
    dependencies: list[DependencyRule] = Field(default_factory=list)


# ---------------------------------------------------------------------- what the controllers read
@dataclass(frozen=True, slots=True)
class StatusRule:
    sums: tuple[str, ...] = ()
    conditions: str | None = None
    ready: str | None = None


@dataclass(frozen=True, slots=True)
class Dependency:
    api_version: str
    kind: str
    name_from: str


@dataclass(frozen=True, slots=True)
class Interpretation:
    """Dotted paths into the object; None where the kind has no such thing."""

    replicas: str | None = None
    pod_template: str | None = None
    status: StatusRule | None = None
    dependencies: tuple[Dependency, ...] = ()
    built_in: bool = True  # False: a customization says it (its status rule replaces the built-in one)
    # Karmada's Lua customization of the kind: each operation it scripts wins over the paths above
    lua: LuaCustomization | None = None

    @property
    def divisible(self) -> bool:
        return self.replicas is not None or self._scripts("replicaResource")

    def _scripts(self, operation: str) -> bool:
        return self.lua is not None and self.lua.has(operation)

    def replicas_of(self, obj: Mapping[str, Any]) -> int:
        """The replica count (1 when the path is absent or not a count; 1 for a kind without replicas)."""
        needs = self.scripted_needs(obj)
        if needs is not None:
            return needs.replicas
        v = read_path(obj, self.replicas) if self.replicas else None
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 1

    def scripted_needs(self, obj: Mapping[str, Any]) -> ReplicaNeeds | None:
        """What the kind's GetReplicas says of ``obj`` (None: not scripted, or the script failed)."""
        if self.lua is None or not self.lua.has("replicaResource"):
            return None
        lua = self.lua
        return lua.run_or("replicaResource", obj, lambda: lua.get_replicas(obj), None)

    def replicas_unknown(self, obj: Mapping[str, Any]) -> str | None:
        """After `scripted_needs`: why ``obj``'s replica count cannot be read (its GetReplicas script
        failed on it), else None. Then no count is right — not 1, not the template's."""
        if self.lua is None or not self.lua.has("replicaResource"):
            return None
        return self.lua.failure_of("replicaResource", obj)

    def pod_template_of(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        t = read_path(obj, self.pod_template) if self.pod_template else None
        return t if isinstance(t, Mapping) else None

    def set_replicas(self, obj: dict[str, Any], share: int) -> str | None:
        """``obj`` given ``share`` replicas; returns why it could not be (its ReviseReplica script
        failed: no count written is right, so the caller writes none), else None."""
        if self.lua is not None and self.lua.has("replicaRevision"):
            lua = self.lua
            revised = lua.run_or("replicaRevision", obj, lambda: lua.revise_replica(obj, share), None)
            if revised is None:
                return lua.failure_of("replicaRevision", obj) or "ReviseReplica failed"
            obj.clear()
            obj.update(revised)
            return None
        if self.replicas:
            write_path(obj, self.replicas, share)
        return None

    def script_failures(self, obj: Mapping[str, Any]) -> list[str]:
        """The kind's scripts failing on ``obj`` or a member's copy of it (empty: none, or not scripted)."""
        return self.lua.failures_of(obj) if self.lua is not None else []

    @property
    def scripts_status(self) -> bool:
        return self._scripts("statusAggregation")

    @property
    def reports_status(self) -> bool:
        """The members' statuses of the kind are collected (a status rule, or a status/health script)."""
        return self.status is not None or any(self._scripts(op) for op in _STATUS_OPERATIONS)

    @property
    def retains(self) -> bool:
        return self._scripts("retention")

    def retained(self, desired: dict[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
        """``desired`` with what the kind's Retain script keeps of the member's copy ``observed``."""
        if self.lua is None or not self.lua.has("retention"):
            return desired
        lua = self.lua
        return lua.run_or("retention", desired, lambda: lua.retain(desired, observed), desired)

    def reflected(self, observed: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the status to report from a member's copy, "Healthy"/"Unhealthy"/"Unknown" or None): the copy's own
        status unless the kind scripts ReflectStatus; its health when it scripts InterpretHealth."""
        raw = observed.get("status")
        status: dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}
        lua = self.lua
        if lua is None:
            return status, None
        if lua.has("statusReflection"):
            got = lua.run_or("statusReflection", observed, lambda: lua.reflect_status(observed), status)
            status = dict(got) if isinstance(got, Mapping) else {}
        if not lua.has("healthInterpretation"):
            return status, None
        healthy = lua.run_or("healthInterpretation", observed, lambda: lua.interpret_health(observed), None)
        # a script that failed says nothing of the copy: Unknown (Karmada's), neither Healthy nor failed over
        return status, "Unknown" if healthy is None else "Healthy" if healthy else "Unhealthy"

    def aggregated_status(self, template: Mapping[str, Any], items: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The template's status by the kind's AggregateStatus script over Karmada's statusItems
        (``clusterName``, ``status``, ``applied``, ``health``); None when not scripted or it failed."""
        if self.lua is None or not self.lua.has("statusAggregation"):
            return None
        lua = self.lua
        return lua.run_or("statusAggregation", template, lambda: lua.aggregate_status(template, items), None)

    def dependency_refs(self, obj: Mapping[str, Any]) -> list[DependencyRef]:
        """The objects that follow ``obj``: named at the rules' paths in its namespace, or as a
        GetDependencies script says — by name or by ``labelSelector``, in any namespace (Karmada's
        dependency distributor follows both; a name makes the selector ignored)."""
        ns = str((obj.get("metadata") or {}).get("namespace") or "default")
        if self.lua is not None and self.lua.has("dependencyInterpretation"):
            lua = self.lua
            refs = lua.run_or("dependencyInterpretation", obj, lambda: _script_refs(lua.get_dependencies(obj), ns),
                              None)
            if refs is not None:
                return refs
        out = []
        for d in self.dependencies:
            name = read_path(obj, d.name_from)
            if isinstance(name, str) and name:
                out.append(DependencyRef(d.api_version, d.kind, ns, name))
        return out


@dataclass(frozen=True)
class DependencyRef:
    """One object (``name``) or every object matching ``selector`` of a kind in a namespace."""

    api_version: str
    kind: str
    namespace: str
    name: str = ""
    selector: LabelSelector | None = None

    @property
    def order(self) -> tuple[str, str, str, str]:
        return self.api_version, self.kind, self.namespace, self.name


def _script_refs(refs: list[dict[str, Any]], ns: str) -> list[DependencyRef]:
    out = []
    for r in refs:
        if not (r.get("apiVersion") and r.get("kind")):
            continue
        where = str(r.get("namespace") or ns)
        if isinstance(r.get("name"), str) and r["name"]:
            out.append(DependencyRef(str(r["apiVersion"]), str(r["kind"]), where, r["name"]))
        elif isinstance(r.get("labelSelector"), Mapping):
            try:
                selector = LabelSelector.model_validate(r["labelSelector"], strict=False)
            except ValidationError as e:
                raise LuaScriptError("GetDependencies", f"labelSelector: {e.errors()[0]['msg']}") from e
            out.append(DependencyRef(str(r["apiVersion"]), str(r["kind"]), where, selector=selector))
    return out


_STATUS_OPERATIONS = ("statusReflection", "statusAggregation", "healthInterpretation")


NONE = Interpretation()

# (apiVersion, kind) → interpretation; the same facts Karmada's built-in interpreter knows. Their
# status aggregation is the built-in one (`drods.controllers.status`).
BUILT_IN: dict[tuple[str, str], Interpretation] = {
    ("apps/v1", "Deployment"): Interpretation("spec.replicas", "spec.template"),
    ("apps/v1", "StatefulSet"): Interpretation("spec.replicas", "spec.template"),
    ("apps/v1", "ReplicaSet"): Interpretation("spec.replicas", "spec.template"),
    ("batch/v1", "Job"): Interpretation("spec.parallelism", "spec.template"),
    ("apps/v1", "DaemonSet"): Interpretation(None, "spec.template"),
    ("batch/v1", "CronJob"): Interpretation(None, "spec.jobTemplate.spec.template"),
}


def interpretation(api_version: str, kind: str) -> Interpretation:
    """The built-in interpretation only (for callers without a running `Interpreter`)."""
    return BUILT_IN.get((api_version, kind), NONE)


def customized(base: Interpretation, spec: ResourceInterpreterCustomizationSpec) -> Interpretation:
    """``base`` with what ``spec`` declares put over it."""
    out = replace(base, built_in=False)
    if spec.replicas is not None:
        out = replace(out, replicas=spec.replicas)
    if spec.podTemplate is not None:
        out = replace(out, pod_template=spec.podTemplate)
    if spec.statusAggregation is not None:
        a = spec.statusAggregation
        out = replace(out, status=StatusRule(tuple(a.sum), a.conditions, a.readyReplicas))
    if spec.dependencies:
        out = replace(out, dependencies=tuple(Dependency(d.apiVersion, d.kind, d.nameFrom)
                                              for d in spec.dependencies))
    return out


class Interpreter:
    """Built-ins plus the customizations the store holds — DRO-DS's declarative ones and Karmada's
    Lua ones — kept current by informers (`learn` is their change handler), so every process
    interprets a kind the same way. For one kind, each operation a Lua customization scripts wins;
    the declarative customization's paths serve the others, the built-ins the rest."""

    def __init__(self) -> None:
        self._custom: dict[str, tuple[tuple[str, str], ResourceInterpreterCustomizationSpec]] = {}
        self._lua: dict[str, tuple[tuple[str, str], LuaCustomization]] = {}
        self._by_target: dict[tuple[str, str], Interpretation] = {}
        self._by_group_kind: dict[tuple[str, str], Interpretation] = {}  # the first version's, by name order
        self.epoch = 0  # bumped on every change: plans derived from an interpretation are stale

    def of(self, api_version: str, kind: str) -> Interpretation:
        """The kind's interpretation; a customization of another version of the same group and kind serves
        too: a custom resource is one object whichever served version wrote it, and a customization of
        ``v1`` half-applied to an object written as ``v2`` (counted by v1's GetReplicas, never revised:
        every member ran the whole count)."""
        return self._by_target.get((api_version, kind)) or self._by_group_kind.get((_group(api_version), kind)) \
            or BUILT_IN.get((api_version, kind), NONE)

    def learn(self, key: str, old: Any, new: Any) -> None:
        """Informer handler for the customizations' prefixes (objects decoded as mappings)."""
        self._custom.pop(key, None)
        self._lua.pop(key, None)
        if isinstance(new, dict) and not (new.get("metadata") or {}).get("deletionTimestamp"):
            self._read(key, new)
        by_target: dict[tuple[str, str], Interpretation] = {}
        for _, (target, spec) in sorted(self._custom.items(), reverse=True):  # the first name wins
            by_target[target] = customized(BUILT_IN.get(target, NONE), spec)
        for target, lua in _merged(self._lua.values()).items():
            base = by_target.get(target) or BUILT_IN.get(target, NONE)
            by_target[target] = replace(base, built_in=False, lua=lua)
        self._by_target = by_target
        self._by_group_kind = {(_group(v), k): how for (v, k), how in sorted(by_target.items(), reverse=True)}
        self.epoch += 1

    def _read(self, key: str, obj: dict[str, Any]) -> None:
        karmada = str(obj.get("apiVersion") or "").startswith(f"{KARMADA_CONFIG_GROUP}/")
        try:
            if karmada:
                spec = KarmadaInterpreterCustomizationSpec.model_validate(obj.get("spec") or {})
                name = str((obj.get("metadata") or {}).get("name") or key)
                self._lua[key] = ((spec.target.apiVersion, spec.target.kind), LuaCustomization.of(name, spec))
            else:
                own = ResourceInterpreterCustomizationSpec.model_validate(obj.get("spec") or {})
                self._custom[key] = ((own.target.apiVersion, own.target.kind), own)
        except ValidationError:
            log.warning("ignoring unreadable interpreter customization %s", key)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _merged(found: Any) -> dict[tuple[str, str], LuaCustomization]:
    """One Lua customization per kind: for each operation, the script of the first by name
    (Karmada's rule when several customizations target one kind)."""
    out: dict[tuple[str, str], LuaCustomization] = {}
    for target, lua in sorted(found, key=lambda t: t[1].name, reverse=True):
        prev = out.get(target)
        out[target] = lua if prev is None else replace(lua, scripts={**prev.scripts, **lua.scripts},
                                                       name=lua.name, failures={}, stalled={})
    return out


def read_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def write_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at ``path``, creating the mappings on the way."""
    parts = path.split(".")
    cur = obj
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    cur[parts[-1]] = value
