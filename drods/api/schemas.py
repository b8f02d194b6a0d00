"""Shapes the flat ``/api/v1`` façade documents in its OpenAPI (request bodies and error bodies)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.model.cluster import ClusterSpec
from drods.model.policy import PropagationPolicySpec


class ErrorBody(BaseModel):
    code: str = Field(examples=["CLUSTER_NOT_FOUND"])
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "Malformed request"), (401, "Missing or invalid token"), (403, "Role not allowed"),
        (404, "Not found"), (409, "Conflict"), (413, "Body too large"), (415, "Unsupported media type"),
        (422, "Validation failed"),
    )
}


class FlatObject(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                      examples=["gcp-production"])
    labels: dict[str, str] = Field(default_factory=dict)


class ClusterRegistration(ClusterSpec, FlatObject):
    """API1: ``{"name": "gcp-production", "endpoint": "https://…", "capabilities": ["gpu"]}`` plus the rest."""


class PropagationPolicyBody(PropagationPolicySpec, FlatObject):
    """API2: ``{"name": "cross-region-policy", "resourceType": "Deployment", "targetClusters": [...]}``."""


class ObjectList(BaseModel):
    items: list[dict[str, Any]]
    resourceVersion: str
    continue_: str | None = Field(default=None, alias="continue",
                                  description="the next page's token, when a limit left objects out")
