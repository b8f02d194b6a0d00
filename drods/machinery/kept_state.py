"""A leader's kept state (A6): one JSON document under ``/state/<name>`` (`drods.model.keys`) that
the next leader reads at its first pass, so what the last one was counting goes on counting."""

from __future__ import annotations

from typing import Any

from drods.model import jsondoc
from drods.store import Store


async def read_kept_state(store: Store, key: str) -> dict[str, Any]:
    """The document, or an empty one when there is none or it is not a JSON object: a leader that
    cannot read its predecessor's state starts afresh rather than not at all."""
    kv = await store.get(key)
    if kv is None:
        return {}
    try:
        doc = jsondoc.loads(kv.value)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


async def write_kept_state(store: Store, key: str, doc: dict[str, Any]) -> None:
    """Written through the caller's fenced store: a deposed leader cannot overwrite its successor's."""
    await store.put(key, jsondoc.dumps(doc))
