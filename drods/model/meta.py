"""Kubernetes-style object metadata and the validation rules that go with it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

GROUP = "multicluster.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def check_name(name: str) -> str:
    if not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise ValueError(
            "must be a lowercase RFC 1123 subdomain: a-z, 0-9, '-' and '.', "
            "starting and ending with an alphanumeric character, at most 253 characters"
        )
    return name


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_namespace_name(name: str) -> str:
    """A namespace's name is an RFC 1123 label, as Kubernetes requires of it."""
    if not name or len(name) > 63 or not _DNS_LABEL.match(name):
        raise ValueError(f"namespace {name!r}: must be a lowercase RFC 1123 label: a-z, 0-9 and '-', starting and "
                         "ending with an alphanumeric character, at most 63 characters")
    return name


def check_label_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label key {key!r}: prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        raise ValueError(f"label key {key!r}: name must be 1-63 alphanumerics, '-', '_' or '.'")
    return key


def check_label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(f"label value {value!r}: at most 63 alphanumerics, '-', '_' or '.'")
    return value


class ObjectMeta(BaseModel):
    """The subset of Kubernetes ObjectMeta that DRO-DS keeps; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = ""
    generateName: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    generation: int | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    deletionGracePeriodSeconds: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    ownerReferences: list[dict[str, Any]] = Field(default_factory=list)
    managedFields: list[dict[str, Any]] | None = None

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for k, v in labels.items():
            check_label_key(k)
            check_label_value(v)
        return labels

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, ns: str | None) -> str | None:
        if ns is not None and ns != "":
            check_name(ns)
        return ns
