"""Strict field validation of Kubernetes' built-in kinds, against the official client's models.

kube-apiserver refuses a field its schema does not name (``fieldValidation=Strict``, kubectl's
default), and a value of the wrong shape — a mapping where a string goes, a string where a list goes.
DRO-DS keeps built-in templates as given (F7), so it checks them the same way, by the schema the
Kubernetes Python client is generated from (each model's ``openapi_types`` and ``attribute_map``):
a typo such as ``spec.replica`` is an error naming the field, not a silently ignored key. Scalars
are not checked beyond their shape (a quantity may be a number or a string; an int-or-string either),
but for the maps that hold only strings in Kubernetes (a ConfigMap's and a Secret's data): a number
there is refused as kube-apiserver's decoding refuses it.
``metadata`` is the registry's to check (`drods.model.meta`); ``status`` is not the writer's (the main
path keeps the stored one). The status the control plane aggregates onto a built-in kind is kept to the
kind's schema (`schema_status`): kubectl's client-side apply patches against the typed struct and fails on
a field it does not name, so the per-cluster view is the Binding's (``status.clusters[]``), not the
template's.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import Any

_LIST = re.compile(r"^(?:List|list)\[(.+)\]$")
_DICT = re.compile(r"^(?:Dict|dict)\[?\(?str, (.+?)\)?\]?$")
_SCALARS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
            "datetime": "a timestamp", "date": "a date"}
_MAX_ERRORS = 20
# top-level maps whose values kube-apiserver decodes as strings only (the client models them as dict(str, str),
# as it does quantities, which take numbers too)
_STRING_MAPS = {"V1ConfigMap": ("data", "binaryData"), "V1Secret": ("data", "stringData")}


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


@functools.cache
def _models() -> Any:
    return importlib.import_module("kubernetes.client.models")


@functools.cache
def model_name(group: str, version: str, kind: str) -> str | None:
    """The client model of a built-in kind (``V1Deployment``, ``V2HorizontalPodAutoscaler``), if it has one."""
    models = _models()
    base = version[0].upper() + version[1:] + kind
    for name in (base, f"Core{base}" if not group else "",
                 "".join(p.capitalize() for p in group.split(".")[:1]) + base if group else ""):
        cls = getattr(models, name, None) if name else None
        if cls is not None and "kind" in getattr(cls, "openapi_types", {}):
            return name
    return None


@functools.cache
def _json_fields(model: str) -> dict[str, str] | None:
    """A model's fields by their JSON names, each with its type name (None: not a model)."""
    cls = getattr(_models(), model, None)
    types = getattr(cls, "openapi_types", None)
    if types is None:
        return None
    names = getattr(cls, "attribute_map", {})
    return {names.get(attr, attr): type_name for attr, type_name in types.items()}


def unknown_or_misshapen(obj: dict[str, Any], model: str) -> list[FieldError]:
    """The fields of ``obj`` (a built-in kind's object, ``metadata`` and ``status`` aside) the kind's schema does not
    name, and the values whose shape is not the schema's; at most twenty, in document order."""
    errors: list[FieldError] = []
    fields = _json_fields(model) or {}
    for key, value in obj.items():
        if key in ("metadata", "status"):
            continue
        if key not in fields:
            errors.append(FieldError(key, "unknown field"))
        elif key in _STRING_MAPS.get(model, ()) and isinstance(value, dict):
            errors.extend(FieldError(f"{key}.{k}", f"must be a string, not {_shape(v)}")
                          for k, v in value.items() if not isinstance(v, str))
        else:
            _check(value, fields[key], key, errors)
        if len(errors) >= _MAX_ERRORS:
            break
    return errors[:_MAX_ERRORS]


def schema_status(status: dict[str, Any], model: str) -> dict[str, Any]:
    """``status`` without the fields the built-in kind's status schema does not name (at any depth), as
    kube-apiserver's typed decoding drops them: so a status the control plane aggregates (a kind's Lua
    AggregateStatus script's too) round-trips through ``kubectl get -o yaml`` / ``kubectl apply -f``."""
    type_name = (_json_fields(model) or {}).get("status")
    if type_name is None:
        return {}
    kept = _pruned(status, type_name)
    return kept if isinstance(kept, dict) else {}


def _pruned(value: Any, type_name: str) -> Any:
    if value is None or type_name in _SCALARS or type_name == "object":
        return value
    if (m := _LIST.match(type_name)) is not None:
        return [_pruned(v, m.group(1)) for v in value] if isinstance(value, list) else value
    if (m := _DICT.match(type_name)) is not None:
        return {k: _pruned(v, m.group(1)) for k, v in value.items()} if isinstance(value, dict) else value
    fields = _json_fields(type_name)
    if fields is None or not isinstance(value, dict):
        return value  # a type the client does not model, or a misshapen value: taken as given
    return {k: _pruned(v, fields[k]) for k, v in value.items() if k in fields}


def _check(value: Any, type_name: str, path: str, errors: list[FieldError]) -> None:
    if value is None or len(errors) >= _MAX_ERRORS or type_name == "object":
        return
    if type_name in _SCALARS:
        if isinstance(value, dict | list):
            errors.append(FieldError(path, f"must be {_SCALARS[type_name]}, not {_shape(value)}"))
        return
    if (m := _LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            errors.append(FieldError(path, f"must be a list, not {_shape(value)}"))
            return
        for i, item in enumerate(value):
            _check(item, m.group(1), f"{path}[{i}]", errors)
        return
    if (m := _DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            errors.append(FieldError(path, f"must be a mapping, not {_shape(value)}"))
            return
        for k, item in value.items():
            _check(item, m.group(1), f"{path}.{k}", errors)
        return
    fields = _json_fields(type_name)
    if fields is None:
        return  # a type the client names but does not model: taken as given
    if not isinstance(value, dict):
        errors.append(FieldError(path, f"must be a mapping, not {_shape(value)}"))
        return
    for key, item in value.items():
        if key not in fields:
            errors.append(FieldError(f"{path}.{key}", "unknown field"))
        else:
            _check(item, fields[key], f"{path}.{key}", errors)
        if len(errors) >= _MAX_ERRORS:
            return


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string"
