"""An agent's state on disk (the last desired state, its local autonomy decisions): JSON written
atomically (0600, fsynced, then renamed), read back only when it belongs to the same cluster."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateFile:
    path: Path
    cluster: str

    def load(self) -> dict[str, Any] | None:
        """The saved document, None when there is none, it is unreadable or another cluster's."""
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("ignoring unreadable state file %s: %s", self.path, e)
            return None
        return doc if isinstance(doc, dict) and doc.get("cluster") == self.cluster else None

    def save(self, doc: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({**doc, "cluster": self.cluster}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
