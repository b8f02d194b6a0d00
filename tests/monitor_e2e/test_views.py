"""Realtime view and its watch stream, metric and failure history, /metrics, forecast (SQLite)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from drods.model.keys import FAILURES_PREFIX
from drods.model.kinds import CLUSTER
from drods.monitor.history import append
from tests.monitor_e2e.conftest import Mon, eventually, node_report


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


async def set_ready(mon: Mon, name: str, ready: bool) -> None:
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "Test",
            "lastTransitionTime": rfc3339(mon.clock())}
    await mon.ctx.registry.update_status(CLUSTER, name, {"conditions": [cond]})


async def test_a_clusters_ready_in_the_view_is_its_condition_unknown_until_a_controller_says(mon_sqlite: Mon) -> None:
    mon = mon_sqlite
    for name in ("up", "down", "unheard"):
        await mon.register(name)
    await set_ready(mon, "up", True)
    await set_ready(mon, "down", False)

    async def ready_when_set() -> dict[str, bool | None] | None:
        clusters = (await mon.call("GET", "/api/v1/monitor/realtime", role="viewer")).json()["clusters"]
        ready = {c: d["ready"] for c, d in clusters.items()}
        return ready if ready["up"] is True and ready["down"] is False else None

    assert await eventually(ready_when_set, what="the conditions in the view") == {
        "up": True, "down": False, "unheard": None}


async def test_realtime_view_and_watch_stream(mon_sqlite: Mon) -> None:
    mon = mon_sqlite
    await mon.register("a")
    await mon.register("b")
    await mon.register("silent")
    assert (await mon.report("a", **node_report(50, pods=1000, net_in=500, net_out=300))).status_code == 200
    assert (await mon.report("b", **node_report(30, cores=192, pods=1450, net_in=250, net_out=150))).status_code == 200

    r = await mon.call("GET", "/api/v1/monitor/realtime", role="viewer")
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["activeClusters"] == 2 and view["totalPods"] == 2450
    assert view["networkTraffic"] == "1.2Gbps" and view["networkTrafficMbps"] == 1200
    assert view["unhealthyClusters"] == ["silent"]
    assert view["waterLevel"]["clusters"] == {"a": 0.5, "b": 0.3, "silent": None}
    assert abs(view["waterLevel"]["fleet"] - (32 + 57.6) / 256) < 1e-9  # capacity-weighted CPU (the binding one)
    assert view["clusters"]["a"]["active"] and view["clusters"]["a"]["reportAgeSeconds"] == 0
    # never heard from, and no controller has said anything: not claimed ready (its condition is Unknown)
    assert view["clusters"]["silent"]["ready"] is None and not view["clusters"]["silent"]["active"]

    async with mon.client.stream("GET", "/api/v1/monitor/realtime", params={"watch": "true", "timeoutSeconds": 30},
                                 headers=mon.auth("viewer")) as stream:
        assert stream.headers["content-type"].startswith("application/x-ndjson")
        lines = stream.aiter_lines()

        async def next_view() -> dict[str, Any]:
            return json.loads(await asyncio.wait_for(anext(lines), 10))  # type: ignore[arg-type]

        first = await next_view()
        assert first["totalPods"] == 2450
        # A report that changes the visible status (after the 30 s rate-control interval): the
        # stream wakes from the store watch.
        mon.clock.advance(30)
        assert (await mon.report("b", **node_report(30, cores=192, pods=1550, net_in=250, net_out=150))).json()[
            "published"]
        changed = await next_view()
        assert changed["totalPods"] == 2550
        # A controller marks b not Ready: the cluster object's watch wakes the stream too.
        await set_ready(mon, "b", False)
        changed = await next_view()
        assert changed["unhealthyClusters"] == ["b", "silent"] and changed["activeClusters"] == 1

    async def not_ready() -> list[dict[str, Any]] | None:
        r = await mon.call("GET", "/api/v1/history/failures", params={"kind": "ClusterNotReady"})
        return r.json()["items"] or None

    (entry,) = await eventually(not_ready, what="ClusterNotReady entry")
    assert entry["cluster"] == "b" and entry["details"]["conditions"][0]["status"] == "False"

    # Silence: a cluster that stops reporting becomes unhealthy and a StaleReports entry is logged once.
    mon.clock.advance(mon.svc.settings.staleAfterSeconds + 1)

    async def stale() -> list[str] | None:
        r = await mon.call("GET", "/api/v1/history/failures", params={"kind": "StaleReports"})
        found = sorted(e["cluster"] for e in r.json()["items"])
        return found if len(found) >= 2 else None

    assert await eventually(stale, what="StaleReports entries") == ["a", "b"]
    view = (await mon.call("GET", "/api/v1/monitor/realtime")).json()
    assert view["activeClusters"] == 0


async def test_realtime_shows_the_latest_report_while_the_scheduler_keeps_its_damped_view(mon: Mon) -> None:
    await mon.register("burst")
    assert (await mon.report("burst", **node_report(40))).json()["published"]
    # A burst within rate control's minimum interval: nothing more is published for the scheduler.
    for pct in (55, 70, 62):
        mon.clock.advance(1)
        r = await mon.report("burst", **node_report(pct))
        assert r.status_code == 200 and not r.json()["published"], r.text

    async def latest() -> dict[str, Any] | None:
        """The view is fed by this replica's watch of the store: it shows the last report a moment later."""
        view: dict[str, Any] = (await mon.call("GET", "/api/v1/monitor/realtime", role="viewer")).json()
        return view if view["waterLevel"]["clusters"].get("burst") == 0.62 else None

    view = await eventually(latest, what="the realtime view showing the last report")
    assert view["clusters"]["burst"]["waterLevel"] == 0.62
    assert view["clusters"]["burst"]["schedulerWaterLevel"] == 0.4
    assert view["clusters"]["burst"]["reportAgeSeconds"] == 0
    doc = json.loads((await mon.store.get("/status/clusters/burst")).value)  # type: ignore[union-attr]
    assert doc["status"]["waterLevel"] == 0.4 and doc["latest"]["waterLevel"]["value"] == 0.4


async def test_metric_history_and_its_422s(mon_sqlite: Mon) -> None:
    mon = mon_sqlite
    await mon.register("h")
    start = (int(mon.clock()) // 300 + 1) * 300  # aligned to 5 minutes
    mon.clock.t = start - 10
    for i in range(60):  # 10 minutes, every 10 s; CPU steps up by 5 % each minute
        mon.clock.advance(10)
        assert (await mon.report("h", **node_report(20 + 5 * (i // 6)))).status_code == 200
    await mon.svc.flush(force=True)
    q = {"cluster": "h", "metric": "cpu.utilisation", "startTime": rfc3339(start),
         "endTime": rfc3339(start + 599), "step": "1m"}
    r = await mon.call("GET", "/api/v1/history/metrics", params=q, role="viewer")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"] == "local" and body["step"] == "1m" and body["stepSeconds"] == 60
    assert [round(p["value"], 3) for p in body["points"]] == [round(0.2 + 0.05 * k, 3) for k in range(10)]
    assert body["points"][0]["time"] == rfc3339(start)
    r = await mon.call("GET", "/api/v1/history/metrics", params=q | {"step": "5m"})
    assert [round(p["value"], 3) for p in r.json()["points"]] == [0.3, 0.55]
    r = await mon.call("GET", "/api/v1/history/metrics", params={"cluster": "h", "metric": "waterLevel"})
    assert r.json()["step"] == "10s" and len(r.json()["points"]) == 60  # default: last hour

    async def fails(params: dict[str, Any], field: str, status: int = 422) -> dict[str, Any]:
        r = await mon.call("GET", "/api/v1/history/metrics", params=params)
        assert r.status_code == status, r.text
        body: dict[str, Any] = r.json()
        if status == 422:
            assert body["code"] == "VALIDATION_FAILED"
            assert body["details"]["fields"][0]["field"].endswith(field), body
        return body

    await fails(q | {"step": "5x"}, "step")
    await fails(q | {"step": "0s"}, "step")
    late = await fails(q | {"endTime": "9999-12-31T23:59:59Z"}, "endTime")  # the message says which bound
    assert late["details"]["fields"][0]["message"] == "must be between 1970-01-01 and 9999-12-23", late
    r = await mon.call("GET", "/api/v1/monitor/forecast", params={"cluster": "h", "minutes": "nan"})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"].endswith("minutes"), r.text
    await fails(q | {"startTime": "yesterday"}, "startTime")
    await fails(q | {"startTime": rfc3339(start + 600)}, "startTime")  # after endTime
    await fails(q | {"step": "1s", "startTime": rfc3339(start - 86_400)}, "step")  # > 11000 points
    body = await fails(q | {"metric": "cpu.temperature"}, "metric")
    assert "waterLevel" in body["details"]["allowed"]
    await fails({"metric": "waterLevel"}, "cluster")
    await fails(q | {"source": "prometheus"}, "source")  # no spec.prometheus on this cluster
    r = await mon.call("GET", "/api/v1/history/metrics", params=q | {"cluster": "ghost"})
    assert r.status_code == 404 and r.json()["code"] == "CLUSTER_NOT_FOUND"

    # Forecast (F6) from that history, the same object the scheduler's adjuster gets.
    r = await mon.call("GET", "/api/v1/monitor/forecast", params={"cluster": "h", "minutes": 30})
    assert r.status_code == 200, r.text
    assert r.json()["waterLevel"] is not None and 0 <= r.json()["waterLevel"] <= 1
    assert mon.svc.forecaster.water_level_in("h", 30) == r.json()["waterLevel"]
    assert r.json()["method"] in ("holt_winters", "holt", "last_value") and r.json()["fittedAt"], r.json()
    r = await mon.call("GET", "/api/v1/monitor/forecast", params={"cluster": "h", "minutes": 7 * 24 * 60})
    assert r.json()["waterLevel"] is None and r.json()["reason"].startswith("past the forecast's horizon"), r.json()


async def test_failure_history_window_limit_and_shared_shape(mon_sqlite: Mon) -> None:
    mon = mon_sqlite
    t0 = int(mon.clock()) - 3 * 86_400
    for i in range(30):  # three days of entries, some as the scheduler writes them
        await append(mon.store, FAILURES_PREFIX, "Unschedulable" if i % 3 else "StaleReports",
                     f"entry {i}", ts=t0 + i * 8640, cluster=f"c{i % 2}",
                     binding="default/web" if i % 3 else None, details={"i": i})
    r = await mon.call("GET", "/api/v1/history/failures", role="viewer")
    body = r.json()
    assert len(body["items"]) == 30 and body["truncated"] is False
    assert [e["details"]["i"] for e in body["items"]] == list(range(29, -1, -1))  # newest first
    assert set(body["items"][0]) == {"time", "kind", "cluster", "binding", "reason", "details"}
    r = await mon.call("GET", "/api/v1/history/failures", params={"maxEntries": 5})
    assert [e["details"]["i"] for e in r.json()["items"]] == [29, 28, 27, 26, 25] and r.json()["truncated"]
    window = {"startTime": rfc3339(t0 + 10 * 8640), "endTime": rfc3339(t0 + 19 * 8640)}
    r = await mon.call("GET", "/api/v1/history/failures", params=window)
    assert [e["details"]["i"] for e in r.json()["items"]] == list(range(19, 9, -1))
    r = await mon.call("GET", "/api/v1/history/failures", params=window | {"kind": "Unschedulable", "cluster": "c1"})
    assert [e["details"]["i"] for e in r.json()["items"]] == [19, 17, 13, 11]
    r = await mon.call("GET", "/api/v1/history/failures", params={"maxEntries": 0})
    assert r.status_code == 422
    r = await mon.call("GET", "/api/v1/history/failures", params={"endTime": "not-a-time"})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "endTime"
    # Retention pruning drops whole old days.
    mon.svc.settings.failureRetentionDays = 1.5
    assert await mon.svc.prune_history() >= 10
    r = await mon.call("GET", "/api/v1/history/failures")
    assert min(e["details"]["i"] for e in r.json()["items"]) >= 15


async def test_prometheus_exposition_of_the_fleet(mon_sqlite: Mon) -> None:
    mon = mon_sqlite
    await mon.register("a")
    await mon.register("b")
    assert (await mon.report("a", **node_report(50, pods=7))).status_code == 200
    await set_ready(mon, "b", False)

    async def scraped() -> str | None:
        text = (await mon.call("GET", "/metrics", role="viewer")).text
        return text if 'drods_cluster_ready{cluster="b"} 0.0' in text else None

    text = await eventually(scraped, what="readiness in /metrics")
    for line in (
        'drods_cluster_water_level{cluster="a"} 0.5',
        'drods_cluster_ready{cluster="a"} 1.0',
        'drods_cluster_active{cluster="a"} 1.0',
        'drods_cluster_capacity{cluster="a",resource="cpu"} 64.0',
        'drods_cluster_used{cluster="a",resource="memory"} 64.0',
        'drods_cluster_pods{cluster="a"} 7.0',
        'drods_cluster_report_age_seconds{cluster="a"} 0.0',
        'drods_cluster_network_mbps{cluster="a",direction="in"} 100.0',
        "drods_fleet_water_level 0.5",
        "drods_fleet_active_clusters 1.0",
        'drods_monitor_reports_total{result="accepted",source="push"} 1.0',
        'drods_monitor_status_writes_total{reason="changed"} 1.0',
        "drods_monitor_rate_control_suppressed_total 0.0",
    ):
        assert line in text, (line, [x for x in text.splitlines() if x.startswith(line.split("{")[0].split()[0])])
    assert "drods_apiserver_requests_total" in text  # the API server's own registry is still there
    # the report age counts from the last report, also one the rate control kept from the scheduler's view
    # (its status not rewritten: the age grew past a healthy cluster's interval); traffic never measured
    # has no series, not a made-up 0
    await mon.register("c")
    mon.clock.advance(20)
    report = {k: v for k, v in node_report(50, pods=7).items() if not k.startswith("network")}
    assert (await mon.report("a", **node_report(50, pods=7))).status_code == 200
    assert (await mon.report("c", **report)).status_code == 200
    text = (await mon.call("GET", "/metrics", role="viewer")).text
    assert 'drods_cluster_report_age_seconds{cluster="a"} 0.0' in text, \
        [x for x in text.splitlines() if x.startswith("drods_cluster_report_age")]
    assert 'drods_cluster_pods{cluster="c"} 7.0' in text and 'drods_cluster_network_mbps{cluster="c"' not in text


async def test_drods_top_clusters_once(mon_sqlite: Mon) -> None:
    from typer.testing import CliRunner

    from drods.cli.main import app

    mon = mon_sqlite
    await mon.register("east", waterLevelLimit=0.8)
    await mon.register("west")
    assert (await mon.report("east", **node_report(85, pods=120, net_in=900, net_out=300))).status_code == 200
    args = ["top", "clusters", "--once", "--server", mon.url, "--token", mon.tokens["viewer"]]
    result = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("fleet 1/2 active · 120 pods · 1.2Gbps · water level ")
    header = lines[1].split()
    assert header[:3] == ["NAME", "READY", "WATER"]
    east = next(line for line in lines if line.startswith("east"))
    assert "█" in east and "85%" in east and "54.4/64" in east and "64/256" in east and "120" in east
    assert "900Mbps/300Mbps" in east and east.rstrip().endswith("0s")
    west = next(line for line in lines if line.startswith("west"))
    assert "Unknown" in west  # never heard from
    await set_ready(mon, "west", True)  # a controller says Ready, and yet no report comes

    async def west_line() -> str | None:
        out = (await asyncio.to_thread(CliRunner().invoke, app, args)).output
        line = next(x for x in out.splitlines() if x.startswith("west"))
        return line if "True" in line else None

    assert "True (stale)" in await eventually(west_line, what="west's condition in drods top")

    # not on a terminal (a script's capture) it prints once and exits without --once, as kubectl top
    piped = await asyncio.to_thread(CliRunner().invoke, app, [a for a in args if a != "--once"])
    assert piped.exit_code == 0 and piped.output.splitlines()[1].split()[:3] == ["NAME", "READY", "WATER"]

    result = await asyncio.to_thread(CliRunner().invoke, app, [*args[:-1], "not-a-token"])
    assert result.exit_code == 1 and "401" in result.output
