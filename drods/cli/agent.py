"""``drods agent``: run a member cluster's agent in the foreground: metrics (`drods.members.agent`) and,
for a pull-mode cluster, its Works (`drods.members.works`), in one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from drods.cli.remote import CaFileOpt, InsecureOpt, ServerOpt, TokenOpt, tls_verify


def agent(
    cluster: Annotated[str, typer.Option("--cluster", "-c", help="The cluster's name in DRO-DS.")],
    kubeconfig: Annotated[str, typer.Option("--kubeconfig", envvar="KUBECONFIG",
                                            help="Kubeconfig of the member cluster to read.")],
    context: Annotated[str | None, typer.Option("--context", help="Kubeconfig context.")] = None,
    interval: Annotated[float, typer.Option("--interval", min=1.0,
                                            help="Seconds between reports until the server names "
                                                 "another interval (nextReportSeconds).")] = 15.0,
    once: Annotated[bool, typer.Option("--once", help="Send one report (and one --probe round), print the "
                                       "answers and exit.")] = False,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Where the last desired state (the "
                                                   "cluster's Works) is cached; default ~/.drods/agent/CLUSTER.")]
    = None,
    autonomy: Annotated[bool, typer.Option("--autonomy/--no-autonomy", help="Cut off from the control plane, "
                                           "scale autoscaled workloads within their FederatedHPA's bounds "
                                           "(pull mode).")] = True,
    autoscale_seconds: Annotated[float, typer.Option("--autoscale-seconds", min=0.1, help="How often the "
                                                     "autoscaling bounds are refreshed and, cut off, a local "
                                                     "decision taken.")] = 15.0,
    cutoff_seconds: Annotated[float | None, typer.Option("--cutoff-seconds", min=0.0, help="The control plane "
                                                         "unanswered this long counts as cut off (default "
                                                         "3 × --autoscale-seconds).")] = None,
    usage_seconds: Annotated[float, typer.Option("--usage-seconds", min=0.1, help="How often the workloads' "
                                                 "use is read (one pods and one metrics.k8s.io PodMetrics "
                                                 "list per namespace) for their Works and autoscalers.")] = 15.0,
    probe: Annotated[list[str] | None, typer.Option(
        "--probe", help="Measure the network (C2) from this member to NAME at URL: round trip, jitter, loss of a "
        "GET /livez exchange, reported as the pair NAME → this cluster (repeatable), e.g. LHR=https://probe.lhr")]
    = None,
    probe_seconds: Annotated[float, typer.Option("--probe-seconds", min=0.1, help="How often the --probe "
                                                 "targets are measured.")] = 10.0,
    probes: Annotated[int, typer.Option("--probes", min=1, max=100, help="Probes per target per round.")] = 5,
    server: ServerOpt = "https://127.0.0.1:8080",
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
    import asyncio
    import json
    import logging

    import httpx

    from drods.members.agent import AgentRefused, report_once
    from drods.members.agent_probe import ProbePlan, parse_target, probe_round
    from drods.members.autonomy import AutonomySettings
    from drods.members.client import MemberClient, MemberError, MemberUnavailable
    from drods.transport import async_transport

    if not token:
        raise typer.BadParameter("a token is required (--token or DRODS_TOKEN)", param_hint="--token")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    verify = tls_verify(ca_file, insecure)
    try:
        plan = ProbePlan(dict(parse_target(t) for t in probe or []), probes, every_s=probe_seconds)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--probe") from e

    async def main() -> int:
        member = MemberClient.from_kubeconfig(cluster, kubeconfig, context)
        try:
            if once:
                async with httpx.AsyncClient(base_url=server.rstrip("/"), transport=async_transport(verify), timeout=10,
                                             headers={"Authorization": f"Bearer {token}"}) as http:
                    r = await report_once(member, http, cluster)
                    typer.echo(json.dumps(r.json(), indent=2))
                    if plan.targets:
                        n = await probe_round(http, cluster, plan.targets, plan.count, plan.wait_s)
                        typer.echo(json.dumps(n.json(), indent=2))
                        return 0 if r.status_code == n.status_code == 200 else 1
                return 0 if r.status_code == 200 else 1
            directory = state_dir or Path.home() / ".drods" / "agent" / cluster
            local = AutonomySettings(autoscale_seconds, 3 * autoscale_seconds if cutoff_seconds is None
                                     else cutoff_seconds) if autonomy else None
            await _report_and_follow(cluster, member, server, token, interval, verify, directory, local,
                                     usage_seconds, plan)
            return 0
        except (AgentRefused, MemberError, MemberUnavailable, httpx.HTTPError) as e:
            # refused, or unreachable (--once)
            typer.echo(f"error: {e}", err=True)
            return 1
        finally:
            await member.close()

    raise typer.Exit(asyncio.run(main()))


async def _report_and_follow(cluster: str, member: Any, server: str, token: str, interval: float, verify: Any,
                             directory: Path, local: Any, usage_seconds: float = 15.0, plan: Any = None) -> None:
    """Report the member's status and follow its Works until SIGTERM/SIGINT or a refused token."""
    import asyncio
    import signal

    from drods.members.agent import run_agent
    from drods.members.pull import run_works

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    both = [asyncio.create_task(run_agent(cluster, member, server, token, interval=interval, verify=verify,
                                          stop=stop)),
            asyncio.create_task(run_works(cluster, member, server, token, directory, verify=verify,
                                          stop=stop, autonomy=local, usage_interval=usage_seconds))]
    if plan is not None and plan.targets:
        both.append(asyncio.create_task(_probe(cluster, server, token, verify, plan, stop)))
    try:
        for t in asyncio.as_completed(both):
            await t  # a refused token in either ends both
    finally:
        stop.set()
        await asyncio.gather(*both, return_exceptions=True)


async def _probe(cluster: str, server: str, token: str, verify: Any, plan: Any, stop: Any) -> None:
    import httpx

    from drods.members.agent_probe import run_probes
    from drods.transport import async_transport

    async with httpx.AsyncClient(base_url=server.rstrip("/"), transport=async_transport(verify), timeout=10,
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        await run_probes(http, cluster, plan, stop)
