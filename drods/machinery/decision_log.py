"""``/history/decisions/``: the journal of the decisions that have no journal of their own (X1) —
route changes, migrations, cache plans — written in the decision record's shape
(`drods.model.decision`). Retention: a store lease of ``DECISIONS_RETENTION_S`` (one day), so
entries live between 18 and 24 hours with no pruning job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drods.machinery.journal import Journal
from drods.model.keys import DECISIONS_PREFIX
from drods.model.timefmt import rfc3339_ms
from drods.store import Store

DECISIONS_RETENTION_S = 86_400.0


def decision_log(store: Store, retention_s: float = DECISIONS_RETENTION_S,
                 clock: Callable[[], float] = time.time) -> Journal:
    return Journal(store, DECISIONS_PREFIX, retention_s=retention_s, clock=clock)


async def record_decisions(journal: Journal, records: Iterable[tuple[float, Mapping[str, Any]]]) -> None:
    """Write decisions taken together (one key per second they fall in), attached to the journal's lease."""
    entries = [(ts, {"time": rfc3339_ms(ts), **rec}) for ts, rec in records]
    if not entries:
        return
    puts = journal.puts(entries, lease=await journal.lease())
    for put in puts:
        await journal.store.put(put.key, put.value, lease=put.lease)
