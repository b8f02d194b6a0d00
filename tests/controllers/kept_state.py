"""The store as failover uses it in unit tests: where it keeps its hold for the next leader."""

from __future__ import annotations

from typing import Any

from drods.store import KeyValue


class KeptState:
    def __init__(self) -> None:
        self.kept: dict[str, bytes] = {}

    async def get(self, key: str) -> KeyValue | None:
        return KeyValue(key, self.kept[key], 1, 1, 1) if key in self.kept else None

    async def put(self, key: str, value: bytes, **_: Any) -> int:
        self.kept[key] = value
        return 1
