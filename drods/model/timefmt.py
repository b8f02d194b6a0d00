"""Time on objects and in the store: RFC 3339 in UTC, written and read one way everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# The last second formatted, as one (second, text) tuple so a reader in another thread never pairs
# one second with another's text: a burst of writes shares it.
_whole: tuple[int, str] = (-1, "")
_second: tuple[int, str] = (-1, "")


def rfc3339(ts: float) -> str:
    """Whole seconds, as Kubernetes writes ``metav1.Time`` (timestamps, conditions)."""
    global _whole
    sec = int(ts // 1)
    cached = _whole
    if cached[0] != sec:
        cached = _whole = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return cached[1]


def rfc3339_ms(ts: float) -> str:
    """Milliseconds: scheduledTime and rescheduleTriggeredAt must compare finely."""
    global _second
    sec, ms = divmod(round(ts * 1000), 1000)
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{cached[1]}{ms:03d}Z"


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
