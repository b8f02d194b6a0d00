"""Request bodies: JSON or YAML by Content-Type, with a size cap; anything malformed is a clear 4xx."""

from __future__ import annotations

import json
from typing import Any

import yaml
from fastapi import Request

from drods.api.settings import ApiSettings
from drods.errors import ApiError

_DEFAULTS = ApiSettings()


async def read_body(request: Request, *, limit: int | None = None) -> Any:
    """The parsed body, at most ``limit`` bytes (default: the server's ``api.maxBodyBytes``)."""
    if limit is None:
        settings = getattr(getattr(request.app.state, "ctx", None), "api", None)
        limit = (settings if isinstance(settings, ApiSettings) else _DEFAULTS).maxBodyBytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise too_large(len(raw), limit)
    if not raw.strip():
        raise ApiError(400, "EMPTY_BODY", "request body is required", {})
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    try:
        if media in ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml"):
            return yaml.safe_load(bytes(raw))
        return json.loads(bytes(raw))
    except (ValueError, yaml.YAMLError) as e:
        kind = "YAML" if "yaml" in media else "JSON"
        raise ApiError(400, "MALFORMED_BODY", f"request body is not valid {kind}: {e}", {"contentType": media}) from e


def too_large(size: int, limit: int) -> ApiError:
    return ApiError(413, "PAYLOAD_TOO_LARGE", f"request body of {size} bytes exceeds {limit}", {"limit": limit})
