"""A CustomResourceDefinition's structural schema: pruning and validation of custom resources.

Kubernetes' rules for ``openAPIV3Schema``: fields a schema does not name are dropped (pruned)
unless the node says ``x-kubernetes-preserve-unknown-fields: true`` (or gives
``additionalProperties``); what is left is checked against the schema — types, ``required``,
``enum``, ``minimum``/``maximum``, lengths, patterns — and every failure is reported with its field
path. The checking is the ``jsonschema`` library's (the OpenAPI v3 subset a CRD may use is JSON
Schema draft 4 plus Kubernetes' ``x-kubernetes-*`` and ``nullable`` extensions, rewritten here).
``apiVersion``, ``kind`` and ``metadata`` are the registry's to check, never pruned.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft4Validator

Schema = dict[str, Any]
_IDENTITY = ("apiVersion", "kind", "metadata")


def prune(value: Any, schema: Schema, dropped: list[str] | None = None, at: str = "") -> Any:
    """``value`` without the object fields ``schema`` does not name (Kubernetes' pruning); the path of
    each field dropped is added to ``dropped`` when given."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return value
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for k, v in value.items():
            here = f"{at}.{k}" if at else str(k)
            if isinstance(props, dict) and k in props:
                out[k] = prune(v, props[k], dropped, here)
            elif isinstance(extra, dict):
                out[k] = prune(v, extra, dropped, here)
            elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                out[k] = v
            elif dropped is not None:
                dropped.append(here)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], dropped, f"{at}[{i}]") for i, v in enumerate(value)]
    return value


def _json_schema(node: Any) -> Any:
    """The OpenAPI v3 node as JSON Schema draft 4: ``nullable`` becomes a null type, an
    int-or-string field accepts both, a preserved object accepts any field."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) if k in ("items", "not", "additionalProperties") or k in ("allOf", "anyOf", "oneOf")
           else v for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _json_schema(v) for k, v in node["properties"].items()}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@dataclass(frozen=True, eq=False)
class StructuralSchema:
    """One served version's schema (compared by identity: a changed CRD makes a new one)."""

    schema: Schema
    status_subresource: bool = False
    # additionalPrinterColumns with a plain ``.a.b`` JSONPath: (name, dotted path, type, priority)
    printer_columns: tuple[tuple[str, str, str, int], ...] = ()
    # the ``scale`` subresource: (spec replicas path, status replicas path, label selector path or "")
    scale: tuple[str, str, str] | None = None
    _validator: Draft4Validator = field(init=False, repr=False)
    _body: Schema = field(init=False, repr=False)  # the schema without the identity fields (the registry's)

    def __post_init__(self) -> None:
        body = {**self.schema, "properties": {k: v for k, v in (self.schema.get("properties") or {}).items()
                                              if k not in _IDENTITY}}
        object.__setattr__(self, "_body", body)
        object.__setattr__(self, "_validator", Draft4Validator(_json_schema(body)))

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        """The fields of ``obj`` (an object or a merge patch of one) its schema does not name: pruned,
        or refused when the writer asks for ``fieldValidation=Strict`` (kubectl's default)."""
        dropped: list[str] = []
        prune({k: v for k, v in obj.items() if k not in _IDENTITY}, self._body, dropped)
        return dropped

    def admit(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """(the pruned object, the field errors of what is left)."""
        body = {k: v for k, v in obj.items() if k not in _IDENTITY}
        pruned = prune(copy.deepcopy(body), self._body)
        errors = []
        for e in sorted(self._validator.iter_errors(pruned), key=lambda e: list(map(str, e.absolute_path))):
            where = _path(e.absolute_path)
            if e.validator == "required" and isinstance(e.message, str):
                missing = e.message.split("'")[1] if "'" in e.message else ""
                where = f"{where}.{missing}" if where else missing
                errors.append({"field": where, "message": "Required value"})
            else:
                errors.append({"field": where or "<root>", "message": e.message})
        return {**{k: obj[k] for k in _IDENTITY if k in obj}, **pruned}, errors
