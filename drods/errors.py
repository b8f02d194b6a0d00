"""The error vocabulary (SPEC API0c): every failure is ``{code, message, details}``.

The registry, the store's users and the controllers raise the typed refusals below (`Conflict`,
`NotFound`, `AlreadyExists`, `Invalid`, `Forbidden`, `BadRequest`) and callers tell them apart by
type (``except Conflict``), never by HTTP status. Each carries the status ``drods.api`` answers
it with, so the answers stay what they were; only the API (and the simulated member API server)
reads ``status``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar


class ApiError(Exception):
    """A failure a client can act on; ``code`` is UPPER_SNAKE and stable, ``status`` the HTTP status.
    Raised as such only for failures without a type below (e.g. 405, 415, 503)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class _Refusal(ApiError):
    """A typed refusal: its class fixes the status, and the code unless one is given."""

    http_status: ClassVar[int]
    default_code: ClassVar[str]

    def __init_subclass__(cls, *, status: int, code: str, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.http_status, cls.default_code = status, code

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, code: str | None = None) -> None:
        super().__init__(self.http_status, code or self.default_code, message, details)


class Conflict(_Refusal, status=409, code="CONFLICT"):
    """The object changed since it was read (a stale resourceVersion), or a rule of the current
    state forbids the write now (e.g. a migration in progress): re-read and retry."""


class AlreadyExists(_Refusal, status=409, code="ALREADY_EXISTS"):
    """A create found the name taken."""


class NotFound(_Refusal, status=404, code="NOT_FOUND"):
    """The named object (or kind, or path) does not exist."""


class Invalid(_Refusal, status=422, code="VALIDATION_FAILED"):
    """The object or request is well-formed but breaks a rule of its schema (``details.fields``)."""


class BadRequest(_Refusal, status=400, code="BAD_REQUEST"):
    """The request cannot be understood as given (e.g. a namespace that contradicts the path)."""


class Forbidden(_Refusal, status=403, code="FORBIDDEN"):
    """The caller may not do this here."""


def not_found(kind: str, name: str, code: str | None = None) -> NotFound:
    return NotFound(f"{kind} {name!r} not found", {"kind": kind, "name": name},
                    code=code or f"{_snake(kind)}_NOT_FOUND")


def already_exists(kind: str, name: str) -> AlreadyExists:
    return AlreadyExists(f"{kind} {name!r} already exists", {"kind": kind, "name": name})


def conflict(kind: str, name: str, current: str | None) -> Conflict:
    return Conflict(
        f"{kind} {name!r} was modified since resourceVersion given; re-read and retry",
        {"kind": kind, "name": name, "currentResourceVersion": current},
    )


def validation_failed(message: str, fields: list[dict[str, Any]] | None = None, **details: Any) -> Invalid:
    if fields is not None:
        details["fields"] = fields
    return Invalid(message, details)


def bad_request(message: str, **details: Any) -> BadRequest:
    return BadRequest(message, details)


def _snake(kind: str) -> str:
    out = ""
    for i, ch in enumerate(kind):
        if ch.isupper() and i:
            out += "_"
        out += ch.upper()
    return out


# the steps pydantic adds to an error's location for the branch of a union it tried (``literal['None']``,
# ``function-after[_check(), DataStep]``, ``str``): not fields a client wrote
_BRANCH = re.compile(r"^[a-z][a-z0-9-]*\[.*\]$|^(str|int|float|bool|dict|list|none|bytes)$")


def field_path(loc: Sequence[Any], prefix: str = "") -> str:
    """A validation error's location as the field a client wrote: ``spec.data.mover``, ``items[2].name``."""
    parts = [f"[{p}]" if isinstance(p, int) else str(p) for p in loc
             if not (isinstance(p, str) and (p == "body" or _BRANCH.match(p)))]
    path = ".".join(parts).replace(".[", "[")
    return f"{prefix}{path}" if path else prefix.rstrip(".")


MAX_MESSAGE = 500  # a field's message quotes what was sent: a 60 MB value is not sent back


# a check across fields names the field it is about first: "targetCluster: must differ from sourceCluster"
_NAMED = re.compile(r"^(?P<field>[A-Za-z]\w*(?:\[[^\]]*\]|\.[\w-]+)*): (?P<message>.+)$", re.S)


def field_errors_of(errors: Iterable[Mapping[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    """pydantic's errors as ``[{field, message}]``, each once; an error of a whole object whose message
    names its field first is placed at that field."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()  # (a list's membership test made 10,000 errors take seconds)
    errors = list(errors)
    for err in _without_other_branches(errors, prefix):
        loc = tuple(err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")  # a validator's own words
        field = field_path(loc, prefix)
        if err.get("type") == "value_error" and not field_path(loc) and (m := _NAMED.match(msg)) is not None:
            field, msg = f"{prefix}{m['field']}", m["message"]
        if len(msg) > MAX_MESSAGE:
            msg = f"{msg[:MAX_MESSAGE]}… ({len(msg)} characters)"
        if (field, msg) not in seen:
            seen.add((field, msg))
            out.append({"field": field, "message": msg})
    return out


def _without_other_branches(errors: list[Mapping[str, Any]], prefix: str) -> list[Mapping[str, Any]]:
    """A union's literal branch (``data: None``) refused where another branch found what is wrong inside
    the field (``data.mover``) or in the mapping given (its validator's words) says nothing the client
    needs: left out. Input of the wrong shape altogether keeps every branch's error."""
    def literal_branch(e: Mapping[str, Any]) -> bool:
        loc = tuple(e.get("loc", ()))
        return bool(loc) and str(loc[-1]).startswith("literal[")

    def closer(field: str, other: Mapping[str, Any]) -> bool:
        at = field_path(tuple(other.get("loc", ())), prefix)
        return at.startswith(f"{field}.") or (at == field and other.get("type") == "value_error")

    return [e for e in errors if not literal_branch(e)
            or not any(closer(field_path(tuple(e.get("loc", ())), prefix), o) for o in errors if o is not e)]
