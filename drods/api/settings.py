"""Tunables of the API server: the ``api`` section of the configuration file (`drods.config`,
docs/configuration.md). Command-line flags of the same meaning win over it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ApiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Largest request body a route reads (objects, patches, apply): a bigger one is a 413.
    maxBodyBytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Largest body of POST /api/v1/sync/batch (up to 1000 objects at once).
    maxBatchBodyBytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # Also accept RS256 tokens signed by a key of this JWKS (``--jwks-url`` wins over it).
    jwksUrl: str | None = None
    # What an RS256 token (``--jwt-public-key``, a JWKS) must name as ``iss`` and ``aud``; unset, it is
    # not checked (and the process warns at start). Such tokens must carry ``exp`` either way. DRO-DS's
    # own HS256 tokens are not affected. ``--jwt-issuer``/``--jwt-audience`` win over them.
    jwtIssuer: str | None = Field(default=None, min_length=1)
    jwtAudience: str | None = Field(default=None, min_length=1)
