"""A pre-allocation hold (F6): the forecast water level the scheduler assumes for a cluster until the
peak's horizon ends. Written on the Cluster by `drods.controllers.rescheduler` as the
``multicluster.io/preallocation`` annotation; read by the scheduler's cache and by auto-ops.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drods.model.annotations import PREALLOCATION


@dataclass(frozen=True, slots=True)
class PreallocationHold:
    water_level: float
    until: float
    reason: str = ""

    def active(self, now: float) -> bool:
        return now < self.until

    @property
    def until_text(self) -> str:
        return datetime.fromtimestamp(self.until, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def to_annotation(self) -> str:
        return json.dumps({"waterLevel": round(self.water_level, 4), "until": self.until_text,
                           "reason": self.reason[:512]})


def parse_hold(annotations: Mapping[str, Any] | None) -> PreallocationHold | None:
    """The Cluster's pre-allocation hold; a malformed one is ignored (it only ever adds caution)."""
    raw = (annotations or {}).get(PREALLOCATION)
    if not isinstance(raw, str):
        return None
    try:
        doc = json.loads(raw)
        level = float(doc["waterLevel"])
        until_dt = datetime.fromisoformat(str(doc["until"]).replace("Z", "+00:00"))
        until = (until_dt if until_dt.tzinfo else until_dt.replace(tzinfo=UTC)).timestamp()
    except (ValueError, KeyError, TypeError):
        return None
    if not 0.0 <= level <= 10.0:
        return None
    return PreallocationHold(level, until, str(doc.get("reason") or ""))
