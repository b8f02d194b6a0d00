"""Kubernetes Events (core/v1) as DRO-DS's components record them: what ``kubectl describe`` and
``kubectl get events`` show about a workload — where the scheduler put it (Karmada's
``ScheduleBindingSucceed`` / ``ScheduleBindingFailed``) and a member refusing its copy (``SyncFailed``).
Kept for ``EVENT_TTL_S`` as kube-apiserver keeps them for its ``--event-ttl``; best effort: an event
never holds back the change it tells of (`drods.machinery.event_log`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from drods.model.kinds import Kind, by_kind
from drods.model.meta import API_VERSION
from drods.model.timefmt import rfc3339_ms

EVENT: Kind = by_kind("v1", "Event")  # type: ignore[assignment]
EVENT_TTL_S = 3600  # kube-apiserver's default --event-ttl
MAX_MESSAGE = 1024  # events.k8s.io/v1's bound on a note

EventType = Literal["Normal", "Warning"]


def involved_of(binding: Mapping[str, Any]) -> dict[str, Any]:
    """What a Binding's events are about: its template (``spec.resource``, as ``kubectl describe``
    selects by kind, namespace, name and uid), or the Binding itself when it has none."""
    ref = (binding.get("spec") or {}).get("resource")
    if isinstance(ref, Mapping) and ref.get("name") and ref.get("kind"):
        out = {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if ref.get(k)}
        return {**out, "namespace": ref.get("namespace") or "default"}
    meta = binding.get("metadata") or {}
    return {"apiVersion": API_VERSION, "kind": "Binding", "name": str(meta.get("name") or ""),
            **({"uid": meta["uid"]} if meta.get("uid") else {})}


@dataclass(slots=True)
class Occurrence:
    """An Event already written, told again: the same object kept with its count and first time
    (client-go's correlator), instead of one more object per repetition."""

    name: str
    uid: str
    first: str
    count: int = 1


def correlation_key(involved: Mapping[str, Any], type_: EventType, reason: str, message: str) -> tuple[str, ...]:
    """What makes two Events the same one told twice (client-go's ``getEventKey``, the source aside:
    one `EventLog` is one source)."""
    return (*(str(involved.get(k) or "") for k in ("apiVersion", "kind", "namespace", "name", "uid")),
            type_, reason, message)


def event(involved: Mapping[str, Any], type_: EventType, reason: str, message: str, ts: float, component: str,
          instance: str = "", seen: Occurrence | None = None) -> dict[str, Any]:
    """One Event about ``involved``, named as kube-apiserver's recorder names them (object.nanoseconds in
    hex), in the object's namespace (``default`` for a cluster-scoped one); ``seen``: the earlier
    occurrence this one repeats (its name, uid, first time and count)."""
    when = rfc3339_ms(ts)
    namespace = str(involved.get("namespace") or "default")
    note = message if len(message) <= MAX_MESSAGE else f"{message[:MAX_MESSAGE - 1]}…"
    first = seen.first if seen is not None else when
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": seen.name if seen is not None else f"{involved.get('name')}.{int(ts * 1e9):x}",
                     "namespace": namespace, "uid": seen.uid if seen is not None else str(uuid.uuid4()),
                     "creationTimestamp": first},
        "involvedObject": dict(involved), "type": type_, "reason": reason, "message": note,
        "source": {"component": component}, "reportingComponent": component, "reportingInstance": instance,
        "firstTimestamp": first, "lastTimestamp": when, "eventTime": None,
        "count": seen.count if seen is not None else 1,
    }
