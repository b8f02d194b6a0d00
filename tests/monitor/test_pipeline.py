from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from drods.monitor import report as r
from drods.monitor.pipeline import MonitorPipeline
from drods.monitor.report import MetricsReport
from drods.monitor.series import AsyncSeriesStore, SeriesStore
from drods.monitor.thresholds import SustainedDetector

T0 = 1_700_006_400.0


def rep(t: float, cpu: float, cluster: str = "c1") -> MetricsReport:
    return MetricsReport.model_validate(
        {
            "cluster": cluster,
            "timestamp": datetime.fromtimestamp(t, UTC),
            "cpuCapacity": 64,
            "cpuUsage": cpu,
            "memoryCapacity": 256,
            "memoryAvailable": 200,
            "networkIn": 100,
            "networkOut": 100,
            "pods": 10,
            "flavour": "extra",
        }
    )


def test_pipeline_end_to_end(tmp_path: Path) -> None:
    now = [T0]
    series = SeriesStore(tmp_path / "h.db", clock=lambda: now[0])
    p = MonitorPipeline(
        series=series, sustained=[SustainedDetector(r.WATER_LEVEL, 0.8, duration_s=60)], clock=lambda: now[0]
    )
    ups = downs = 0
    sustained = []
    visible_wl = []
    for i in range(30):
        t = T0 + i * 10
        now[0] = t
        cpu = 50.0 if i < 10 else (90.0 if i < 20 else 40.0)
        res = p.ingest(rep(t, cpu))
        assert res.rejection is None and res.visible is not None
        ups += sum(e.direction == "up" for e in res.events)
        downs += sum(e.direction == "down" for e in res.events)
        sustained += res.sustained
        visible_wl.append(res.visible.water_level)
    # cpu.utilisation ≥ 0.7, waterLevel ≥ 0.8 and ≥ 0.9 all crossed up, then down
    assert ups == 3 and downs == 3
    assert [e.kind for e in sustained] == ["sustained", "cleared"]
    # rate control: the visible water level moved at most once per 30 s
    assert len({v for v in visible_wl}) <= 3
    assert p.visible["c1"].extras == {"flavour": "extra"}
    # stale report rejected, nothing buffered for it
    res = p.ingest(rep(T0, 50.0))
    assert res.rejection is not None and res.rejection.code == "OUT_OF_ORDER_REPORT"
    assert p.flush() == 30 * (len(r.METRICS) - 10)  # no gpu/storage/largestNodeFree/requestRate
    pts = series.query("c1", r.CPU_UTILISATION, T0, T0 + 300, 100)
    assert [round(v, 2) for _, v in pts] == [0.5, 0.9, 0.4]
    p.forget("c1")
    assert "c1" not in p.visible
    series.close()


async def test_async_flush(tmp_path: Path) -> None:
    store = AsyncSeriesStore(SeriesStore(tmp_path / "h.db", clock=lambda: T0))
    p = MonitorPipeline(clock=lambda: T0)
    p.ingest(rep(T0, 10))
    assert await p.aflush(store) == 10
    assert await p.aflush(store) == 0
    await store.close()
