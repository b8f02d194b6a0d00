"""Policy kinds: PropagationPolicy (API2), ResourcePlacementPolicy (API3), ClusterOverridePolicy (API4)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drods.model.binding import ObjectReference
from drods.model.dataset import DatasetRead
from drods.model.placement import FieldSelector, Placement
from drods.model.selector import LabelSelector


class ResourceSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str | None = None
    kind: str = Field(min_length=1)
    name: str | None = None
    namespace: str | None = None
    labelSelector: LabelSelector | None = None


class PropagationPolicySpec(BaseModel):
    """Karmada's PropagationPolicy plus the draft's flat shorthands ``resourceType``/``targetClusters``."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "anyOf": [{"required": ["resourceType"]},
                  {"required": ["resourceSelectors"], "properties": {"resourceSelectors": {"minItems": 1}}}]})

    resourceType: str | None = Field(default=None, min_length=1)
    targetClusters: list[str] = Field(default_factory=list)
    resourceSelectors: list[ResourceSelector] = Field(default_factory=list)
    placement: Placement | None = None
    priority: int = 0
    schedulerName: str | None = None
    # F4 / F3: copied into each Binding the policy makes (the workload's reads, whom it follows)
    datasets: list[DatasetRead] = Field(default_factory=list)
    followUp: ObjectReference | None = None

    @model_validator(mode="after")
    def _selects_something(self) -> PropagationPolicySpec:
        if not self.resourceType and not self.resourceSelectors:
            raise ValueError("set resourceType or resourceSelectors")
        return self

    def selectors(self) -> list[ResourceSelector]:
        if self.resourceSelectors:
            return self.resourceSelectors
        return [ResourceSelector(kind=self.resourceType or "")]


class TargetClusterSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    selectorType: Literal["name", "label"]
    values: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _label_form(self) -> TargetClusterSelector:
        if self.selectorType == "label":
            for v in self.values:
                if "=" not in v:
                    raise ValueError(f"label selector value {v!r} must be key=value")
        return self


class ResourcePlacementPolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    resourceSelector: ResourceSelector
    targetClusters: list[TargetClusterSelector] = Field(default_factory=list)
    placement: Placement | None = None
    priority: int = 0
    datasets: list[DatasetRead] = Field(default_factory=list)
    followUp: ObjectReference | None = None


# What a member copy is (its Work manages that object and no other): no override may change it — a
# tenant's override could otherwise turn its ConfigMap into a ClusterRoleBinding, or write into
# another namespace. The override engine checks the result too (`drods.controllers.overrides`).
IDENTITY_FIELDS = frozenset({("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"),
                             ("metadata", "namespace")})
IDENTITY_MESSAGE = "an override may not change the object's apiVersion, kind, name or namespace"


_POINTER_TOKEN = re.compile(r"(?:[^/~]|~[01])+")


def _object_pointer(path: str) -> str:
    """``path`` is a JSON pointer (RFC 6901) to a field of a Kubernetes object: ``~`` only as ``~0`` or
    ``~1``, and no empty segment (no field of an object has an empty name) — refused when written, not
    when the override fails at every sync."""
    if not path.startswith("/"):
        raise ValueError(f"{path}: a JSON pointer starts with /")
    for token in path[1:].split("/"):
        if not token:
            raise ValueError(f"{path}: an empty segment (//, or a trailing /) names no field of an object")
        if not _POINTER_TOKEN.fullmatch(token):
            raise ValueError(f"{path}: {token!r} has a ~ that is not ~0 (for ~) or ~1 (for /)")
    return path


def _not_identity(path: str) -> str:
    """``path`` (a JSON pointer, or dots and brackets) does not name an identity field or the root."""
    tokens = tuple(p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")) if path.startswith("/") \
        else tuple(re.findall(r"[^.\[\]]+", path))
    if not any(tokens) or tokens in IDENTITY_FIELDS:
        raise ValueError(f"{path}: {IDENTITY_MESSAGE}")
    return path


class FieldPatch(BaseModel):
    """``path`` uses dots and ``[i]`` indexes: ``spec.template.spec.containers[0].resources.limits``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-./\[\]]+$")
    op: Literal["replace", "add", "remove", "merge"] = "replace"
    value: Any = None

    _path_is_not_identity = field_validator("path")(_not_identity)


class ImagePredicate(BaseModel):
    """Karmada's ``predicate``: the one image field to change (a JSON pointer)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(pattern=r"^/")

    _path_is_a_pointer = field_validator("path")(_object_pointer)


class ImageOverrider(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    component: Literal["Registry", "Repository", "Tag"]
    operator: Literal["add", "remove", "replace"] = "replace"
    value: str = ""
    container: str | None = None
    predicate: ImagePredicate | None = None


class CommandArgsOverrider(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    containerName: str
    operator: Literal["add", "remove"]
    value: list[str] = Field(default_factory=list)


class MapOverrider(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    operator: Literal["add", "remove", "replace"]
    value: dict[str, str] = Field(default_factory=dict)


class OverrideClusterSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    names: list[str] = Field(default_factory=list)
    labelSelector: LabelSelector | None = None
    exclude: list[str] = Field(default_factory=list)
    fieldSelector: FieldSelector | None = None


class FieldOverrideOperation(BaseModel):
    """One change inside a structured string field: ``subPath`` is a JSON pointer into its document."""

    model_config = ConfigDict(extra="forbid", strict=True)

    subPath: str = Field(pattern=r"^/")
    operator: Literal["add", "remove", "replace"]
    value: Any = None


class FieldOverrider(BaseModel):
    """Karmada's ``fieldOverrider``: ``fieldPath`` (a JSON pointer) names a string field holding JSON
    or YAML (a ConfigMap's file); the operations change that document, which is written back."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, serialize_by_alias=True)

    fieldPath: str = Field(pattern=r"^/")
    json_ops: list[FieldOverrideOperation] = Field(default_factory=list, alias="json")
    yaml: list[FieldOverrideOperation] = Field(default_factory=list)

    _field_path_is_a_pointer = field_validator("fieldPath")(_object_pointer)

    @model_validator(mode="after")
    def _one_format(self) -> FieldOverrider:
        if bool(self.json_ops) == bool(self.yaml):
            raise ValueError("set exactly one of json or yaml")
        return self


class PlaintextPatch(BaseModel):
    """Karmada's ``plaintext`` overrider: one RFC 6902 operation (JSON pointer ``path``) — ``replace``
    and ``remove`` need the path, ``add`` its parent, or the override fails."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=2, pattern=r"^/")
    operator: Literal["add", "remove", "replace"]
    value: Any = None

    _path_is_a_pointer = field_validator("path")(_object_pointer)
    _path_is_not_identity = field_validator("path")(_not_identity)


class OverrideRule(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterSelector: OverrideClusterSelector
    fieldPatches: list[FieldPatch] = Field(default_factory=list)
    plaintext: list[PlaintextPatch] = Field(default_factory=list)  # applied last, as Karmada does
    imageOverrider: list[ImageOverrider] = Field(default_factory=list)
    commandOverrider: list[CommandArgsOverrider] = Field(default_factory=list)
    argsOverrider: list[CommandArgsOverrider] = Field(default_factory=list)
    labelsOverrider: list[MapOverrider] = Field(default_factory=list)
    annotationsOverrider: list[MapOverrider] = Field(default_factory=list)
    fieldOverrider: list[FieldOverrider] = Field(default_factory=list)


class ClusterOverridePolicySpec(BaseModel):
    """Karmada's ``resourceSelectors`` (a list) or the draft's ``resourceSelector`` (one); both may be
    given (the union); neither selects every resource."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resourceSelectors: list[ResourceSelector] = Field(default_factory=list)
    resourceSelector: ResourceSelector | None = None
    overrides: list[OverrideRule] = Field(min_length=1)

    def selectors(self) -> list[ResourceSelector]:
        return [*self.resourceSelectors, *([self.resourceSelector] if self.resourceSelector else [])]
