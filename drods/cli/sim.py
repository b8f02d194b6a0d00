"""``drods sim …``: run a simulated member cluster, inject faults into a running one, list them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from drods.cli.remote import DEFAULT_SERVER, CaFileOpt, CliError, InsecureOpt, ServerOpt, TokenOpt, connect, fail

app = typer.Typer(help="Simulated member clusters (KWOK-like) for development, tests, demos and benchmarks.",
                  invoke_without_command=True, pretty_exceptions_enable=False)

StateDir = Annotated[Path | None, typer.Option(
    "--state-dir", envvar="DRODS_SIM_DIR", help="Where running sims register (default ~/.drods/sims).")]
LatencyToOpt = Annotated[list[str] | None, typer.Option(
    "--latency-to", help="Emulate distance (C2): probes from site TARGET (header X-Drods-Probe-From) are answered "
    "MS±JITTER ms late and lost with probability P: TARGET=MS[±JITTER][,loss=P] (repeatable).")]
NodeMemoryOpt = Annotated[str, typer.Option("--node-memory", help="Per node: 32Gi, 64G; a bare number is GiB.")]
NodePoolOpt = Annotated[list[str] | None, typer.Option(
    "--node-pool", help="Extra nodes: count=2,cpu=16,memory=64Gi,gpus=4,gpu-model=A100,zone=z (repeatable).")]


def _state_dir(value: Path | None) -> Path:
    from drods.sim.config import default_state_dir

    return value if value is not None else default_state_dir()


@app.callback()
def sim(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option("--name", help="Cluster name (also the node name prefix).")] = None,
    port: Annotated[int, typer.Option("--port", help="API port (0 = any free port).")] = 0,
    control_port: Annotated[int, typer.Option("--control-port", help="Loopback port `drods sim fault` reaches "
                                              "the sim on (0 = any free port).", min=0, max=65535)] = 0,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes of the default shape.")] = 3,
    node_cpu: Annotated[str, typer.Option("--node-cpu", help="Cores per node (8, 7500m).")] = "8",
    node_memory: NodeMemoryOpt = "32Gi",
    gpus: Annotated[int, typer.Option("--gpus", help="nvidia.com/gpu per node.")] = 0,
    gpu_model: Annotated[str | None, typer.Option("--gpu-model", help="Label nvidia.com/gpu.product.")] = None,
    node_pool: NodePoolOpt = None,
    max_pods: Annotated[int, typer.Option("--max-pods", help="Pods per node.")] = 110,
    region: Annotated[str | None, typer.Option("--region", help="Label topology.kubernetes.io/region.")] = None,
    zone: Annotated[str | None, typer.Option("--zone", help="Label topology.kubernetes.io/zone.")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="Label multicluster.io/provider.")] = None,
    city: Annotated[str | None, typer.Option("--city", help="Label multicluster.io/city (e.g. DFW).")] = None,
    preload: Annotated[float, typer.Option("--preload", help="Fill every node to this fraction with another "
                                           "tenant's pods (namespace other-tenant).")] = 0.0,
    reserved_cpu: Annotated[str, typer.Option("--reserved-cpu", help="Per node: capacity - allocatable.")] = "0",
    reserved_memory: Annotated[str, typer.Option("--reserved-memory", help="Per node, e.g. 512Mi.")] = "0Mi",
    cpu_util: Annotated[float, typer.Option("--cpu-utilisation", help="Default pod CPU use / request.")] = 0.5,
    memory_util: Annotated[float, typer.Option("--memory-utilisation", help="Default pod memory use / request.")]
    = 0.6,
    amplitude: Annotated[float, typer.Option("--usage-amplitude", help="Sinusoid amplitude (fraction).")] = 0.0,
    period: Annotated[float, typer.Option("--usage-period", help="Sinusoid period in seconds.")] = 600.0,
    startup: Annotated[float, typer.Option("--startup-seconds", help="Bound pod → Ready after this long.")] = 0.0,
    job_seconds: Annotated[float, typer.Option(
        "--job-seconds", help="A Job pod runs this long (per pod: annotation sim.drods.io/run-seconds; "
        "sim.drods.io/exit-code non-zero fails the pod, and its Job past backoffLimit).")] = 5.0,
    volume_bandwidth: Annotated[float, typer.Option("--volume-bandwidth-mbps", help="How fast a migration's "
                                                    "volume copy pulls from another sim (Mbit/s).")] = 1000.0,
    kubeconfig_out: Annotated[Path | None, typer.Option("--kubeconfig-out", help="Write the kubeconfig here.")]
    = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Store, keys, certs (default STATE_DIR/NAME).")]
    = None,
    state_dir: StateDir = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start from an empty store.")] = False,
    no_tls: Annotated[bool, typer.Option("--no-tls", help="Plain HTTP (kubectl then sends no token).")] = False,
    latency_to: LatencyToOpt = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
) -> None:
    """Run a simulated member cluster in the foreground until SIGTERM/SIGINT.

    Nodes carry the labels topology.kubernetes.io/region|zone, node.kubernetes.io/instance-type,
    multicluster.io/provider, multicluster.io/city and (with GPUs) nvidia.com/gpu.product.
    """
    if ctx.invoked_subcommand is not None:
        return
    if not name:
        raise typer.BadParameter("--name is required to run a sim", param_hint="--name")
    import logging

    from drods.machinery import eventloop
    from drods.model.meta import check_name
    from drods.model.quantity import quantity
    from drods.sim.config import NodePool, SimConfig, UsageModel, parse_cpu, parse_memory
    from drods.sim.distance import parse_latency_to
    from drods.sim.server import serve

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_name(name)
        pools = [NodePool(nodes, parse_cpu(node_cpu), parse_memory(node_memory), gpus, gpu_model, max_pods=max_pods)]
        pools += [NodePool.parse(p) for p in node_pool or []]
        cfg = SimConfig(
            name=name, pools=pools, host=host, port=port, control_port=control_port, region=region, zone=zone,
            provider=provider, city=city,
            preload=preload, reserved_cpu=float(quantity(reserved_cpu)),
            reserved_memory=parse_memory(reserved_memory) if quantity(reserved_memory) else 0,
            usage=UsageModel(cpu_util, memory_util, amplitude, period), startup_seconds=startup,
            job_seconds=job_seconds, volume_bandwidth_mbps=volume_bandwidth, data_dir=data_dir,
            state_dir=_state_dir(state_dir), kubeconfig_out=kubeconfig_out, tls=not no_tls,
            latency_to=dict(parse_latency_to(t) for t in latency_to or []),
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    try:
        eventloop.run(serve(cfg, fresh=fresh))
    except OSError as e:  # the port is taken, the data dir is not writable, …
        typer.echo(f"error: sim {name}: {e}", err=True)
        raise typer.Exit(1) from e


@app.command()
def fault(
    name: Annotated[str, typer.Argument(help="The sim's --name.")],
    mode: Annotated[str, typer.Argument(help="down | up | slow | partition")],
    ms: Annotated[int | None, typer.Argument(help="Delay for slow, in milliseconds.")] = None,
    state_dir: StateDir = None,
) -> None:
    """Inject a fault into a running sim: down (connection refused), partition (requests hang),
    slow MS (every response delayed), up (normal)."""
    from drods.sim.control import send_command

    if mode not in ("down", "up", "slow", "partition"):
        raise typer.BadParameter("mode must be down, up, slow or partition", param_hint="MODE")
    if mode == "slow" and not ms:
        raise typer.BadParameter("slow needs a delay: drods sim fault NAME slow 200", param_hint="MS")
    try:
        reply = send_command(_state_dir(state_dir), name, {"action": "fault", "mode": mode, "ms": ms or 0})
    except (LookupError, OSError, RuntimeError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(json.dumps(reply["fault"]))


@app.command()
def load(
    name: Annotated[str, typer.Argument(help="The sim's --name.")],
    workload: Annotated[str, typer.Argument(help="KIND/NAMESPACE/NAME, e.g. Deployment/default/web.")],
    cpu: Annotated[float | None, typer.Option("--cpu", min=0.0, help="Cores the workload's application "
                                              "needs on this sim, shared by its running pods.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Back to the usage model.")] = False,
    state_dir: StateDir = None,
) -> None:
    """Emulate load: give a workload a CPU demand its running pods share (more replicas, less
    each), shown by metrics.k8s.io, the member summary and /metrics."""
    reply = _set_demand(name, workload, "load", "cpu", cpu, clear, state_dir)
    typer.echo(json.dumps(reply["loads"]))


def _set_demand(name: str, workload: str, action: str, unit: str, value: float | None, clear: bool,
                state_dir: Path | None) -> dict[str, Any]:
    """Send a workload's demand (``load``: cores, ``traffic``: Mbps) to the named sim; its answer."""
    from drods.sim.control import send_command

    parts = workload.split("/")
    if len(parts) != 3 or not all(parts):
        raise typer.BadParameter("expected KIND/NAMESPACE/NAME", param_hint="WORKLOAD")
    if (value is None) == (not clear):
        raise typer.BadParameter(f"give --{unit} N or --clear", param_hint=f"--{unit}")
    try:
        return send_command(_state_dir(state_dir), name, {"action": action, "kind": parts[0],
                                                          "namespace": parts[1], "name": parts[2], unit: value})
    except (LookupError, OSError, RuntimeError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e


@app.command()
def traffic(
    name: Annotated[str, typer.Argument(help="The sim's --name.")],
    workload: Annotated[str, typer.Argument(help="KIND/NAMESPACE/NAME, e.g. Deployment/default/web.")],
    mbps: Annotated[float | None, typer.Option("--mbps", min=0.0, help="Megabits per second (in + out) the "
                                               "workload moves on this sim, shared by its running pods.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Back to the pods' network-mbps annotation.")] = False,
    state_dir: StateDir = None,
) -> None:
    """Emulate a traffic burst: give a workload network traffic its running pods share, shown by the
    kubelet stats summary (/api/v1/nodes/NODE/proxy/stats/summary) and so by the member's status."""
    reply = _set_demand(name, workload, "traffic", "mbps", mbps, clear, state_dir)
    typer.echo(json.dumps(reply["traffic"]))


@app.command("list")
def list_sims(state_dir: StateDir = None) -> None:
    """Running sims (from their state files): name, server, kubeconfig, fault."""
    from drods.sim.control import list_states

    for st in list_states(_state_dir(state_dir)):
        fault_desc = st.get("fault", {})
        typer.echo(f"{st.get('name')}\t{st.get('server')}\t{st.get('kubeconfig')}\t{fault_desc.get('mode', 'up')}")


@app.command()
def latency(
    clients: Annotated[str, typer.Option("--clients", help="Client sites by city code, comma-separated: DFW,LHR.")]
    = "",
    target: Annotated[list[str] | None, typer.Option(
        "--target", help="A cluster or site and its city code: aws-dfw=DFW (repeatable); a bare code is itself.")]
    = None,
    matrix: Annotated[Path | None, typer.Option("--file", help="A matrix file instead of the geography "
                                                "(YAML/JSON: measurements, or delayMs: {from: {to: ms}}).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the geography's route factors and the noise.")] = 0,
    noise: Annotated[float, typer.Option("--noise", help="Each report varies delay and jitter by ±this fraction.")]
    = 0.0,
    interval: Annotated[float, typer.Option("--interval", help="Report every N seconds (0: once).")] = 0.0,
    count: Annotated[int, typer.Option("--count", help="With --interval: stop after N reports (0: forever).")] = 0,
    send: Annotated[bool, typer.Option("--send/--print", help="PUT to the control plane, or print the body.")]
    = False,
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Emulate the network between client sites and clusters (SPEC C2): a site-to-site latency matrix
    from a seeded geography by city code, or from a file, printed or reported to
    PUT /api/v1/network/status, once or every --interval seconds."""
    import random
    import time

    from drods.sim.latency import geography, load_matrix, sample

    try:
        if matrix is not None:
            base = load_matrix(matrix)
        else:
            pairs = {t.partition("=")[0]: (t.partition("=")[2] or t) for t in target or []}
            sites = [c.strip() for c in clients.split(",") if c.strip()]
            if not sites or not pairs:
                raise typer.BadParameter("give --clients and --target (or --file)", param_hint="--clients")
            base = geography(sites, pairs, seed)
    except (ValueError, OSError) as e:
        raise typer.BadParameter(str(e)) from e
    rng = random.Random(seed)
    api = connect(server, token, ca_file, insecure) if send else None
    sent = 0
    while True:
        body = {"measurements": sample(base, rng, noise) if noise else base}
        if api is None:
            typer.echo(json.dumps(body))
        else:
            try:
                reply = api.request("PUT", "/api/v1/network/status", json=body).json()
            except CliError as e:
                fail(e)
            typer.echo(f"reported {reply['accepted']} measurement(s)")
        sent += 1
        if interval <= 0 or (count and sent >= count):
            return
        time.sleep(interval)
