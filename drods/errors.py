"""The error vocabulary of the API (SPEC API0c): every failure is ``{code, message, details}``."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failure a client can act on; ``code`` is UPPER_SNAKE and stable, ``status`` the HTTP status."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


def not_found(kind: str, name: str, code: str | None = None) -> ApiError:
    return ApiError(
        404, code or f"{_snake(kind)}_NOT_FOUND", f"{kind} {name!r} not found", {"kind": kind, "name": name}
    )


def already_exists(kind: str, name: str) -> ApiError:
    return ApiError(409, "ALREADY_EXISTS", f"{kind} {name!r} already exists", {"kind": kind, "name": name})


def conflict(kind: str, name: str, current: str | None) -> ApiError:
    return ApiError(
        409,
        "CONFLICT",
        f"{kind} {name!r} was modified since resourceVersion given; re-read and retry",
        {"kind": kind, "name": name, "currentResourceVersion": current},
    )


def validation_failed(message: str, fields: list[dict[str, Any]] | None = None, **details: Any) -> ApiError:
    if fields is not None:
        details["fields"] = fields
    return ApiError(422, "VALIDATION_FAILED", message, details)


def bad_request(message: str, **details: Any) -> ApiError:
    return ApiError(400, "BAD_REQUEST", message, details)


def _snake(kind: str) -> str:
    out = ""
    for i, ch in enumerate(kind):
        if ch.isupper() and i:
            out += "_"
        out += ch.upper()
    return out
