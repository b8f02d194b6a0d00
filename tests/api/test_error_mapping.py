"""Typed refusals become the same HTTP answers as the status-carrying errors they replaced: status,
``{code, message, details}`` body and Kubernetes ``Status``, through the API's error handlers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from drods.api.app import _install_error_handlers
from drods.api.status import error_response
from drods.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    already_exists,
    bad_request,
    conflict,
    not_found,
    validation_failed,
)

FIELDS = [{"field": "spec.replicas", "message": "must be >= 0"}]

# (typed error, what was raised before for it)
CASES: list[tuple[ApiError, ApiError]] = [
    (Conflict("changed", {"kind": "Binding", "name": "b"}),
     ApiError(409, "CONFLICT", "changed", {"kind": "Binding", "name": "b"})),
    (conflict("Binding", "b", "7"),
     ApiError(409, "CONFLICT", "Binding 'b' was modified since resourceVersion given; re-read and retry",
              {"kind": "Binding", "name": "b", "currentResourceVersion": "7"})),
    (Conflict("in progress", {"name": "m"}, code="MIGRATION_IN_PROGRESS"),
     ApiError(409, "MIGRATION_IN_PROGRESS", "in progress", {"name": "m"})),
    (already_exists("Cluster", "c1"),
     ApiError(409, "ALREADY_EXISTS", "Cluster 'c1' already exists", {"kind": "Cluster", "name": "c1"})),
    (AlreadyExists("taken"), ApiError(409, "ALREADY_EXISTS", "taken", {})),
    (not_found("PropagationPolicy", "p"),
     ApiError(404, "PROPAGATION_POLICY_NOT_FOUND", "PropagationPolicy 'p' not found",
              {"kind": "PropagationPolicy", "name": "p"})),
    (NotFound("no such path /x", {"path": "/x"}), ApiError(404, "NOT_FOUND", "no such path /x", {"path": "/x"})),
    (validation_failed("invalid Binding spec", FIELDS, kind="Binding", name="b"),
     ApiError(422, "VALIDATION_FAILED", "invalid Binding spec", {"kind": "Binding", "name": "b", "fields": FIELDS})),
    (Invalid("bad", code="NO_MATCHING_POLICY"), ApiError(422, "NO_MATCHING_POLICY", "bad", {})),
    (bad_request("namespaces differ"), ApiError(400, "BAD_REQUEST", "namespaces differ", {})),
    (BadRequest("not JSON", {"errors": []}, code="MALFORMED_BODY"),
     ApiError(400, "MALFORMED_BODY", "not JSON", {"errors": []})),
    (Forbidden("role 'viewer' may not write", {"role": "viewer"}),
     ApiError(403, "FORBIDDEN", "role 'viewer' may not write", {"role": "viewer"})),
]


def _app(err: ApiError) -> FastAPI:
    app = FastAPI()
    _install_error_handlers(app)

    async def fail() -> None:
        raise err

    app.add_api_route("/api/v1/bindings/x", fail)  # the SPEC's body
    app.add_api_route("/apis/drods.io/v1/bindings/x", fail)  # a Kubernetes Status
    return app


async def _answers(err: ApiError) -> list[tuple[int, Any, str | None]]:
    out = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(err)), base_url="http://t") as client:
        for path in ("/api/v1/bindings/x", "/apis/drods.io/v1/bindings/x"):
            r = await client.get(path)
            out.append((r.status_code, r.json(), r.headers.get("www-authenticate")))
    return out


@pytest.mark.parametrize(("typed", "before"), CASES, ids=[f"{type(t).__name__}-{t.code}" for t, _ in CASES])
async def test_a_typed_refusal_is_answered_as_before(typed: ApiError, before: ApiError) -> None:
    assert (typed.status, typed.code, typed.message, typed.details) == \
        (before.status, before.code, before.message, before.details)
    assert await _answers(typed) == await _answers(before)
    spec, kubernetes = await _answers(typed)
    assert spec == (before.status, {"code": before.code, "message": before.message, "details": before.details}, None)
    assert kubernetes[1]["kind"] == "Status" and kubernetes[1]["code"] == before.status


def test_the_types_tell_refusals_apart() -> None:
    """Callers catch by type: an existing name is not a stale revision, and both are API errors."""
    assert not isinstance(already_exists("Cluster", "c"), Conflict)
    assert isinstance(conflict("Cluster", "c", None), ApiError)
    assert isinstance(not_found("Cluster", "c"), NotFound) and isinstance(validation_failed("x"), Invalid)


@pytest.mark.parametrize("path, err, message, details", [
    ("/api/v1/namespaces/shop/configmaps/nope", not_found("ConfigMap", "nope"), 'configmaps "nope" not found',
     {"name": "nope", "kind": "configmaps"}),
    ("/apis/apps/v1/namespaces/shop/deployments/web/scale", not_found("Deployment", "web"),
     'deployments.apps "web" not found', {"name": "web", "kind": "deployments", "group": "apps"}),
    ("/api/v1/namespaces", already_exists("Namespace", "team"), 'namespaces "team" already exists',
     {"name": "team", "kind": "namespaces"}),
    # about another object than the path's: kept as it was
    ("/api/v1/namespaces/gone/configmaps", not_found("Namespace", "gone"), "Namespace 'gone' not found",
     {"name": "gone", "kind": "Namespace"}),
])
def test_a_missing_or_taken_object_is_said_in_kubernetes_words(path: str, err: ApiError, message: str,
                                                                details: dict[str, str]) -> None:
    """``kubectl get cm nope`` prints kube-apiserver's words, which scripts match."""
    body = json.loads(bytes(error_response(path, err).body))
    assert (body["message"], body["details"]) == (message, details), body


def test_every_field_error_is_listed_once_in_the_order_given() -> None:
    """10,000 edges each refused (a body schemathesis sent) answer 10,000 fields, the repeats of one dropped."""
    from drods.errors import field_errors_of

    errs = [{"loc": ("body", "edges", i, "to"), "msg": "Value error, to: names itself", "type": "value_error"}
            for i in range(10_000)]
    out = field_errors_of([*errs, errs[5], errs[0]])
    assert len(out) == 10_000 and out[0] == {"field": "edges[0].to", "message": "to: names itself"}
    assert [row["field"] for row in out[:3]] == ["edges[0].to", "edges[1].to", "edges[2].to"]
