"""The watch echoes of a controller's own compare-and-swap writes: not news to wake its pass for.

A revision recorded when the write returns misses the echo whenever the watch delivers it first
(the store fans the event out before the writer's caller resumes), and the pass then runs again
for nothing: the binding controller did, once for each status it wrote. So a write is also known
while it is in flight, by the revision it must replace. The store's next version of the key after
that revision is then either this write (it succeeded) or the one that made it fail, and a failed
write has its pass retried anyway: in both cases that event needs no pass of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OwnWrites:
    """Per key: the revision a write in flight replaces, and the revision the last write made."""

    _replacing: dict[str, int] = field(default_factory=dict)
    _made: dict[str, int] = field(default_factory=dict)

    def writing(self, key: str, replacing: int) -> None:
        """A compare-and-swap of ``key`` expecting revision ``replacing`` is about to be sent."""
        self._replacing[key] = replacing

    def wrote(self, key: str, revision: int | None) -> None:
        """The write returned (``revision``: what it made; None: it failed, and its pass is retried)."""
        self._replacing.pop(key, None)
        if revision is not None:
            self._made[key] = revision

    def is_echo(self, key: str, old: int | None, new: int) -> bool:
        """Is the change of ``key`` from revision ``old`` (None: unknown) to ``new`` one of these writes?"""
        if self._made.get(key) == new:
            return True
        replacing = self._replacing.get(key)
        return replacing is not None and old == replacing

    def forget(self, key: str) -> None:
        self._replacing.pop(key, None)
        self._made.pop(key, None)
