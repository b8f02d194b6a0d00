"""Server-side apply's field ownership: each field manager's applied fields are recorded in
``metadata.managedFields`` (``FieldsV1``; lists are atomic), and a field a manager applied before
and leaves out of its next apply is removed — unless another manager applies it too — as the
Kubernetes API server does. Without it a field once applied stays for ever (an override removed,
a Service made a LoadBalancer and then not).

An apply that would change a field another manager applied is a conflict (409, each field and its
manager named) unless it is forced (``force=true``), which takes the field over; the same value
applied by two managers is shared. Writes other than apply are not recorded as owners."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from drods.errors import Conflict
from drods.model.timefmt import rfc3339

Path = tuple[str, ...]
Obj = dict[str, Any]
_OWNED_METADATA = ("labels", "annotations")


def applied_fields(body: Mapping[str, Any]) -> set[Path]:
    """The leaf paths ``body`` sets (maps recursed into; a list or a scalar is one field)."""
    out: set[Path] = set()
    for key, value in body.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            for part in _OWNED_METADATA:
                sub = value.get(part) if isinstance(value, Mapping) else None
                if isinstance(sub, Mapping):
                    out |= {("metadata", part, k) for k in sub}
            continue
        out |= _leaves((key,), value)
    return out


def _leaves(prefix: Path, value: Any) -> set[Path]:
    if isinstance(value, Mapping) and value:
        return {p for k, v in value.items() for p in _leaves((*prefix, str(k)), v)}
    return {prefix}


def to_fields_v1(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def from_fields_v1(doc: Any, prefix: Path = ()) -> set[Path]:
    """The leaf paths of a FieldsV1 tree (entries other than ``f:`` — list keys — are not ours)."""
    if not isinstance(doc, Mapping):
        return set()
    children = {k[2:]: v for k, v in doc.items() if isinstance(k, str) and k.startswith("f:")}
    if not children:
        return {prefix} if prefix else set()
    return {p for k, v in children.items() for p in from_fields_v1(v, (*prefix, k))}


def _owned(entries: list[Any], manager: str) -> tuple[set[Path], set[Path]]:
    """(the fields ``manager`` applied last, those any other manager applied)."""
    mine: set[Path] = set()
    others: set[Path] = set()
    for e in entries:
        if isinstance(e, Mapping) and e.get("operation") == "Apply":
            (mine if e.get("manager") == manager else others).update(from_fields_v1(e.get("fieldsV1")))
    return mine, others


_ABSENT = object()


def _value(doc: Mapping[str, Any] | None, path: Path) -> Any:
    node: Any = doc
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def dotted(path: Path) -> str:
    return "." + ".".join(path)


def conflicts(body: Mapping[str, Any], existing: Mapping[str, Any] | None, entries: list[Any],
              manager: str, new: set[Path]) -> list[tuple[int, str, Path]]:
    """(entry index, its manager, field) for each field ``body`` applies with a value other than the
    one another manager's apply left."""
    out: list[tuple[int, str, Path]] = []
    within = {p[:k] for p in new for k in range(1, len(p) + 1)}  # a path holding one of ours, or ours
    for i, e in enumerate(entries):
        if not isinstance(e, Mapping) or e.get("operation") != "Apply" or e.get("manager") == manager:
            continue
        for theirs in sorted(from_fields_v1(e.get("fieldsV1"))):
            # the fields both set: theirs when it holds one of ours, else each of ours that holds theirs
            shared = [theirs] if theirs in within else [theirs[:k] for k in range(1, len(theirs)) if theirs[:k] in new]
            if any(_value(body, f) != _value(existing, f) for f in shared):
                out.append((i, str(e.get("manager")), theirs))
    return out


def conflict_error(found: list[tuple[int, str, Path]]) -> Conflict:
    """409 as the Kubernetes API server words it: kubectl prints the fields and their managers."""
    n = len(found)
    listed = "\n".join(f'- conflict with "{m}": {dotted(p)}' for _, m, p in found)
    return Conflict(f"Apply failed with {n} conflict{'s' if n > 1 else ''}:\n{listed}", {"causes": [
        {"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": dotted(p)}
        for _, m, p in found]}, code="APPLY_CONFLICT")  # not a lost race: applying again would not help


def _entry(manager: str, api_version: str, fields: set[Path], now: float) -> Obj:
    return {"manager": manager, "operation": "Apply", "apiVersion": api_version, "time": rfc3339(now),
            "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(fields)}


def with_ownership(body: Obj, existing: Mapping[str, Any] | None, manager: str,
                   now: float | None = None, *, force: bool = False) -> Obj:
    """``body`` as the merge patch (or the object to create) that applies it for ``manager``: the
    fields it applied before and leaves out now set to null, and its managedFields entry updated.
    Raises `Conflict` when it changes another manager's field, unless ``force`` (then the field is
    taken from that manager's entry)."""
    now = time.time() if now is None else now
    entries = list((existing or {}).get("metadata", {}).get("managedFields") or [])
    new = applied_fields(body)
    found = conflicts(body, existing, entries, manager, new)
    if found and not force:
        raise conflict_error(found)
    for i in sorted({i for i, _, _ in found}, reverse=True):
        lost = {p for j, _, p in found if j == i}
        left = from_fields_v1(entries[i].get("fieldsV1")) - lost
        if left:
            entries[i] = {**entries[i], "fieldsV1": to_fields_v1(left)}
        else:
            del entries[i]
    mine, others = _owned(entries, manager)
    out: Obj = {**body, "metadata": dict(body.get("metadata") or {})}
    for path in sorted(mine - new - others):
        if any(n[:len(path)] == path or path[:len(n)] == n for n in new):
            continue  # became a map with fields, or a part of one the body now sets whole
        _set_null(out, path)
    kept = [e for e in entries if not (isinstance(e, Mapping) and e.get("manager") == manager
                                       and e.get("operation") == "Apply")]
    out["metadata"]["managedFields"] = [*kept, _entry(manager, str(body.get("apiVersion") or ""), new, now)]
    return out


def _set_null(doc: Obj, path: Path) -> None:
    node = doc
    for part in path[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        elif not isinstance(nxt, dict):
            return
        else:
            nxt = node[part] = dict(nxt)
        node = nxt
    node[path[-1]] = None
