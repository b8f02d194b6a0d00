"""An agent's state on disk (the last desired state, its local autonomy decisions): JSON written
atomically (0600, fsynced, then renamed), read back only when it belongs to the same cluster.

`StateSaver` keeps the writes off the event loop: one process runs the agents of many members, and
a write with its fsync in the loop held every one of them (a fifth of the agents' process in the
pull stream at 50 changes a second)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drods.model import jsondoc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateFile:
    path: Path
    cluster: str

    def load(self) -> dict[str, Any] | None:
        """The saved document, None when there is none, it is unreadable or another cluster's."""
        try:
            doc = jsondoc.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("ignoring unreadable state file %s: %s", self.path, e)
            return None
        return doc if isinstance(doc, dict) and doc.get("cluster") == self.cluster else None

    def encode(self, doc: dict[str, Any]) -> bytes:
        return jsondoc.dumps({**doc, "cluster": self.cluster})

    def write(self, data: bytes) -> None:
        """``data`` (from `encode`) in place of the file, whole or not at all."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def save(self, doc: dict[str, Any]) -> None:
        self.write(self.encode(doc))


class StateSaver:
    """Saves of one state document, written behind the event loop: the document is taken and encoded
    in the loop (a consistent snapshot), written and fsynced in a thread; the saves asked for while
    one is written go in the next one. `flush` waits until the document as it was when called is on
    disk (a failed write counts: it is logged, and the next save tries again) — not for the saves asked
    for after it, which a stream of changes would otherwise keep coming."""

    def __init__(self, file: StateFile, document: Callable[[], dict[str, Any]]) -> None:
        self.file = file
        self.document = document
        self._asked = 0  # saves asked for
        self._done = 0  # saves covered by a write that ended
        self._ended = asyncio.Event()  # set at the end of each write
        self._writer: asyncio.Task[None] | None = None

    def request(self) -> None:
        self._asked += 1
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write(), name=f"save {self.file.path}")

    async def flush(self) -> None:
        target = self._asked
        while self._done < target and self._writer is not None and not self._writer.done():
            self._ended.clear()
            await self._ended.wait()

    async def _write(self) -> None:
        while self._done < self._asked:
            upto = self._asked
            data = self.file.encode(self.document())
            try:
                await asyncio.to_thread(self.file.write, data)
            except OSError as e:  # a full or read-only disk: the next change tries again
                log.warning("saving %s failed: %s", self.file.path, e)
            finally:
                self._done = upto
                self._ended.set()
