"""``apiextensions.k8s.io/v1`` CustomResourceDefinition: the spec DRO-DS accepts (Kubernetes' fields,
checked), from which `drods.registry.catalog` derives the kinds it serves.

Every served version needs a structural ``openAPIV3Schema``; conversion is ``None`` (objects are
stored as written, whichever served version wrote them); ``preserveUnknownFields`` must be false, as
in ``v1``. The ``status`` and ``scale`` subresources are served (``/status``, ``/scale``: ``kubectl
scale``). Fields DRO-DS does not act on are refused by name rather than ignored: conversion
webhooks, selectable fields.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CRD_GROUP = "apiextensions.k8s.io"
CRD_VERSION = "v1"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CrdNames(_Model):
    plural: str
    kind: str
    singular: str | None = None
    listKind: str | None = None
    shortNames: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)

    @field_validator("plural", "singular")
    @classmethod
    def _lower(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_LABEL.match(v):
            raise ValueError("must be lowercase letters, digits and '-' (a DNS label)")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if not re.match(r"^[A-Z][A-Za-z0-9]*$", v):
            raise ValueError("must be a CamelCase name starting with an upper-case letter")
        return v


class CrdValidation(_Model):
    openAPIV3Schema: dict[str, Any]

    @field_validator("openAPIV3Schema")
    @classmethod
    def _structural(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type") != "object":
            raise ValueError("the root of a structural schema must have type: object")
        return v


class CrdScale(_Model):
    """Where a custom resource keeps its replicas (JSON paths of the form ``.spec.replicas``)."""

    specReplicasPath: str = Field(pattern=r"^\.spec(\.[A-Za-z0-9_-]+)+$")
    statusReplicasPath: str = Field(pattern=r"^\.status(\.[A-Za-z0-9_-]+)+$")
    labelSelectorPath: str | None = Field(default=None, pattern=r"^\.(spec|status)(\.[A-Za-z0-9_-]+)+$")


class CrdSubresources(_Model):
    status: dict[str, Any] | None = None
    scale: CrdScale | None = None


class CrdVersion(_Model):
    name: str
    served: bool
    storage: bool
    schema_: CrdValidation = Field(alias="schema")
    subresources: CrdSubresources | None = None
    additionalPrinterColumns: list[dict[str, Any]] = Field(default_factory=list)
    deprecated: bool = False
    deprecationWarning: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class CrdConversion(_Model):
    strategy: Literal["None"] = "None"


class CustomResourceDefinitionSpec(_Model):
    """The definition of a custom kind: group, names, scope and its versions with their schemas."""

    group: str
    names: CrdNames
    scope: Literal["Namespaced", "Cluster"]
    versions: list[CrdVersion] = Field(min_length=1)
    conversion: CrdConversion | None = None
    preserveUnknownFields: Literal[False] = False

    @field_validator("group")
    @classmethod
    def _group(cls, v: str) -> str:
        if not _DNS_SUBDOMAIN.match(v):
            raise ValueError("must be a DNS subdomain with at least one dot (e.g. example.com)")
        return v

    @model_validator(mode="after")
    def _one_storage(self) -> CustomResourceDefinitionSpec:
        if sum(1 for v in self.versions if v.storage) != 1:
            raise ValueError("exactly one version must have storage: true")
        names = [v.name for v in self.versions]
        if len(set(names)) != len(names):
            raise ValueError("version names must be unique")
        return self

    def expected_name(self) -> str:
        return f"{self.names.plural}.{self.group}"
