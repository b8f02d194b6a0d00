"""Applies to push members whose record on the Work is still coming.

The execution controller applies a Work and then records the result on its status; the member's
watch brings the same change to the work-status controller at about the same moment. Both wrote the
Work with a compare-and-swap on the revision they had cached, so one of them lost for nearly every
apply (at 50 operations a second over 100 members, ~1 failed Work write per operation), then read
the Work again and compared or wrote once more. While an apply is in flight, and until the Work view
holds the revision that recorded it, the work-status controller leaves the Work to that record and
looks at the copy again afterwards (its events are retried; `workstatus`): what the apply left is
recorded once, and anything newer the copy shows is written on top of it.
"""

from __future__ import annotations

from drods.controllers.work_record import WorkRecord

_IN_FLIGHT = 0


class ApplyRecords:
    """Work key → 0 while its apply runs, then the store revision of the write that recorded it."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[str, int] = {}

    def started(self, key: str) -> None:
        self._by_key[key] = _IN_FLIGHT

    def recorded(self, key: str, revision: int) -> None:
        """The apply's result is on the Work at ``revision``."""
        self._by_key[key] = revision

    def ended(self, key: str) -> None:
        """The apply is over; if nothing recorded it (it failed, or another write took its place),
        nothing is left to wait for."""
        if self._by_key.get(key) == _IN_FLIGHT:
            del self._by_key[key]

    def seen(self, key: str, work: WorkRecord | None) -> None:
        """The Work view changed: a record it now holds (or a Work gone) leaves nothing to wait for."""
        revision = self._by_key.get(key)
        if revision is not None and (work is None or (revision != _IN_FLIGHT and work.revision >= revision)):
            del self._by_key[key]

    def pending(self, work: WorkRecord) -> bool:
        """Is an apply of ``work`` running, or recorded at a revision newer than this view of it?"""
        self.seen(work.key, work)
        return work.key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)
