"""A Kubernetes list in pages: ``limit`` and ``continue`` (kubectl asks for 500 at a time).

A page holds at most ``limit`` objects; while more are left, its ``metadata.continue`` is a token
for the next one, opaque to clients: the first page's resourceVersion and the key the page ended
at, relative to the kind's prefix (the shape kube-apiserver's tokens have). Each page reads the store
as it is when it is asked for — Kubernetes' "inconsistent" continuation, not a snapshot — and every
page reports the first page's resourceVersion, so a watch started from it after the last page sees
every change made while the pages were read. An object created or deleted behind the cursor in
the meantime is not in the pages; the watch brings it.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from drods.api.fields import FieldSelector
from drods.errors import BadRequest
from drods.model import jsondoc
from drods.model.kinds import Kind
from drods.model.selector import LabelSelector
from drods.registry.objects import ObjectRegistry
from drods.store import KeyValue

Obj = dict[str, Any]

TOKEN_VERSION = "meta.k8s.io/v1"
MAX_PAGE = 10_000  # a larger limit gets pages of this size (a server may return fewer than asked)


@dataclass(frozen=True)
class PageRequest:
    limit: int  # 0: everything at once
    revision: int = 0  # the first page's store revision (0 on the first page)
    after: str = ""  # the last key of the page before, relative to the kind's prefix

    @classmethod
    def of(cls, request: Request) -> PageRequest:
        """``limit`` and ``continue`` of a list request; a token without a limit gets pages of 500
        (kubectl's chunk)."""
        text = request.query_params.get("limit") or "0"
        if not text.isdigit():
            raise BadRequest("limit must be a non-negative integer", {"limit": text})
        limit = min(int(text), MAX_PAGE)
        token = request.query_params.get("continue")
        if not token:
            return cls(limit)
        revision, after = decode_token(token)
        return cls(limit or 500, revision, after)


def encode_token(revision: int, after: str) -> str:
    doc = {"v": TOKEN_VERSION, "rv": revision, "start": after}
    return base64.urlsafe_b64encode(jsondoc.dumps(doc)).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    """The revision and the relative key of a ``continue`` token; a token this server did not
    make is a 400 that says so."""
    try:
        doc = jsondoc.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError) as e:
        raise BadRequest("continue key is not valid: not a token this server made", {"continue": token}) from e
    if not (isinstance(doc, dict) and doc.get("v") == TOKEN_VERSION and isinstance(doc.get("rv"), int)
            and doc["rv"] > 0 and isinstance(doc.get("start"), str) and doc["start"]):
        raise BadRequest("continue key is not valid: not a token this server made", {"continue": token})
    return int(doc["rv"]), str(doc["start"])


@dataclass(frozen=True)
class ListPage:
    """A list answer's objects — decoded one at a time as they are iterated when the list has no
    selector (``stored``), or already decoded when a selector had to read them (``decoded``) — the
    resourceVersion to report, and the ``continue`` token for the next page ("" when none is left)."""

    decode: Callable[[KeyValue], Obj]
    stored: list[KeyValue]
    decoded: list[Obj]
    revision: int
    following: str

    def __iter__(self) -> Iterator[Obj]:
        yield from self.decoded
        for kv in self.stored:
            yield self.decode(kv)


async def read_list(registry: ObjectRegistry, kind: Kind, namespace: str | None, selector: LabelSelector | None,
                    fields: FieldSelector | None, page: PageRequest) -> ListPage:
    """The objects of a list request (one page of them when it has a ``limit``)."""
    decode = functools.partial(registry.decode, kind)
    prefix = kind.key_prefix(namespace if kind.namespaced else None)
    after = prefix + page.after if page.after else ""
    if selector is None and fields is None:
        kvs, revision, last = await registry.stored_page(kind, namespace, limit=page.limit, after=after)
        revision = page.revision or revision
        return ListPage(decode, kvs, [], revision, encode_token(revision, last[len(prefix):]) if last else "")
    if not page.limit:
        items, revision = await registry.list(kind, namespace, selector)
        return ListPage(decode, [], [o for o in items if fields.matches(o)] if fields is not None else items,
                        revision, "")

    def matches(o: Obj) -> bool:
        return (selector is None or selector.matches(o["metadata"].get("labels", {}))) and \
            (fields is None or fields.matches(o))

    items, revision, last = await registry.list_page(kind, namespace, matches, limit=page.limit, after=after)
    revision = page.revision or revision
    return ListPage(decode, [], items, revision, encode_token(revision, last[len(prefix):]) if last else "")
