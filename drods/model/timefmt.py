"""Time on objects and in the store: RFC 3339 in UTC, written and read one way everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_second: list[Any] = [None, ""]  # the last second formatted: a burst of decisions shares it


def rfc3339(ts: float) -> str:
    """Whole seconds, as Kubernetes writes ``metav1.Time`` (timestamps, conditions)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_ms(ts: float) -> str:
    """Milliseconds: scheduledTime and rescheduleTriggeredAt must compare finely."""
    sec, ms = divmod(round(ts * 1000), 1000)
    if _second[0] != sec:
        _second[1] = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second[0] = sec
    return f"{_second[1]}{ms:03d}Z"


def whole_ms(ts: float) -> float:
    """``ts`` to the millisecond, equal to what ``parse_rfc3339(rfc3339_ms(ts))`` reads back."""
    return round(ts * 1000) / 1000


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_datetime(value: Any) -> datetime | None:
    """RFC 3339 with or without fractional seconds (Time and MicroTime); naive means UTC; None
    when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def parse_rfc3339(value: Any) -> float | None:
    """RFC 3339 text → epoch seconds (None when absent or unreadable)."""
    dt = parse_datetime(value)
    return None if dt is None else dt.timestamp()
