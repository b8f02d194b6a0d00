"""The patch formats kubectl and the REST API send: merge patch (RFC 7386) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer

from drods.errors import ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def sets_resource_version(patch: Any, content_type: str) -> bool:
    """Does the patch itself carry ``metadata.resourceVersion`` (a precondition, as in Kubernetes)?
    A patch without one is re-applied to the newer object when a concurrent write wins the race."""
    media = content_type.split(";")[0].strip().lower()
    if media == JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and str(op.get("path")) in ("", "/metadata", "/metadata/resourceVersion")
            for op in patch)
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and "resourceVersion" in meta


def apply_patch(doc: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
    """Strategic merge patch is applied as a merge patch: our kinds have no patch-merge keys."""
    media = content_type.split(";")[0].strip().lower()
    if media in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        if not isinstance(patch, dict):
            raise bad_request("a merge patch must be a JSON object")
        out = merge_patch(doc, patch)
        assert isinstance(out, dict)
        return out
    if media == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("a JSON patch must be a JSON array of operations")
        result: Any = copy.deepcopy(doc)
        for i, op in enumerate(patch):  # one at a time, so a refusal names the operation that failed
            try:
                result = jsonpatch.apply_patch(result, [op], in_place=True)
            except jsonpatch.JsonPatchTestFailed as e:
                path = op.get("path") if isinstance(op, dict) else None
                actual = _at(result, path)
                raise bad_request(f"JSON patch operation {i} (test {path}) failed: the value is {actual}, the patch "
                                  f"expected {json.dumps(op.get('value'))}", operation=i, path=path) from e
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError,
                    AttributeError) as e:
                if not isinstance(op, dict):
                    raise bad_request(f"JSON patch operation {i} ({op!r}) failed: {e}", operation=i) from e
                source = f" from {op['from']}" if "from" in op else ""
                why = f"nothing at {op['from']}" if source and _at(result, op["from"]) == "absent" else \
                    pointer_failure(e)
                raise bad_request(f"JSON patch operation {i} ({op.get('op')} {op.get('path')}{source}) failed: {why}",
                                  operation=i) from e
        if not isinstance(result, dict):
            raise bad_request("a JSON patch must leave an object")
        return result
    raise ApiError(
        415, "UNSUPPORTED_MEDIA_TYPE", f"unsupported patch type {media!r}",
        {"supported": [MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH]},
    )


def pointer_failure(e: Exception) -> str:
    """A JSON patch or pointer error without the document it looked in: jsonpointer says "member 'x' not
    found in {…}" with the whole object, which is no reason and may be a Secret's data."""
    return str(e).split(" in {", 1)[0].split(" in [", 1)[0]


def _at(doc: Any, path: Any) -> str:
    """The JSON text at ``path`` in ``doc`` (for a message), or "absent"."""
    try:
        return json.dumps(jsonpointer.resolve_pointer(doc, str(path)))
    except (jsonpointer.JsonPointerException, TypeError):
        return "absent"
