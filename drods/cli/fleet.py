"""``drods sim fleet``: N simulated member clusters from one process (`drods.sim.fleet`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def fleet(
    clusters: Annotated[int, typer.Option("--clusters", min=1, help="How many member clusters.")],
    out: Annotated[Path, typer.Option("--out", help="Each member's data and kubeconfig under OUT/NAME; "
                                      "OUT/fleet.yaml lists them once all serve.")],
    nodes_per_cluster: Annotated[int, typer.Option("--nodes-per-cluster", min=1, help="Nodes per member.")] = 3,
    node_cpu: Annotated[str, typer.Option("--node-cpu", help="Cores per node (8, 7500m).")] = "8",
    node_memory: Annotated[str, typer.Option("--node-memory", help="Per node: 32Gi, 64G; a bare number is GiB.")]
    = "32Gi",
    max_pods: Annotated[int, typer.Option("--max-pods", help="Pods per node.")] = 110,
    prefix: Annotated[str, typer.Option("--prefix", help="Member names PREFIX-aws-dfw, …; default aws-dfw, …")]
    = "",
    startup: Annotated[float, typer.Option("--startup-seconds", help="Bound pod → Ready after this long.")] = 0.0,
    resync: Annotated[float, typer.Option("--resync-seconds", min=0.5, help="Each member's controller passes "
                                          "at least this often without a change (changes wake it at once).")]
    = 30.0,
    base_port: Annotated[int, typer.Option("--base-port", help="Member i serves on BASE_PORT + i (0: any free "
                                           "port; a restart keeps each member's last one when free).")] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start every member from an empty store.")] = False,
    no_tls: Annotated[bool, typer.Option("--no-tls", help="Plain HTTP (kubectl then sends no token).")] = False,
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
) -> None:
    """Serve N simulated member clusters from one process until SIGTERM/SIGINT, each with its own
    API endpoint and kubeconfig (OUT/NAME/kubeconfig), members like `drods sim`'s; join them all
    with `drods cluster join --from OUT`, inject faults with `drods sim fault NAME … --state-dir OUT`."""
    import logging

    from drods.machinery import eventloop
    from drods.model.meta import check_name
    from drods.sim.config import NodePool, SimConfig, parse_cpu, parse_memory
    from drods.sim.fleet import FleetConfig, serve_fleet

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if prefix:
            check_name(f"{prefix}-x")
        pool = NodePool(nodes_per_cluster, parse_cpu(node_cpu), parse_memory(node_memory), max_pods=max_pods)
        template = SimConfig(name="template", pools=[pool], startup_seconds=startup, state_dir=out,
                             tls=not no_tls, resync_seconds=resync)
        cfg = FleetConfig(clusters=clusters, out=out.resolve(), template=template, prefix=prefix,
                          base_port=base_port)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    try:
        eventloop.run(serve_fleet(cfg, fresh=fresh))
    except OSError as e:
        typer.echo(f"error: fleet: {e}", err=True)
        raise typer.Exit(1) from e


def register(app: typer.Typer) -> None:
    """``fleet`` joins the ``drods sim`` verbs (fault, load, list)."""
    from drods.cli.sim import app as sim_app

    sim_app.command("fleet")(fleet)
