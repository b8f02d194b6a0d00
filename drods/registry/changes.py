"""What a request changed, for its audit record (SEC3): the registry notes every write it makes
(a JSON patch, RFC 6902, from the stored object before to after) in the recorder of the request being
served, if any. Secret values never reach the audit log: ops on a Secret's data, a Work's
manifests or a kind's ``secret_paths`` carry ``"***"`` instead of the value."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from drods.model.annotations import LAST_APPLIED
from drods.model.kinds import SECRET, WORK, Kind

REDACTED = "***"
_MAX_OPS = 200  # a record stays small; a larger change is summarised


@dataclass
class Change:
    kind: str
    namespace: str | None
    name: str
    verb: str  # create | update | delete
    patch: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "verb": self.verb,
                "patch": self.patch}


@dataclass
class Recorder:
    changes: list[Change] = field(default_factory=list)


CURRENT: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("drods_audit_recorder", default=None)
# Outside a request: the component making the write (set by the manager for each runnable) and where
# its changes go (the audit log's component writer, which returns once the record is kept: the write
# is answered only then). Status-only writes are not recorded.
Sink = Callable[[str, Change], Awaitable[None]]
COMPONENT: contextvars.ContextVar[tuple[str, Sink] | None] = contextvars.ContextVar("drods_component", default=None)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """A JSON patch turning ``before`` into ``after``: maps, and lists of the same length (a
    ServiceRoute's client sites, a Work's manifests), recursively; other lists and scalars replaced."""
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out: list[dict[str, Any]] = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            if b is not a and b != a:
                out += diff(b, a, f"{path}/{i}")
        return out
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = []
        for k in before.keys() - after.keys():
            ops.append({"op": "remove", "path": f"{path}/{_escape(str(k))}"})
        for k, v in after.items():
            p = f"{path}/{_escape(str(k))}"
            if k not in before:
                ops.append({"op": "add", "path": p, "value": v})
            elif before[k] != v:
                ops += diff(before[k], v, p)
        return sorted(ops, key=lambda o: o["path"])
    if before == after:
        return []
    return [{"op": "replace", "path": path or "", "value": after}]


def _sensitive(kind: Kind) -> tuple[str, ...]:
    paths = [f"/spec/{p.replace('.', '/')}" for p in kind.secret_paths]
    if kind is SECRET:  # kubectl apply's annotation holds the values as they were applied
        paths += ["/data", "/stringData", f"/metadata/annotations/{_escape(LAST_APPLIED)}"]
    if kind is WORK:
        paths += ["/spec/manifests"]
    return tuple(paths)


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _redacted_within(value: Any, parts: list[str]) -> Any:
    """``value`` with what lies at ``parts`` under it replaced by ``REDACTED`` (a copy where it changes)."""
    if not parts or not isinstance(value, dict):  # not a mapping to look into: all of it, to be safe
        return REDACTED
    if parts[0] not in value:
        return value
    return {**value, parts[0]: _redacted_within(value[parts[0]], parts[1:])}


def redact(kind: Kind, patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each op's value with every sensitive field in it redacted: the whole value when the op is at
    (or under) a sensitive path, the sensitive fields inside it when it holds one (a create's
    ``/metadata`` keeps its labels but not kubectl's copy of a Secret's values)."""
    sensitive = _sensitive(kind)
    out = []
    for op in patch:
        path = op["path"]
        if "value" in op:
            if path == "" and not isinstance(op["value"], dict) or \
                    any(path == s or path.startswith(s + "/") for s in sensitive):
                op = {**op, "value": REDACTED}
            else:
                value = op["value"]
                for s in sensitive:
                    if s.startswith(path + "/"):
                        value = _redacted_within(value, [_unescape(p) for p in s[len(path) + 1:].split("/")])
                op = {**op, "value": value}
        out.append(op)
    return out


_NOISE = ("/metadata/resourceVersion", "/metadata/generation", "/metadata/managedFields")


Write = tuple[Kind, str, str, str | None, Any, Any]  # kind, verb, name, namespace, before, after


async def note(kind: Kind, verb: str, name: str, namespace: str | None, before: Any, after: Any) -> None:
    """Record one write in the current request's recorder, or hand a component's to its sink and
    wait until the sink has kept it (back-pressure: a component is held while the audit log lags)."""
    await note_all([(kind, verb, name, namespace, before, after)])


async def note_all(writes: list[Write]) -> None:
    """`note` for the writes of one transaction: a component's records are handed over together and
    awaited together (one audit batch, not one round trip each)."""
    rec = CURRENT.get()
    component = COMPONENT.get() if rec is None else None
    if rec is None and component is None:
        return
    kept = [c for w in writes if (c := _change(*w, component=component is not None)) is not None]
    if rec is not None:
        rec.changes.extend(kept)
    elif component is not None and kept:
        who, sink = component
        if len(kept) == 1:
            await sink(who, kept[0])
        else:
            await asyncio.gather(*(sink(who, c) for c in kept))


def _change(kind: Kind, verb: str, name: str, namespace: str | None, before: Any, after: Any, *,
            component: bool) -> Change | None:
    patch = [op for op in diff(before or {}, after or {}) if not op["path"].startswith(_NOISE)]
    if component and all(op["path"].startswith("/status") for op in patch):
        return None
    patch = redact(kind, patch)
    if len(patch) > _MAX_OPS:
        patch = [*patch[:_MAX_OPS], {"op": "test", "path": "", "value": f"… {len(patch) - _MAX_OPS} more ops"}]
    return Change(kind.kind, namespace, name, verb, patch)
