"""``drods top clusters``: a live table of the fleet as the scheduler sees it (like ``kubectl top``);
``drods top workloads``: each workload's measured use per cluster (like ``kubectl top pods``).

Reads GET /api/v1/monitor/realtime (readiness, activity, report age, fleet totals) and
GET /api/v1/clusters (each cluster's scheduler-visible status), so it shows exactly what
placement decisions use. It refreshes on a terminal; ``--once``, or an output that is not a terminal
(a pipe, a script's capture), prints one table and exits.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from drods.cli.remote import (
    ApiClient,
    CaFileOpt,
    CliError,
    InsecureOpt,
    ServerOpt,
    TokenOpt,
    connect,
    fail,
    print_table,
    stdout,
)

app = typer.Typer(help="Live resource use of the fleet, as the scheduler sees it.", no_args_is_help=True)

_BLOCKS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float | None, width: int = 10) -> str:
    """``0.37`` → ``███▋      `` (eighth-block resolution)."""
    if fraction is None:
        return " " * width
    f = min(max(fraction, 0.0), 1.0) * width
    full = int(f)
    rest = int(round((f - full) * 8))
    if rest == 8:
        full, rest = full + 1, 0
    out = "█" * full + (_BLOCKS[rest] if full < width and rest else "")
    return out.ljust(width)


def _colour(fraction: float | None, limit: float) -> str:
    if fraction is None:
        return "dim"
    return "red" if fraction >= limit else "yellow" if fraction >= limit - 0.1 else "green"


def _num(v: Any) -> str:
    if v is None:
        return "-"
    f = float(v)
    return f"{f:.0f}" if f >= 100 or f == int(f) else f"{f:.1f}"


def _pair(section: Any) -> str:
    if not isinstance(section, dict) or section.get("capacity") is None:
        return "-"
    return f"{_num(section.get('used'))}/{_num(section.get('capacity'))}"


def _mbps(v: float) -> str:
    from drods.monitor.fleet import format_bitrate

    return format_bitrate(v)


def _age(seconds: Any) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def fetch(api: ApiClient) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return api.get_json("/api/v1/monitor/realtime"), api.get_json("/api/v1/clusters").get("items", [])


def render(realtime: dict[str, Any], clusters: list[dict[str, Any]]) -> Group:
    from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT

    details: dict[str, Any] = realtime.get("clusters") or {}
    fleet_wl = (realtime.get("waterLevel") or {}).get("fleet")
    total = len(details) or len(clusters)
    head = Text.assemble(
        ("fleet ", "bold"), f"{realtime.get('activeClusters', 0)}/{total} active · ",
        f"{realtime.get('totalPods', 0)} pods · {realtime.get('networkTraffic') or 'unknown'} · water level ",
        (bar(fleet_wl), _colour(fleet_wl, DEFAULT_WATER_LEVEL_LIMIT)),
        f" {'-' if fleet_wl is None else f'{fleet_wl:.0%}'}",
    )
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    names = [str(c.get("name")) for c in clusters]
    table.add_column("NAME", no_wrap=True, min_width=max([4, *map(len, names)]))  # never truncate names
    table.add_column("READY", no_wrap=True, min_width=5)
    table.add_column("WATER LEVEL", no_wrap=True, min_width=15)
    for col in ("CPU (cores)", "MEMORY (GiB)", "GPU", "PODS", "NETWORK IN/OUT", "REPORT AGE"):
        table.add_column(col, no_wrap=True)
    for c in sorted(clusters, key=lambda c: str(c.get("name"))):
        name = str(c.get("name"))
        d = details.get(name) or {}
        res = (c.get("status") or {}).get("resources") or {}
        wl = res.get("waterLevel", d.get("waterLevel"))
        limit = float(c.get("waterLevelLimit") or DEFAULT_WATER_LEVEL_LIMIT)
        condition = d.get("ready")  # the Ready condition: True, False, None while Unknown
        ready = "Unknown" if condition is None else str(bool(condition))
        if d.get("ready") and not d.get("active"):
            ready += " (stale)"
        pods = res.get("pods") or {}
        pods_s = "-" if pods.get("used") is None else (
            f"{pods['used']}" + (f"/{_num(pods['capacity'])}" if pods.get("capacity") is not None else ""))
        net = res.get("network") or {}
        net_s = f"{_mbps(float(net.get('inMbps') or 0))}/{_mbps(float(net.get('outMbps') or 0))}" if net else "-"
        wl_cell = Text.assemble((bar(wl), _colour(wl, limit)), f" {'-' if wl is None else f'{wl:.0%}'}")
        table.add_row(name, ready, wl_cell, _pair(res.get("cpu")), _pair(res.get("memory")), _pair(res.get("gpu")),
                      pods_s, net_s, _age(d.get("reportAgeSeconds")))
    return Group(head, table)


@app.command("clusters")
def top_clusters(
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
    once: Annotated[bool, typer.Option("--once", help="Print one table and exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between refreshes.")] = 2.0,
) -> None:
    """Water level, CPU, memory, pods, network and report age of every cluster, refreshing on a terminal."""
    api = connect(server, token, ca_file, insecure)
    try:
        if once or not sys.stdout.isatty():
            console = stdout()
            with console.capture() as captured:
                console.print(render(*fetch(api)))
            typer.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
            return
        with Live(render(*fetch(api)), console=Console(), auto_refresh=False, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(render(*fetch(api)), refresh=True)
    except CliError as e:
        fail(e)
    except KeyboardInterrupt:
        pass
    finally:
        api.close()


BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"


def _used_of(usage: dict[str, Any], resource: str) -> str:
    part = usage.get(resource)
    return f"{part.get('used')}/{part.get('requested')}" if isinstance(part, dict) else "<unknown>"


def workload_rows(bindings: list[dict[str, Any]], namespace: str | None) -> list[list[Any]]:
    """One row per workload and cluster: its pods' measured use there (``status.clusters[].usage``)."""
    rows: list[list[Any]] = []
    for b in bindings:
        res = (b.get("spec") or {}).get("resource") or {}
        ns = res.get("namespace") or "default"
        if namespace is not None and ns != namespace:
            continue
        for e in (b.get("status") or {}).get("clusters") or []:
            usage = e.get("usage") if isinstance(e, dict) else None
            if not isinstance(usage, dict):
                continue
            rows.append([ns, f"{res.get('kind')}/{res.get('name')}", e.get("cluster"), _used_of(usage, "cpu"),
                         _used_of(usage, "memory"), f"{usage.get('readyPods', 0)}/{usage.get('pods', 0)}"])
    return sorted(rows, key=lambda r: (r[0], r[1], str(r[2])))


@app.command("workloads")
def top_workloads(
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Only this namespace's workloads.")]
    = None,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """CPU and memory used/requested by each workload's ready pods, one line per workload and cluster
    (like kubectl top pods), measured from the members' metrics.k8s.io; <unknown> where a member
    serves no metrics."""
    api = connect(server, token, ca_file, insecure)
    try:
        bindings = api.get_json(BINDINGS).get("items", [])
        print_table(["NAMESPACE", "WORKLOAD", "CLUSTER", "CPU(used/req)", "MEMORY(used/req)", "PODS(ready)"],
                    workload_rows(bindings, namespace))
    except CliError as e:
        fail(e)
    finally:
        api.close()
