from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from drods.monitor.series import DAY, AsyncSeriesStore, SeriesStore, Tier


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


T0 = 1_700_006_400.0  # a whole day and hour, so buckets align nicely


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[SeriesStore]:
    s = SeriesStore(tmp_path / "history.db", clock=clock, grace_s=300)
    yield s
    s.close()


def test_append_and_raw_query(store: SeriesStore, clock: Clock) -> None:
    n = store.append([("c1", "cpu.utilisation", T0 + i * 10, i / 100) for i in range(6)])
    assert n == 6
    clock.t = T0 + 60
    assert store.query("c1", "cpu.utilisation", T0, T0 + 50, 10) == [(T0 + i * 10, i / 100) for i in range(6)]
    # step aggregation (avg over epoch-aligned buckets), inclusive end
    assert store.query("c1", "cpu.utilisation", T0, T0 + 50, 30) == [
        (T0, pytest.approx(0.01)),
        (T0 + 30, pytest.approx(0.04)),
    ]
    assert store.query("c1", "cpu.utilisation", T0 + 20, T0 + 30, 10) == [(T0 + 20, 0.02), (T0 + 30, 0.03)]
    assert store.query("c1", "nope", T0, T0 + 50, 10) == []
    assert store.query("c2", "cpu.utilisation", T0, T0 + 50, 10) == []
    assert store.latest("c1", "cpu.utilisation") == (T0 + 50, 0.05)
    assert store.series() == [("c1", "cpu.utilisation")]


def test_non_finite_values_skipped_and_duplicates_replace(store: SeriesStore) -> None:
    assert store.append([("c", "m", T0, math.nan), ("c", "m", T0, 1.0), ("c", "m", T0 + 0.5, 2.0)]) == 2
    assert store.query("c", "m", T0, T0 + 1, 1) == [(T0, 2.0)]


def test_batch_insert_is_one_transaction(store: SeriesStore) -> None:
    # A failing batch leaves nothing behind.
    class Boom(Exception):
        pass

    def gen():  # type: ignore[no-untyped-def]
        yield ("c", "m", T0, 1.0)
        raise Boom

    with pytest.raises(Boom):
        store.append(gen())
    assert store.query("c", "m", T0 - 1, T0 + 1, 1) == []


def test_downsample_and_stitched_query(store: SeriesStore, clock: Clock) -> None:
    # 3 h of 10-s samples whose value is the minute index → 1-min average is exact
    samples = [("c", "m", T0 + i * 10, float(i // 6)) for i in range(3 * 360)]
    store.append(samples)
    clock.t = T0 + 3 * 3600
    written = store.downsample()
    # rolled up to now - grace, aligned: 1-min buckets for 175 min, 1-h buckets for 2 h
    counts = store.row_counts()
    assert counts[60] == 175 and counts[3600] == 2
    assert written == 177
    # hourly average of minute indices 0..59 = 29.5
    assert store.query("c", "m", T0, T0 + 3599, 3600) == [(T0, pytest.approx(29.5))]
    # the whole range at 1-h step: same answer from raw + rollups (no double counting)
    assert store.query("c", "m", T0, T0 + 3 * 3600, 3600) == [
        (T0, pytest.approx(29.5)),
        (T0 + 3600, pytest.approx(89.5)),
        (T0 + 7200, pytest.approx(149.5)),
    ]
    # idempotent: a second run writes nothing new
    assert store.downsample() == 0


def test_retention_and_tier_fallback(tmp_path: Path, clock: Clock) -> None:
    tiers = (Tier(0, 3600), Tier(60, 4 * 3600), Tier(3600, 2 * DAY))
    s = SeriesStore(tmp_path / "h.db", tiers, clock=clock, grace_s=0)
    s.append([("c", "m", T0 + i * 10, float(i // 6)) for i in range(6 * 360)])  # 6 h
    clock.t = T0 + 6 * 3600
    s.maintain()
    counts = s.row_counts()
    # raw: last hour only; 1-min: last 4 h; 1-h: all 6 h
    assert counts[0] == 360 and counts[60] == 240 and counts[3600] == 6
    # the oldest hour now only exists at 1-h resolution, and the answer is unchanged
    assert s.query("c", "m", T0, T0 + 3599, 3600) == [(T0, pytest.approx(29.5))]
    # asking for 10-s steps over old data returns what the coarser tier has
    old = s.query("c", "m", T0, T0 + 2 * 3600, 10)
    assert old[0] == (T0, pytest.approx(29.5))
    assert old[1] == (T0 + 3600, pytest.approx(89.5))
    assert (T0 + 2 * 3600, pytest.approx(120.0)) in [(t, v) for t, v in old]
    # recent data is still raw
    assert s.query("c", "m", T0 + 6 * 3600 - 10, T0 + 6 * 3600, 10) == [(T0 + 6 * 3600 - 10, 359.0)]
    clock.t = T0 + 3 * DAY
    s.maintain()
    assert s.row_counts() == {}
    s.close()


def test_raw_not_expired_before_rollup(tmp_path: Path, clock: Clock) -> None:
    tiers = (Tier(0, 60), Tier(60, 3600), Tier(3600, DAY))
    s = SeriesStore(tmp_path / "h.db", tiers, clock=clock)
    s.append([("c", "m", T0 + i, 1.0) for i in range(600)])
    clock.t = T0 + 3600
    s.apply_retention()  # no rollup yet → nothing deleted
    assert s.row_counts()[0] == 600
    s.close()


def test_reopen_keeps_series_and_watermarks(tmp_path: Path, clock: Clock) -> None:
    s = SeriesStore(tmp_path / "h.db", clock=clock)
    s.append([("c", "m", T0 + i * 10, 1.0) for i in range(100)])
    clock.t = T0 + 3600
    s.downsample()
    s.close()
    s2 = SeriesStore(tmp_path / "h.db", clock=clock)
    assert s2.series() == [("c", "m")]
    assert s2.downsample() == 0
    assert s2.query("c", "m", T0, T0 + 1000, 3600) == [(T0, 1.0)]
    s2.close()


def test_history_is_its_own_sqlite_file(tmp_path: Path, store: SeriesStore) -> None:
    store.append([("c", "m", T0, 1.0)])
    assert store.size_bytes() > 0
    names = {r[0] for r in sqlite3.connect(store.path).execute("SELECT name FROM sqlite_master")}
    assert {"series", "samples", "meta"} <= names


def test_invalid_tiers(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SeriesStore(tmp_path / "x.db", (Tier(60, 10),))
    with pytest.raises(ValueError):
        SeriesStore(tmp_path / "y.db", (Tier(0, 10), Tier(60, 10), Tier(90, 10)))


async def test_async_wrapper(store: SeriesStore) -> None:
    a = AsyncSeriesStore(store)
    assert await a.append([("c", "m", T0 + i, float(i)) for i in range(10)]) == 10
    assert await a.query("c", "m", T0, T0 + 9, 5) == [(T0, 2.0), (T0 + 5, 7.0)]
    await a.maintain()
    await a.close()


def test_a_reader_over_the_same_file_sees_series_another_process_added(tmp_path: Path, clock: Clock) -> None:
    """An API replica opened the history before the controllers collected a cluster's first sample: it
    answers what the file holds, as every other replica over that file does."""
    reader = SeriesStore(tmp_path / "history.db", clock=clock, grace_s=300)
    writer = SeriesStore(tmp_path / "history.db", clock=clock, grace_s=300)
    try:
        assert reader.query("c9", "cpu.utilisation", T0, T0 + 60, 10) == []
        writer.append([("c9", "cpu.utilisation", T0 + 10, 0.5)])
        clock.t = T0 + 60  # re-read at most once a second
        assert reader.query("c9", "cpu.utilisation", T0, T0 + 60, 10) == [(T0 + 10, 0.5)]
        assert reader.latest("c9", "cpu.utilisation") == (T0 + 10, 0.5)
        assert ("c9", "cpu.utilisation") in reader.series()
    finally:
        reader.close()
        writer.close()


def test_a_sample_behind_the_rollups_is_read_back_from_them(store: SeriesStore, clock: Clock) -> None:
    """A backfilled report a day old was stored raw behind the rollups' watermarks: no query read it, and
    the raw tier's retention dropped it (walkthrough AG)."""
    store.append([("c", "m", T0 + i * 10, 1.0) for i in range(3 * 360)])
    clock.t = T0 + 3 * 3600
    store.downsample()
    store.append([("c", "m", T0 + 5, 7.0)])  # late: its minute and its hour are rolled up already
    minute = store.query("c", "m", T0, T0 + 59, 60)
    assert minute == [(T0, pytest.approx((6 * 1.0 + 7.0) / 7))]
    hour = store.query("c", "m", T0, T0 + 3599, 3600)
    assert hour == [(T0, pytest.approx((360 * 1.0 + 7.0) / 361))]
    store.append([("c", "m", T0 + 5, 9.0)])  # the same second again: counted once
    assert store.query("c", "m", T0, T0 + 59, 60) == minute
