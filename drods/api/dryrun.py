"""Server-side dry run (``?dryRun=All``): a write is validated, defaulted and answered, never stored.

Kubernetes accepts exactly one value, ``All``; anything else is refused before anything happens, so a
client never believes a change was only simulated when it was not. The audit middleware reads the
same parameter: a dry run changes nothing, so it is not recorded as a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs

from fastapi import Query, Request

from drods.errors import BadRequest

DRY_RUN_ALL = "All"


def _check(values: Iterable[str]) -> bool:
    values = [v for v in values if v != ""]
    bad = [v for v in values if v != DRY_RUN_ALL]
    if bad:
        raise BadRequest(f"unsupported dryRun value {bad[0]!r}: the only value is {DRY_RUN_ALL!r}", {"dryRun": bad[0]})
    return bool(values)


def is_dry_run(request: Request, also: object = None) -> bool:
    """True for ``?dryRun=All`` (or ``also``, DeleteOptions' ``dryRun`` list); a 400 for any other value.
    A dry run is remembered on the request, so the audit middleware leaves it out."""
    values = list(request.query_params.getlist("dryRun"))
    if also is not None:
        if not isinstance(also, list) or not all(isinstance(v, str) for v in also):
            raise BadRequest("dryRun must be a list of strings", {"dryRun": also})
        values += also
    dry = _check(values)
    if dry:
        request.state.dry_run = True
    return dry


def marked_dry_run(state: Mapping[str, Any]) -> bool:
    """Whether a handler found this request to be a dry run (ASGI scope state, for the middleware)."""
    return bool(state.get("dry_run"))


def query_is_dry_run(query_string: bytes) -> bool:
    """The same question asked of a raw query string (the ASGI middleware has no Request)."""
    values = parse_qs(query_string.decode("latin-1"), keep_blank_values=True).get("dryRun", [])
    return bool(values) and all(v == DRY_RUN_ALL for v in values)


async def dry_run_param(
    request: Request,
    dryRun: str | None = Query(default=None, description="All: validate and answer, store nothing"),  # noqa: N803
) -> bool:
    """The parameter as a FastAPI dependency, so the flat paths document it in their OpenAPI."""
    return is_dry_run(request)
