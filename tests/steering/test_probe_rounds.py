"""A network-probe round starts its targets one after another over most of the interval, not all at
once: a hundred members probed together held their answers to the controllers back for seconds."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from drods.members.probe import ProbeResult
from drods.steering import probing
from drods.steering.settings import ProbeSettings


async def test_a_round_spreads_its_targets_over_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[float] = []
    written: list[Any] = []

    async def probe(target: str, url: str, site: str, count: int, _timeout: float) -> ProbeResult:
        started.append(time.monotonic())
        return ProbeResult(target, 10.0, 1.0, 0.0, count, time.time())

    async def write(store: Any, items: list[Any], clock: Any) -> None:
        written.extend(items)

    monkeypatch.setattr(probing, "probe", probe)
    monkeypatch.setattr(probing, "write_measurements", write)
    clusters = {f"/clusters/c{i}": {"metadata": {"name": f"c{i}"}, "spec": {"endpoint": f"https://c{i}"}}
                for i in range(5)}
    interval = 2.0
    prober = probing.NetworkProber(None, SimpleNamespace(cache=clusters),  # type: ignore[arg-type]
                                   ProbeSettings(intervalSeconds=interval))
    await prober.step()
    assert sorted(m.to for m in written) == [f"c{i}" for i in range(5)]  # one write of the whole round
    spacing = probing.SPREAD * interval / 5
    # a busy machine can only start a probe late, never early (a timer may fire up to a millisecond
    # before its time): each start is at or after its slot, and the round still ends within its interval
    slots = [prober.round_started + k * spacing for k in range(5)]
    assert len(started) == 5 and all(t >= slot - 0.002 for t, slot in zip(started, slots, strict=True)), \
        [round(t - prober.round_started, 3) for t in started]
    assert started[-1] < prober.round_started + interval
