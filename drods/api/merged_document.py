"""One stored JSON document that reports are merged into (the traffic graph, Dataset reads): read,
merge, write back under compare-and-swap, again when a concurrent writer won the race."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from drods.errors import Conflict, Invalid
from drods.model.timefmt import parse_rfc3339
from drods.store import Store
from drods.store.cas import update_document

Doc = dict[str, Any]


def report_time(timestamp: str | None) -> float:
    """When a report was measured: its RFC 3339 ``timestamp`` (never later than now), else now."""
    now = time.time()
    if timestamp is None:
        return now
    ts = parse_rfc3339(timestamp)
    if ts is None:
        raise Invalid("timestamp is not RFC 3339", {"fields": [{"field": "timestamp", "message": "not RFC 3339"}]})
    return min(ts, now)


async def merge_into(store: Store, key: str, merge: Callable[[Doc | None], Doc], what: str) -> Doc:
    """The document at ``key`` after ``merge`` of what is stored (None: nothing yet) is written."""
    written = await update_document(
        store, key, merge, exhausted=lambda: Conflict(f"the {what} changed under too many concurrent writers; retry"))
    assert written is not None  # ``merge`` always returns a document
    return written[0]
