"""Field selectors (``?fieldSelector=metadata.namespace!=kube-system,metadata.name=web``).

Kubernetes serves ``metadata.name`` and ``metadata.namespace`` on every kind; a member cluster adds
the few per-kind fields kubectl itself asks for (a node's pods by ``spec.nodeName``), and DRO-DS's
Works add the Binding and the cluster they are for (a Binding's name may be too long for the label
its Works carry, which holds a hash of it then). Terms are
ANDed; ``=`` and ``==`` mean equal, ``!=`` not equal; a missing field reads as "".
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from drods.errors import BadRequest

# What every kind can be selected by, as Kubernetes does.
COMMON_FIELDS: frozenset[str] = frozenset({"metadata.name", "metadata.namespace"})
# Events add what `kubectl describe` selects an object's events by (kube-apiserver's own set).
EVENT_FIELDS: frozenset[str] = COMMON_FIELDS | {
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
    "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
    "reportingComponent", "source", "type"}
# A Work by the Binding it carries and the member it goes to (``kubectl get works --field-selector spec.binding=web``).
WORK_FIELDS: frozenset[str] = COMMON_FIELDS | {"spec.binding", "spec.cluster"}
_ALIASES = {"source": "source.component"}  # a selector's name for a nested field


@dataclass(frozen=True, slots=True)
class FieldTerm:
    path: str
    equal: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...]

    def matches(self, obj: dict[str, Any]) -> bool:
        return all((field_value(obj, t.path) == t.value) == t.equal for t in self.terms)

    @property
    def only_name(self) -> str | None:
        """The name when the selector is exactly ``metadata.name=NAME`` (a get-by-watch)."""
        if len(self.terms) == 1 and self.terms[0].path == "metadata.name" and self.terms[0].equal:
            return self.terms[0].value
        return None


def parse_field_selector(text: str, allowed: Collection[str] | None = COMMON_FIELDS) -> FieldSelector:
    """``spec.nodeName=n1,status.phase!=Failed`` → a selector; a field outside ``allowed`` is a 400
    (``allowed=None`` accepts any dotted path)."""
    out = []
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            path, value, equal = *term.split("!=", 1), False
        elif "==" in term:
            path, value, equal = *term.split("==", 1), True
        elif "=" in term:
            path, value, equal = *term.split("=", 1), True
        else:
            raise BadRequest(f"invalid field selector term {term!r}", {"fieldSelector": text})
        path = path.strip()
        if allowed is not None and path not in allowed:
            raise BadRequest(f"field label not supported: {path} (use {', '.join(sorted(allowed))})",
                             {"fieldSelector": text})
        out.append(FieldTerm(_ALIASES.get(path, path), equal, value.strip()))
    return FieldSelector(tuple(out))


def field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)
