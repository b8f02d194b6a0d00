"""Stored documents as JSON bytes, written and read one way everywhere.

Encoding and decoding the objects in the store is a large share of every write, watch event and
publication (a saturated cluster rewrites hundreds of ServiceRoutes; a burst of bindings writes
thousands of Works), so it is done by orjson rather than the standard library. Numbers follow
Kubernetes: an integer outside int64 is read back as a float64, NaN is written as null.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

from drods.model.sharing import SharedPool

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: Any) -> bytes:
    """Compact JSON (UTF-8, no spaces)."""
    try:
        return _fitted(orjson.dumps(obj, option=_OPTIONS))
    except TypeError:  # an integer beyond 64 bits, or a type only the standard library knows
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def canonical(obj: Any) -> bytes:
    """Compact JSON with sorted keys: the same document always gives the same bytes (hashes of it)."""
    try:
        return _fitted(orjson.dumps(obj, option=_OPTIONS | orjson.OPT_SORT_KEYS))
    except TypeError:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """Raises ``ValueError`` (``json.JSONDecodeError``) on bad input, as ``json.loads`` does."""
    return orjson.loads(raw)


# Equal string values of kept documents share one object (bounded, see ``SharedPool``).
shared_strings: SharedPool[str, str] = SharedPool(1 << 16)


def loads_kept(raw: bytes | bytearray | memoryview | str) -> Any:
    """``loads`` for a document a cache keeps (an informer's): string values equal to one seen
    before are that same object. 100,000 Bindings repeat a few cluster names, phases, reasons and
    messages; orjson shares keys but makes every value anew (~0.5-0.7 KB a Binding). Not for
    documents that hold secrets: the pool may keep a value for a while after its document is gone."""
    doc = orjson.loads(raw)
    _share(doc, shared_strings.adder())
    return doc


# Equal containers (holding only values) of shared documents: one object by their JSON (bounded, see ``SharedPool``).
shared_containers: SharedPool[bytes, Any] = SharedPool(1 << 14)


def loads_shared(raw: bytes | bytearray | memoryview | str) -> Any:
    """``loads_kept`` that also shares every container below the top level's own members whose content
    (values, and containers of values) equals one seen before: for a cache many readers read and
    none changes (the shared informer of Bindings). The top level and its members (``metadata``,
    ``spec``, ``status``) stay the document's own, so the cache may set ``resourceVersion`` or
    replace a member."""
    doc = orjson.loads(raw)
    if type(doc) is dict:
        shared_parts(doc, shared_containers)
    return doc


def shared_parts(doc: dict[str, Any], containers: SharedPool[bytes, Any], *,
                 own_members: bool = True) -> dict[str, Any]:
    """``doc`` (decoded, the caller's own) with its strings shared as ``loads_kept`` shares them and each
    container below it that holds only values and equals one in ``containers`` that one — its own members
    (``metadata``, ``spec``, ``status``) apart when ``own_members``: for a cache of many documents alike
    that its readers never change. ``containers`` is the cache's own pool when its documents' parts are
    mostly unlike other caches' (they would empty a pool shared with them)."""
    _share_content(doc, shared_strings.adder(), containers.adder(), own_members=own_members)
    return doc


def _share_content(
    node: Any, add: Callable[[str, str], str], pool: Callable[[bytes, Any], Any], own_members: bool = False
) -> bool:
    """Shares ``node``'s strings and those of its containers whose content is only values (keyed by
    their JSON: ``1``, ``1.0`` and ``true`` stay apart), ``node``'s own members apart when
    ``own_members``; returns whether ``node`` too holds only values (its parent may then share it)."""
    pairs = node.items() if type(node) is dict else enumerate(node)
    whole = True
    for k, v in pairs:  # replacing a value in place leaves the container's size, hence the walk, as it is
        t = type(v)
        if t is str:
            node[k] = add(v, v)
        elif t is dict or t is list:
            if _share_content(v, add, pool) and not own_members:
                node[k] = pool(orjson.dumps(v), v)
            else:
                whole = False
    return whole


def kept(node: Any) -> Any:
    """``node`` (a decoded dict or list) with its string values shared as ``loads_kept`` shares them:
    for the part of a document a cache keeps when the rest may hold secrets (a Work's status, not
    its manifests)."""
    if type(node) is dict or type(node) is list:
        _share(node, shared_strings.adder())
    return node


def _share(node: Any, add: Callable[[str, str], str]) -> None:
    pairs = node.items() if type(node) is dict else enumerate(node)
    for k, v in pairs:  # replacing a value in place leaves the dict's size, hence the walk, as it is
        t = type(v)
        if t is str:
            node[k] = add(v, v)
        elif t is dict or t is list:
            _share(v, add)


def _fitted(out: bytes) -> bytes:
    """``out`` in an allocation of its own size. orjson's result keeps the buffer it was written
    into: 4 KiB at least, ~10x a document of a few KiB (a 518-byte document held 3.6 KiB). Documents
    are kept — the scheduler's binding records, watch events — so 100,000 of them would hold that."""
    return bytes(memoryview(out))
