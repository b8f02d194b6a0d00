"""Error rendering: the SPEC's ``{code, message, details}`` body, or a Kubernetes ``Status`` on the
Kubernetes-shaped paths so kubectl and the official clients understand it."""

from __future__ import annotations

from typing import Any

from drods.api.json_response import JSONResponse
from drods.errors import ApiError

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    406: "NotAcceptable", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    503: "ServiceUnavailable",
}


# Kubernetes' core plurals: ``/api/v1/<plural>`` is Kubernetes' list path, never one of the façade's.
_CORE_PLURALS = frozenset({"services", "configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims",
                           "resourcequotas", "limitranges", "pods", "nodes", "events", "endpoints",
                           "persistentvolumes", "replicationcontrollers", "podtemplates"})


def is_kubernetes_path(path: str) -> bool:
    if path.startswith("/api/v1/") and path.split("/")[3] in _CORE_PLURALS:
        return True
    return path in ("/api", "/api/v1", "/version") or path.startswith(("/apis", "/api/v1/namespaces", "/openapi/"))


def kubernetes_status(err: ApiError) -> dict[str, Any]:
    reason = "AlreadyExists" if err.code == "ALREADY_EXISTS" else _REASONS.get(err.status, "Unknown")
    details: dict[str, Any] = {}
    for src, dst in (("name", "name"), ("kind", "kind"), ("group", "group")):
        if src in err.details:
            details[dst] = err.details[src]
    fields = err.details.get("fields")
    if isinstance(err.details.get("causes"), list):  # already in Kubernetes' words (a field manager conflict)
        details["causes"] = err.details["causes"]
    elif fields:
        details["causes"] = [
            {"reason": "FieldValueInvalid", "field": f.get("field", ""), "message": f.get("message", "")}
            for f in fields
        ]
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": err.message, "reason": reason, "details": details, "code": err.status,
    }


def error_response(path: str, err: ApiError) -> JSONResponse:
    return _response(error_body(path, err), err)


def error_body(path: str, err: ApiError) -> dict[str, Any]:
    """``err`` as a request for ``path`` is answered: a Kubernetes ``Status`` there, else ``{code, message,
    details}``."""
    if not is_kubernetes_path(path):
        return err.body()
    return in_kubernetes_words(kubernetes_status(err), path)


def in_kubernetes_words(status: dict[str, Any], path: str) -> dict[str, Any]:
    """A NotFound or AlreadyExists of an object named by ``path`` said as kube-apiserver says it —
    ``deployments.apps "web" not found``, ``details.kind`` the resource — which kubectl prints and
    scripts match; an Invalid one names its causes in its message (kubectl prints only the message:
    ``… "web" is invalid: spec.minReplicas: …``), a Forbidden one the resource it was refused."""
    resource = resource_of(path)
    if resource is not None and status["reason"] == "Invalid" and status["details"].get("causes"):
        return _invalid(status, resource)
    if resource is not None and status["reason"] == "Forbidden":
        return _forbidden(status, path, resource)
    name, kind = status["details"].get("name"), str(status["details"].get("kind") or "").lower()
    if resource is None or not isinstance(name, str) or status["reason"] not in ("NotFound", "AlreadyExists"):
        return status
    plural, group = resource
    if not kind or not plural.startswith(kind[:-1]):
        return status  # about another object than the path's (its namespace, say)
    what = "not found" if status["reason"] == "NotFound" else "already exists"
    details = {**status["details"], "kind": plural, **({"group": group} if group else {})}
    return {**status, "message": f'{plural}{"." + group if group else ""} "{name}" {what}', "details": details}


def _invalid(status: dict[str, Any], resource: tuple[str, str]) -> dict[str, Any]:
    causes = [f"{c.get('field')}: {c.get('message')}" if c.get("field") else str(c.get("message"))
              for c in status["details"]["causes"]]
    said = causes[0] if len(causes) == 1 else f"[{', '.join(causes)}]"
    name = status["details"].get("name")
    plural, group = resource
    kind = str(status["details"].get("kind") or plural)
    if not (isinstance(name, str) and name):
        return {**status, "message": f"{status['message']}: {said}"}
    return {**status, "message": f'{kind}{"." + group if group else ""} "{name}" is invalid: {said}'}


def _forbidden(status: dict[str, Any], path: str, resource: tuple[str, str]) -> dict[str, Any]:
    plural, group = resource
    parts = [p for p in path.split("/") if p]
    at = parts.index(plural) if plural in parts else -1
    name = parts[at + 1] if 0 <= at < len(parts) - 1 else status["details"].get("name")
    what = f'{plural}{"." + group if group else ""}' + (f' "{name}"' if isinstance(name, str) and name else "")
    details = {**status["details"], "kind": plural, **({"group": group} if group else {}),
               **({"name": name} if isinstance(name, str) and name else {})}
    return {**status, "message": f"{what} is forbidden: {status['message']}", "details": details}


def resource_of(path: str) -> tuple[str, str] | None:
    """(plural, group) of the resource a Kubernetes object or collection path names."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return (rest[0], group) if rest else None


def kubernetes_error_response(err: ApiError, path: str | None = None) -> JSONResponse:
    """``err`` as a Kubernetes ``Status`` whatever the path (a member speaks only that dialect), in
    kube-apiserver's words for the object ``path`` names."""
    status = kubernetes_status(err)
    return _response(in_kubernetes_words(status, path) if path is not None else status, err)


# A 503 of the store (or of the audit log in it) being away says when to try again: kubectl retries such
# an answer (up to ten times) only when it carries ``Retry-After``.
RETRY_AFTER_SECONDS = 5
RETRIED = ("STORE_UNAVAILABLE", "AUDIT_UNAVAILABLE")


def _response(body: dict[str, Any], err: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else {}
    if err.status == 503 and err.code in RETRIED:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if err.status == 405 and isinstance(allowed := err.details.get("allowed"), list):
        headers["Allow"] = ", ".join(allowed)  # RFC 9110: a 405 names the methods the resource takes
    return JSONResponse(body, status_code=err.status, headers=headers or None)
