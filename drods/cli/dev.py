"""``drods dev up --clusters N``: a whole DRO-DS playground on this machine, in the foreground.

It starts a control plane (``drods serve`` with TLS) and N simulated member clusters (``drods sim``)
in different regions, providers and city codes, joins them in push mode, writes a kubeconfig for
DRO-DS and one per member plus ``env.sh`` (``DRODS_SERVER``, ``DRODS_CA_FILE``, ``DRODS_TOKEN``,
``DRODS_DATA_DIR``, ``DRODS_SIM_DIR``), prints how to reach everything, and on SIGTERM/SIGINT stops what it started.
Everything lives in ``--data-dir`` (a new temporary directory by default):

    DATA_DIR/server/            the control plane's store and keys, and its drods.yaml (the member
                                controllers' timings from the flags; a profile that spreads by water
                                level even when idle, unless --pack; edits to it are kept across runs);
                                tls/: the CA and serving certificate ``drods serve`` makes
    DATA_DIR/drods.kubeconfig   kubectl → DRO-DS
    DATA_DIR/members/NAME.kubeconfig   kubectl → one member
    DATA_DIR/sims/              the sims' state files (``drods sim fault NAME down`` finds them there)
    DATA_DIR/env.sh             ``source`` it
"""

from __future__ import annotations

import base64
import os
import shlex
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from drods.sim.sites import site

dev_app = typer.Typer(help="A local playground: control plane + simulated member clusters.", no_args_is_help=True)


def _wait_ready(url: str, ca: Path, proc: subprocess.Popen[bytes], timeout: float) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"drods serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1, context=ctx) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready within {timeout:g}s")


def _kubeconfig(server: str, ca: Path, token: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "drods",
            "clusters": [{"name": "drods", "cluster": {"server": server,
                                                       "certificate-authority-data":
                                                           base64.b64encode(ca.read_bytes()).decode()}}],
            "users": [{"name": "drods", "user": {"token": token}}],
            "contexts": [{"name": "drods", "context": {"cluster": "drods", "user": "drods", "namespace": "default"}}]}


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)


# The default profile packs small workloads onto few clusters while the fleet is quiet (S10); an idle
# playground would then show no division at all. This one always spreads by water level (headroom).
SPREAD_PROFILE: dict[str, Any] = {"name": "dev-spread", "adjuster": {"packBelow": 0.0, "spreadAbove": 0.0}}


CONTROL_PLANE_CITY = "DFW"


def emulated_rtt(city: str) -> str:
    """``--latency-to`` for a member in ``city``: the geography's delay from the control plane's city
    (`drods.sim.latency`: DFW–LHR ≈ 86 ms), its jitter, as what the probe should measure."""
    from drods.sim.latency import link

    emulated = link(CONTROL_PLANE_CITY, city)
    return f"{CONTROL_PLANE_CITY}={emulated['delayMs']:.0f}±{emulated['jitterMs']:.1f}"


def write_config(path: Path, probe: float | None, grace: float | None, toleration: float | None,
                 spread: bool) -> None:
    """The playground's drods.yaml: the flags' member-controller timings and (``spread``) the
    spreading profile, over what the file already says (a user's edits survive a restart)."""
    from drods.config import API_VERSION, KIND

    doc: dict[str, Any] = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    doc.update(apiVersion=API_VERSION, kind=KIND)
    members = {k: v for k, v in (("probeIntervalSeconds", probe), ("notReadyGraceSeconds", grace),
                                 ("tolerationSeconds", toleration)) if v is not None}
    if members:
        doc["members"] = {**(doc.get("members") or {}), **members}
    probing = (doc.get("steering") or {}).get("probe") or {}
    if "site" not in probing:  # C2: the control plane measures from DFW (the sims emulate their distance from it)
        doc["steering"] = {**(doc.get("steering") or {}), "probe": {**probing, "site": CONTROL_PLANE_CITY}}
    if spread and "profile" not in (doc.get("scheduler") or {}):
        doc["scheduler"] = {**(doc.get("scheduler") or {}), "profile": SPREAD_PROFILE}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@dev_app.command("up", help=(
    "Start a control plane and N member clusters, join them, and run until SIGTERM/SIGINT.\n\n"
    "The control plane stands in DFW: its probes measure each member's latency from there. Latency from other "
    "client sites (placement by users, CATS steering) is sent with `drods sim latency … --send` "
    "(examples/steering/README.md)."))
def up(
    clusters: Annotated[int, typer.Option("--clusters", min=1, max=64, help="Member clusters to simulate.")] = 3,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Where everything lives (default: a new "
                                                  "temporary directory).")] = None,
    port: Annotated[int, typer.Option("--port", help="Control plane HTTPS port.")] = 8443,
    member_ports: Annotated[int, typer.Option("--member-ports", min=0, max=65535 - 128,
                                              help="First of the members' ports: member i serves its API on "
                                              "START+2i and `drods sim fault` on START+2i+1 (0: any free ports).")]
    = 0,
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes per member.")] = 3,
    even: Annotated[bool, typer.Option("--even", help="No preloaded member (all start empty).")] = False,
    probe_interval: Annotated[float | None, typer.Option("--probe-interval", help="Health probe seconds (5).")]
    = None,
    not_ready_grace: Annotated[float | None, typer.Option("--not-ready-grace", help="NotReady after (15 s).")]
    = None,
    toleration: Annotated[float | None, typer.Option("--toleration", help="Failover after NotReady (30 s).")]
    = None,
    pack: Annotated[bool, typer.Option("--pack", help="Keep the scheduler's default profile (packs while the "
                                       "fleet is quiet) instead of always spreading by water level.")] = False,
) -> None:
    """Start a control plane and N member clusters, join them, and run until SIGTERM/SIGINT."""
    from drods.api.auth import Role
    from drods.cli.remote import connect
    from drods.cli.tokens import mint
    from drods.security.tls import ensure_certs
    from drods.security.trust import SERVER_TLS_DIR
    from drods.sim.harness import SimProcess, drods_command

    root = (data_dir or Path(tempfile.mkdtemp(prefix="drods-dev-"))).resolve()
    for sub in ("server", "members", "sims", "logs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    server_dir = root / "server"
    config = server_dir / "drods.yaml"
    write_config(config, probe_interval, not_ready_grace, toleration, spread=not pack)
    # The CA `drods serve` would make on first start, made now so the kubeconfig can embed it.
    certs = ensure_certs(server_dir / SERVER_TLS_DIR, "drods", "127.0.0.1")
    url = f"https://127.0.0.1:{port}"
    stop = _stop_on_signals()
    sims: list[SimProcess] = []
    server: subprocess.Popen[bytes] | None = None
    code = 0
    try:
        with open(root / "logs" / "server.log", "ab") as log:
            server = subprocess.Popen(
                [*drods_command(), "serve", "--data-dir", str(server_dir), "--config", str(config),
                 "--host", "127.0.0.1", "--port", str(port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        sites = [site(i) for i in range(clusters)]
        for i, s in enumerate(sites):
            sims.append(_start_sim(root, s, nodes, even, member_ports + 2 * i if member_ports else 0))
        _wait_ready(url, certs.ca, server, 60)
        for sim in sims:
            sim.wait_ready(60)
        # recorded in the server's store: `drods token list/revoke --data-dir DATA/server` reach it
        token = mint(server_dir, None, Role.ADMIN, subject="dev")
        api = connect(url, token, str(certs.ca))
        _join(api, sites, sims)
        kubeconfig = root / "drods.kubeconfig"
        _write(kubeconfig, yaml.safe_dump(_kubeconfig(url, certs.ca, token), sort_keys=False))
        _write_env(root, url, certs.ca, token, server_dir)
        typer.echo(_banner(root, url, certs.ca, token, kubeconfig, sites, sims), err=False)
        code = _watch(stop, server, sims, root)
    except (RuntimeError, TimeoutError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        code = 1
    except Exception as e:  # noqa: BLE001 - CliError and friends: report, then clean up below
        typer.echo(f"error: {getattr(e, 'message', None) or e}", err=True)
        code = 1
    finally:
        for sim in sims:
            sim.stop()
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        typer.echo("stopped", err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.add_typer(dev_app, name="dev")


def _join(api: Any, sites: list[Any], sims: list[Any]) -> None:
    """Register each simulated member in push mode with what its API says about itself."""
    import asyncio

    from drods.cli.cluster_ops import inspect_member, load_kubeconfig

    for s, sim in zip(sites, sims, strict=True):
        doc = load_kubeconfig(sim.kubeconfig)
        summary = asyncio.run(inspect_member(s.name, doc, None))
        body: dict[str, Any] = {
            "name": s.name, "syncMode": "Push", "endpoint": sim.server, "region": summary.region,
            "zone": (summary.zones or [s.zone])[0], "provider": summary.provider, "city": summary.city,
            "credentials": {"kubeconfig": yaml.safe_dump(doc, sort_keys=False)},
            "labels": {"provider": s.provider, "city": s.city.lower()}}
        if summary.gpu_allocatable > 0:
            body.update(capabilities=["gpu"], gpuModels=summary.gpu_models)
        api.request("POST", "/api/v1/clusters", json=body, ok=(409,))


def _banner(root: Path, url: str, ca: Path, token: str, kubeconfig: Path, sites: list[Any], sims: list[Any]) -> str:
    lines = [f"DRO-DS is up with {len(sites)} member cluster(s); data in {root}. Stop with Ctrl-C.", "",
             f"  source {root / 'env.sh'}      # DRODS_SERVER, DRODS_CA_FILE, DRODS_TOKEN, DRODS_DATA_DIR …",
             f"  server      {url}", f"  dashboard   {url}/ui   (sign in with the token; the browser must "
             f"trust {ca})", f"  token       {token}",
             f"  kubectl --kubeconfig {kubeconfig} get clusters", "", "  members:"]
    for s, sim in zip(sites, sims, strict=True):
        lines.append(f"    {s.name:<12} {s.region}/{s.provider}/{s.city:<4} {sim.server:<26} "
                     f"kubectl --kubeconfig {root / 'members' / f'{s.name}.kubeconfig'} get deploy")
    lines += ["", f"  network from {CONTROL_PLANE_CITY} (C2, emulated by the sims, measured by the probe): "
              + ", ".join(f"{s.name} {emulated_rtt(s.city).partition('=')[2]} ms" for s in sites),
              f"  curl -s --cacert {ca} -H \"Authorization: Bearer $DRODS_TOKEN\" {url}/api/v1/network/status"]
    return "\n".join(lines)


def _watch(stop: threading.Event, server: subprocess.Popen[bytes], sims: list[Any], root: Path) -> int:
    """Run until stopped (0) or until the server or a member exits (1)."""
    while not stop.wait(0.5):
        if server.poll() is not None:
            typer.echo(f"drods serve exited with {server.returncode}; see {root / 'logs' / 'server.log'}", err=True)
            return 1
        dead = [s.name for s in sims if s.proc is not None and s.proc.poll() is not None]
        if dead:
            typer.echo(f"member(s) exited: {', '.join(dead)}; see {root / 'logs'}", err=True)
            return 1
    return 0


def _start_sim(root: Path, s: Any, nodes: int, even: bool, port: int) -> Any:
    """The member ``s`` (``port``: its API's, the next one its fault control's; 0: any free ones)."""
    from drods.sim.harness import SimProcess

    extra = [*s.extra, *(["--preload", str(s.preload)] if s.preload and not even else []),
             *(["--port", str(port), "--control-port", str(port + 1)] if port else [])]
    return SimProcess(s.name, root / "sims", [
        "--region", s.region, "--zone", s.zone, "--provider", s.provider, "--city", s.city,
        "--nodes", str(nodes), "--data-dir", str(root / "sims" / s.name),
        "--kubeconfig-out", str(root / "members" / f"{s.name}.kubeconfig"), "--latency-to", emulated_rtt(s.city),
        *extra],
        log_path=root / "logs" / f"{s.name}.log").start()


def _write_env(root: Path, url: str, ca: Path, token: str, server_dir: Path) -> None:
    env = {"DRODS_SERVER": url, "DRODS_CA_FILE": str(ca), "DRODS_TOKEN": token,
           "DRODS_SIM_DIR": str(root / "sims"), "DRODS_DEV": str(root),
           "DRODS_DATA_DIR": str(server_dir)}  # `drods token create` signs with the server's key
    _write(root / "env.sh", "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))


def _stop_on_signals() -> threading.Event:
    """Set on SIGTERM or SIGINT."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop
