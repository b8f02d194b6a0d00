"""``drods agent``: run a member cluster's agent in the foreground: metrics (`drods.members.agent`) and,
for a pull-mode cluster, its Works (`drods.members.works`), in one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from drods.cli.remote import DEFAULT_SERVER, CaFileOpt, InsecureOpt, ServerOpt, TokenOpt, tls_verify

ClusterOpt = Annotated[str | None, typer.Option("--cluster", "-c", help="The cluster's name in DRO-DS.")]
KubeconfigOpt = Annotated[str | None, typer.Option("--kubeconfig", envvar="KUBECONFIG",
                                                   help="Kubeconfig of the member cluster to read.")]
FromDirOpt = Annotated[Path | None, typer.Option(
    "--from", help="Run the agents of every member in DIR/agents.yaml (`drods cluster join --from DIR "
    "--pull`), each with its own token; caches under --state-dir/CLUSTER.")]
ContextOpt = Annotated[str | None, typer.Option("--context", help="Kubeconfig context.")]
IntervalOpt = Annotated[float, typer.Option(
    "--interval", min=1.0, help="Seconds between reports until the server names another interval "
    "(nextReportSeconds).")]
OnceOpt = Annotated[bool, typer.Option("--once", help="Send one report, print the answer and exit.")]
StateDirOpt = Annotated[Path | None, typer.Option(
    "--state-dir", help="Where the last desired state (the cluster's Works) is cached; default "
    "~/.drods/agent/CLUSTER.")]
AutonomyOpt = Annotated[bool, typer.Option(
    "--autonomy/--no-autonomy", help="Cut off from the control plane, scale autoscaled workloads within their "
    "FederatedHPA's bounds (pull mode).")]
AutoscaleSecondsOpt = Annotated[float, typer.Option(
    "--autoscale-seconds", min=0.1, help="How often the autoscaling bounds are refreshed and, cut off, a local "
    "decision taken.")]
CutoffSecondsOpt = Annotated[float | None, typer.Option(
    "--cutoff-seconds", min=0.0, help="The control plane unanswered this long counts as cut off (default "
    "3 × --autoscale-seconds).")]
UsageSecondsOpt = Annotated[float, typer.Option(
    "--usage-seconds", min=0.1, help="How often the workloads' use is read (one pods and one metrics.k8s.io "
    "PodMetrics list per namespace) for their Works and autoscalers.")]
ProbeOpt = Annotated[list[str] | None, typer.Option(
    "--probe", help="Measure the network (C2) from this member to NAME at URL: round trip, jitter, loss of a "
    "GET /livez exchange, reported as the pair NAME → this cluster (repeatable), e.g. LHR=https://probe.lhr")]
ProbeSecondsOpt = Annotated[float, typer.Option("--probe-seconds", min=0.1,
                                                help="How often the --probe targets are measured.")]
ProbesOpt = Annotated[int, typer.Option("--probes", min=1, max=100, help="Probes per target per round.")]
DiscoverOpt = Annotated[bool | None, typer.Option(
    "--discover-probes/--no-discover-probes", help="Also measure what the control plane names (the client sites' "
    "probe endpoints, the other clusters' API endpoints). Default: on for one cluster, off with --from DIR.")]


def agent(
    cluster: ClusterOpt = None,
    kubeconfig: KubeconfigOpt = None,
    from_dir: FromDirOpt = None,
    context: ContextOpt = None,
    interval: IntervalOpt = 15.0,
    once: OnceOpt = False,
    state_dir: StateDirOpt = None,
    autonomy: AutonomyOpt = True,
    autoscale_seconds: AutoscaleSecondsOpt = 15.0,
    cutoff_seconds: CutoffSecondsOpt = None,
    usage_seconds: UsageSecondsOpt = 15.0,
    probe: ProbeOpt = None,
    probe_seconds: ProbeSecondsOpt = 10.0,
    probes: ProbesOpt = 5,
    discover_probes: DiscoverOpt = None,
    server: ServerOpt = DEFAULT_SERVER,
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Run a member cluster's agent until SIGTERM/SIGINT: report its status, apply its Works.

    Reads nodes, pods and metrics.k8s.io through the member's Kubernetes API and sends them with
    PUT /api/v1/metrics; follows the cluster's Works (pull mode), applies them to the member, prunes
    what no Work wants and reports their status; keeps the member on its last desired state while
    the control plane is unreachable, and scales autoscaled workloads there within their
    FederatedHPA's bounds, reporting what it did when the control plane is back. Use a token made with
    `drods token create --role cluster-agent --cluster NAME`.
    """
    import logging

    import httpx

    from drods.cli.agents import AgentMember, AgentRun, follow
    from drods.machinery import eventloop
    from drods.members.agent import AgentRefused
    from drods.members.agent_probe import ProbePlan, parse_target
    from drods.members.autonomy import AutonomySettings
    from drods.members.client import MemberClient, MemberError, MemberUnavailable

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if logging.getLogger().level > logging.DEBUG:  # one INFO line per report and pull: 250 KB in 2 min at 20 members
        logging.getLogger("httpx").setLevel(logging.WARNING)
    local = AutonomySettings(autoscale_seconds, 3 * autoscale_seconds if cutoff_seconds is None
                             else cutoff_seconds) if autonomy else None
    try:
        discover = discover_probes if discover_probes is not None else from_dir is None
        plan = ProbePlan(dict(parse_target(t) for t in probe or []), discover, probes, every_s=probe_seconds)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--probe") from e
    run = AgentRun(server, interval, tls_verify(ca_file, insecure), local, usage_seconds, plan)
    if from_dir is not None:
        raise typer.Exit(_run_directory(from_dir, run, state_dir))
    if not token or not cluster or not kubeconfig:
        raise typer.BadParameter("give --cluster, --kubeconfig and a token (--token or DRODS_TOKEN), or --from DIR",
                                 param_hint="--cluster")

    async def main() -> int:
        member = MemberClient.from_kubeconfig(cluster, kubeconfig, context)
        try:
            if once:
                return await _once(member, cluster, token, run)
            directory = state_dir or Path.home() / ".drods" / "agent" / cluster
            await follow([AgentMember(cluster, member, token, directory)], run)
            return 0
        except (AgentRefused, MemberError, MemberUnavailable, httpx.HTTPError) as e:
            # refused, or unreachable (--once)
            typer.echo(f"error: {e}", err=True)
            return 1
        finally:
            await member.close()

    raise typer.Exit(eventloop.run(main()))


async def _once(member: Any, cluster: str, token: str, run: Any) -> int:
    """One status report (and one probe round, with probe targets), the answers printed."""
    import json

    import httpx

    from drods.members.agent import report_once
    from drods.members.agent_probe import discovered, probe_round
    from drods.transport import async_transport

    async with httpx.AsyncClient(base_url=run.server.rstrip("/"), transport=async_transport(run.verify),
                                 timeout=10, headers={"Authorization": f"Bearer {token}"}) as http:
        r = await report_once(member, http, cluster)
        typer.echo(json.dumps(r.json(), indent=2))
        targets = {**(await discovered(http, {}) if run.probe.discover else {}), **run.probe.targets}
        if targets:
            n = await probe_round(http, cluster, targets, run.probe.count, run.probe.wait_s)
            typer.echo(json.dumps(n.json(), indent=2))
            return 0 if r.status_code == n.status_code == 200 else 1
    return 0 if r.status_code == 200 else 1


def _run_directory(root: Path, run: Any, state_dir: Path | None) -> int:
    """Every member of ``root/agents.yaml`` followed in this process; its server unless --server is given."""
    import dataclasses

    from drods.cli.agents import AgentMember, follow, read_agents_file
    from drods.machinery import eventloop
    from drods.members.client import MemberClient

    try:
        written_server, entries = read_agents_file(root / "agents.yaml")
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--from") from e
    if run.server == DEFAULT_SERVER and written_server:
        run = dataclasses.replace(run, server=written_server)
    base = state_dir or Path.home() / ".drods" / "agent"

    async def main() -> int:
        members = [AgentMember(e["cluster"], MemberClient.from_kubeconfig(e["cluster"], e["kubeconfig"], None),
                               e["token"], base / e["cluster"]) for e in entries]
        try:
            await follow(members, run)
            return 0
        finally:
            for m in members:
                await m.member.close()

    return eventloop.run(main())
