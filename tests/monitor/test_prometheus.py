"""PrometheusSeriesReader against httpx.MockTransport.

NOTE: this checks the request we build and the parsing of documented responses only; a test
against a real Prometheus server (fed by a real exporter) is still to come.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from drods.monitor.series import DEFAULT_PROMQL, PrometheusError, PrometheusSeriesReader


def matrix(*series: list[tuple[float, str]]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": {}, "values": list(s)} for s in series]},
    }


def reader(handler: Any, **kw: Any) -> PrometheusSeriesReader:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return PrometheusSeriesReader("http://prom:9090/", client=client, **kw)


async def test_query_range_request_and_parse() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=matrix([(1000, "0.5"), (1060, "0.75"), (1120, "NaN")]))

    rd = reader(handler, templates={"cpu.utilisation": 'x{cluster="$cluster"}'})
    pts = await rd.query("aws-us-east", "cpu.utilisation", 1000, 1120, 60)
    assert pts == [(1000.0, 0.5), (1060.0, 0.75)]
    (req,) = seen
    assert req.url.path == "/api/v1/query_range"
    assert req.url.params["query"] == 'x{cluster="aws-us-east"}'
    assert float(req.url.params["start"]) == 1000 and float(req.url.params["end"]) == 1120
    assert req.url.params["step"] == "60"


async def test_cluster_name_escaped() -> None:
    rd = reader(lambda req: httpx.Response(200, json=matrix()))
    q = rd.promql('evil"}or vector(1)#', "cpu.utilisation")
    assert 'cluster="evil\\"}or vector(1)#"' in q


async def test_long_ranges_are_chunked() -> None:
    calls: list[tuple[float, float]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        s, e = float(req.url.params["start"]), float(req.url.params["end"])
        calls.append((s, e))
        pts = []
        t = s
        while t <= e:
            pts.append((t, "1"))
            t += 10
        return httpx.Response(200, json=matrix(pts))

    rd = reader(handler, max_points=100)
    pts = await rd.query("c", "pods", 0, 2990, 10)
    assert len(calls) == 3
    assert [t for t, _ in pts] == [float(t) for t in range(0, 3000, 10)]


async def test_empty_result() -> None:
    rd = reader(lambda req: httpx.Response(200, json=matrix()))
    assert await rd.query("c", "pods", 0, 100, 10) == []


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}),
        httpx.Response(502, text="bad gateway"),
        httpx.Response(200, json=matrix([(0, "1")], [(0, "2")])),
    ],
)
async def test_errors(response: httpx.Response) -> None:
    rd = reader(lambda req: response)
    with pytest.raises(PrometheusError):
        await rd.query("c", "pods", 0, 100, 10)


async def test_unreachable() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=req)

    with pytest.raises(PrometheusError, match="unreachable"):
        await reader(handler).query("c", "pods", 0, 100, 10)


async def test_unknown_metric_and_bad_step() -> None:
    rd = reader(lambda req: httpx.Response(200, json=matrix()))
    with pytest.raises(KeyError):
        await rd.query("c", "no.such.metric", 0, 100, 10)
    with pytest.raises(ValueError):
        await rd.query("c", "pods", 0, 100, 0)


def test_default_templates_cover_forecast_metrics() -> None:
    assert {"waterLevel", "cpu.utilisation", "memory.utilisation", "network.inMbps"} <= set(DEFAULT_PROMQL)
    for tpl in DEFAULT_PROMQL.values():
        assert "$cluster" in tpl
    json.dumps(DEFAULT_PROMQL)
