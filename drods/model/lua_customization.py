"""Karmada's ``config.karmada.io/v1alpha1`` ResourceInterpreterCustomization: how a kind is
interpreted, written as Lua functions (``spec.customizations.<operation>.luaScript``), run in the
sandbox of `drods.model.lua_sandbox` with the ``kube`` helpers of `drods.model.lua_kube`.

The operations and the function each script defines (Karmada's names and arguments):

=========================  ======================================  ==========================================
field                      function                                returns
=========================  ======================================  ==========================================
replicaResource            GetReplicas(obj)                        replicas, requirements (see ``kube``)
replicaRevision            ReviseReplica(obj, desiredReplica)      the object with its replicas set
retention                  Retain(desiredObj, observedObj)         the object to apply over the member's copy
statusReflection           ReflectStatus(observedObj)              the status reported from one member
statusAggregation          AggregateStatus(desiredObj, statusItems) the object with its status aggregated
healthInterpretation       InterpretHealth(observedObj)            true when the member's copy is healthy
dependencyInterpretation   GetDependencies(desiredObj)             {apiVersion, kind, namespace, name}[]
=========================  ======================================  ==========================================

Every script is compiled on apply (a script that does not compile or does not define its function
is refused with 422). At run time a failing script raises `LuaScriptError`; the callers fall back
and report it (`drods.model.interpreter`), never crash.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.lua_kube import HELPERS
from drods.model.lua_sandbox import LuaSandbox, LuaScriptError

log = logging.getLogger(__name__)
T = TypeVar("T")

KARMADA_CONFIG_GROUP = "config.karmada.io"
KARMADA_CONFIG_VERSION = "v1alpha1"

# spec.customizations field → the function its script defines
FUNCTIONS: dict[str, str] = {
    "replicaResource": "GetReplicas",
    "replicaRevision": "ReviseReplica",
    "retention": "Retain",
    "statusReflection": "ReflectStatus",
    "statusAggregation": "AggregateStatus",
    "healthInterpretation": "InterpretHealth",
    "dependencyInterpretation": "GetDependencies",
}

SANDBOX = LuaSandbox(helpers=HELPERS)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LuaRule(_Model):
    luaScript: str = Field(min_length=1)


class CustomizationTarget(_Model):
    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)


class CustomizationRules(_Model):
    retention: LuaRule | None = None
    replicaResource: LuaRule | None = None
    replicaRevision: LuaRule | None = None
    statusReflection: LuaRule | None = None
    statusAggregation: LuaRule | None = None
    healthInterpretation: LuaRule | None = None
    dependencyInterpretation: LuaRule | None = None

    @model_validator(mode="after")
    def _scripts_compile(self) -> CustomizationRules:
        """A script must compile and define its operation's function (checked in the sandbox)."""
        for name, function in FUNCTIONS.items():
            rule = getattr(self, name)
            if rule is None:
                continue
            try:
                SANDBOX.check(rule.luaScript, function)
            except LuaScriptError as e:
                raise ValueError(f"{name}.luaScript: {e}") from None
        return self


class KarmadaInterpreterCustomizationSpec(_Model):
    target: CustomizationTarget
    customizations: CustomizationRules


def _where(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass(frozen=True, slots=True)
class ReplicaNeeds:
    """What GetReplicas says: the count and one replica's requirements (Karmada's
    ReplicaRequirements: ``resourceRequest``, ``nodeClaim``, ``namespace``, ``priorityClassName``)."""

    replicas: int
    requirements: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LuaCustomization:
    """The scripts of one customization (operation field → script), and how to run each."""

    name: str
    scripts: Mapping[str, str]
    sandbox: LuaSandbox = SANDBOX
    # (object "<namespace>/<name>", operation) → its script's last failure there, cleared by a success
    failures: dict[tuple[str, str], str] = field(default_factory=dict, compare=False, hash=False)
    # operation → why it is no longer run: it ran out of time once (a changed customization is a new
    # object, run again). Each run costs its whole time bound on the controllers' event loop, and a
    # status round runs a script once per copy: 39 copies held the API server for 25 s a round.
    stalled: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(cls, name: str, spec: KarmadaInterpreterCustomizationSpec) -> LuaCustomization:
        rules = spec.customizations
        return cls(name, {f: r.luaScript for f in FUNCTIONS if (r := getattr(rules, f)) is not None})

    def has(self, operation: str) -> bool:
        return operation in self.scripts

    def failed(self, operation: str, obj: Mapping[str, Any], error: LuaScriptError) -> None:
        """Note a script's failure on ``obj`` (the caller falls back to the declarative or built-in
        interpretation); the binding shows it as its InterpreterScriptFailed condition."""
        self.failures[(_where(obj), operation)] = str(error)
        log.warning("interpreter customization %s: %s on %s: %s", self.name, FUNCTIONS[operation], _where(obj), error)

    def run_or(self, operation: str, obj: Mapping[str, Any], call: Callable[[], T], fallback: T) -> T:
        """``call()`` — or ``fallback`` when the operation's script fails on ``obj`` (noted, not raised),
        or is not run since it ran out of time."""
        if operation in self.stalled:
            self.failures[(_where(obj), operation)] = self.stalled[operation]
            return fallback
        try:
            return call()
        except LuaScriptError as e:
            self.failed(operation, obj, e)
            if e.timed_out:
                self.stalled[operation] = f"{e} on {_where(obj)}: not run again until the customization changes"
                log.warning("interpreter customization %s: %s is not run again until the customization changes",
                            self.name, FUNCTIONS[operation])
            return fallback

    def failure_of(self, operation: str, obj: Mapping[str, Any]) -> str | None:
        """The operation's last failure on ``obj`` (None: its last run there succeeded)."""
        msg = self.failures.get((_where(obj), operation))
        return None if msg is None else f"{self.name}: {msg}"

    def failures_of(self, obj: Mapping[str, Any]) -> list[str]:
        """The scripts failing on ``obj`` (or on a member's copy of it), one message each."""
        where = _where(obj)
        return [f"{self.name}: {msg}" for (w, _), msg in sorted(self.failures.items()) if w == where]

    def _run(self, operation: str, obj: Mapping[str, Any], *args: Any,
             like: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        out = self.sandbox.call(self.scripts[operation], FUNCTIONS[operation],
                                obj, *args, like=like)  # the args cross as new tables
        self.failures.pop((_where(obj), operation), None)
        return out

    def get_replicas(self, obj: Mapping[str, Any]) -> ReplicaNeeds:
        out = self._run("replicaResource", obj)
        count = out[0] if out else None
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise LuaScriptError("GetReplicas", f"must return a replica count (a whole number ≥ 0), got {count!r}")
        req = out[1] if len(out) > 1 else None
        if req is not None and not isinstance(req, Mapping):
            raise LuaScriptError("GetReplicas", "the requirements it returns must be a table")
        return ReplicaNeeds(count, dict(req or {}))

    def revise_replica(self, obj: Mapping[str, Any], replicas: int) -> dict[str, Any]:
        return self._object("replicaRevision", obj, replicas)

    def retain(self, desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
        return self._object("retention", desired, observed)

    def aggregate_status(self, desired: Mapping[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
        """The object's ``status`` after AggregateStatus(desired, statusItems)."""
        out = self._object("statusAggregation", desired, items)
        status = out.get("status")
        return dict(status) if isinstance(status, Mapping) else {}

    def reflect_status(self, observed: Mapping[str, Any]) -> Any:
        out = self._run("statusReflection", observed, like=(observed.get("status"),))
        return out[0] if out else None

    def interpret_health(self, observed: Mapping[str, Any]) -> bool:
        out = self._run("healthInterpretation", observed)
        if not out or not isinstance(out[0], bool):
            raise LuaScriptError("InterpretHealth", f"must return true or false, got {out[0] if out else None!r}")
        return out[0]

    def get_dependencies(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        out = self._run("dependencyInterpretation", obj, like=([],))
        deps = out[0] if out else None
        if deps is None:
            return []
        if not isinstance(deps, list) or not all(isinstance(d, Mapping) for d in deps):
            raise LuaScriptError("GetDependencies", "must return a list of {apiVersion, kind, namespace, name}")
        return [dict(d) for d in deps]

    def _object(self, operation: str, obj: Mapping[str, Any], *args: Any) -> dict[str, Any]:
        out = self._run(operation, obj, *args, like=(obj,))
        got = out[0] if out else None
        if not isinstance(got, Mapping):
            raise LuaScriptError(FUNCTIONS[operation], f"must return the object, got {got!r}")
        return dict(got)
