"""Stored documents as JSON bytes, written and read one way everywhere.

Encoding and decoding the objects in the store is a large share of every write, watch event and
publication (a saturated cluster rewrites hundreds of ServiceRoutes; a burst of bindings writes
thousands of Works), so it is done by orjson rather than the standard library. Numbers follow
Kubernetes: an integer outside int64 is read back as a float64, NaN is written as null.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

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


def _fitted(out: bytes) -> bytes:
    """``out`` in an allocation of its own size. orjson's result keeps the buffer it was written
    into: 4 KiB at least, ~10x a document of a few KiB (a 518-byte document held 3.6 KiB). Documents
    are kept — the scheduler's binding records, watch events — so 100,000 of them would hold that."""
    return bytes(memoryview(out))
