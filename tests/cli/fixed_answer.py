"""An HTTP answer with a fixed body, as the CLI's API client returns one (``status_code``, ``json()``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class FixedAnswer:
    status_code: int
    body: Any

    def json(self) -> Any:
        return self.body
