"""Karmada's ``fieldOverrider``: change a document kept as a string inside an object (a ConfigMap's
``config.yaml``, a JSON setting in an annotation) without rewriting the whole string.

``fieldPath`` is a JSON pointer to the string; its ``json`` or ``yaml`` operations are JSON-patch
``add`` / ``remove`` / ``replace`` at ``subPath`` inside the parsed document, which is serialised
back in the same format. A missing field, a value that does not parse, or an operation that does
not fit is an `OverrideError` (the Work for that cluster is not written, as for any override).
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import jsonpointer
import yaml

from drods.model.policy import FieldOverrider
from drods.registry.patch import pointer_failure

Obj = dict[str, Any]


class FieldOverrideError(ValueError):
    """A field override that does not fit the object."""


def apply_field_overrider(obj: Obj, o: FieldOverrider) -> None:
    """Change ``obj`` in place."""
    try:
        current = jsonpointer.resolve_pointer(obj, o.fieldPath)
    except jsonpointer.JsonPointerException as e:
        raise FieldOverrideError(f"fieldOverrider {o.fieldPath}: no such field") from e
    if not isinstance(current, str):
        raise FieldOverrideError(f"fieldOverrider {o.fieldPath}: not a string field")
    as_yaml = bool(o.yaml)
    try:
        doc = yaml.safe_load(current) if as_yaml else json.loads(current)
    except (yaml.YAMLError, ValueError) as e:
        raise FieldOverrideError(f"fieldOverrider {o.fieldPath}: not {'YAML' if as_yaml else 'JSON'}: "
                                 f"{_where(e)}") from e
    ops = [{"op": x.operator, "path": x.subPath, **({"value": x.value} if x.operator != "remove" else {})}
           for x in (o.yaml if as_yaml else o.json_ops)]
    try:
        doc = jsonpatch.apply_patch(doc, ops)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise FieldOverrideError(f"fieldOverrider {o.fieldPath}: {pointer_failure(e)}") from e
    text = yaml.safe_dump(doc, sort_keys=False) if as_yaml else json.dumps(doc, separators=(",", ":"))
    jsonpatch.apply_patch(obj, [{"op": "replace", "path": o.fieldPath, "value": text}], in_place=True)


def _where(e: Exception) -> str:
    """Where the text could not be read, without quoting it: a YAML error shows the line it stopped at,
    and the message goes to the Binding's conditions and Events, which readers of no Secret see."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        return f"{e.problem} at line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1}"
    return str(e) if isinstance(e, json.JSONDecodeError) else type(e).__name__
