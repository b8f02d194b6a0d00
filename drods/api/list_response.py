"""A list answer rendered one object at a time (Kubernetes' streaming encoding of list responses):
the objects are decoded, rendered and let go in turn, so a list holds its stored bytes and the bytes
sent, not every object decoded at once. Decoded whole, one answer of 19,832 Works took the API
server's peak memory up by 283 MiB, a page of 5,000 by 46 (`bench/memory.py --list-limit`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from starlette.responses import StreamingResponse

from drods.model import jsondoc

Obj = dict[str, Any]
CHUNK = 200  # objects rendered per chunk sent


def _same(obj: Obj) -> Any:
    return obj


def list_response(envelope: Obj, items: Iterable[Obj], view: Callable[[Obj], Any] = _same) -> StreamingResponse:
    """``envelope`` with ``items`` (each as ``view`` renders it) as its last member, ``"items"``."""
    head = jsondoc.dumps({**envelope, "items": []})

    async def body() -> AsyncIterator[bytes]:
        yield head[:-2]  # up to and with the items' "["
        sep = b""
        batch: list[bytes] = []
        for obj in items:
            batch.append(jsondoc.dumps(view(obj)))
            if len(batch) == CHUNK:
                yield sep + b",".join(batch)
                sep, batch = b",", []
        yield sep + b",".join(batch) + b"]}" if batch else b"]}"

    return StreamingResponse(body(), media_type="application/json")
