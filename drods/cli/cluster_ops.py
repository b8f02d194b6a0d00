"""``drods cluster join|cordon|uncordon|drain``: bring a member in, and take it out of service.

* ``join NAME --kubeconfig FILE [--context C]`` registers a push-mode member: it reads the member
  through the official Kubernetes client first (so a wrong kubeconfig fails here, not later), takes
  region / zone / provider / city from its nodes' labels (``topology.kubernetes.io/region|zone``,
  ``multicluster.io/provider|city``) unless given, and stores the kubeconfig — with referenced
  certificate files inlined — in ``spec.credentials`` (encrypted at rest by the server, SEC2).
  ``--pull`` registers it in pull mode (no credentials: its agent pulls). ``join --from DIR`` joins
  every member of a directory (``drods sim fleet --out DIR``; `drods.cli.joining`).
* ``cordon`` / ``uncordon`` set ``spec.unschedulable``: no new placements, nothing moves.
* ``drain`` cordons, then asks the scheduler to re-place every binding with replicas there
  (``spec.rescheduleTriggeredAt``); propagation moves them gracefully (new copies ready first). A
  StatefulSet that declares a migration hook (annotation ``multicluster.io/migration-hook``) gets a
  MigrationPlan instead (`drods.cli.migrate`); its controller sends it where the scheduler would
  place it with the cluster cordoned.
  ``--wait`` returns when no binding has a copy there any more.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from drods.cli.client import _labels, cluster_app, handles_errors
from drods.cli.joining import inspect_member, join_directory, load_kubeconfig, member_body
from drods.cli.remote import (
    ApiClient,
    CaFileOpt,
    CliError,
    InsecureOpt,
    OutputOpt,
    ServerOpt,
    TokenOpt,
    check_output,
    connect,
    dump,
    stdout,
)
from drods.model.timefmt import parse_rfc3339
from drods.security.trust import data_dir_ca

MERGE = {"Content-Type": "application/merge-patch+json"}
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"


@cluster_app.command("join")
@handles_errors
def cluster_join(
    name: Annotated[str | None, typer.Argument(help="Cluster name (lowercase DNS name); not with --from.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="Kubeconfig of the member cluster.")]
    = None,
    from_dir: Annotated[Path | None, typer.Option(
        "--from", help="Join every member of a directory: DIR/fleet.yaml of `drods sim fleet --out DIR`, "
        "else each DIR/NAME/kubeconfig.")] = None,
    pull: Annotated[bool, typer.Option("--pull", help="Pull mode: an agent next to the member pulls its work "
                                       "(with --from: tokens for `drods agent --from DIR` in DIR/agents.yaml).")]
    = False,
    context: Annotated[str | None, typer.Option("--context", help="Context in that kubeconfig.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="Default: the nodes' region label.")] = None,
    zone: Annotated[str | None, typer.Option("--zone", help="Default: the nodes' (first) zone label.")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="Default: the nodes' provider.")] = None,
    city: Annotated[str | None, typer.Option("--city", help="City code; default: the nodes' city label.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="key=value; repeatable.")] = None,
    capability: Annotated[list[str] | None, typer.Option("--capability", help="e.g. gpu; repeatable.")] = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR", help="The control plane's data "
                                           "dir: its CA is trusted (without --ca-file) and, with --from --pull, its "
                                           "key signs the agents' tokens.")]
    = Path.home() / ".drods",
    store: Annotated[str | None, typer.Option("--store", help="With --from --pull: where the tokens are recorded "
                                              "(default: the data dir's SQLite file).")] = None,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Join a member cluster (push mode: DRO-DS reaches it with the given kubeconfig; --pull: its
    agent pulls), or with --from every member of a directory."""
    check_output(output)
    labels = _labels(label) if label else None
    if ca_file is None and data_dir_ca(data_dir).is_file():
        ca_file = str(data_dir_ca(data_dir))  # the control plane's own CA, in the data dir it was given
    if from_dir is not None:
        if name or kubeconfig or context or region or zone or provider or city:
            raise typer.BadParameter("--from joins a whole directory: give no NAME, --kubeconfig, --context or "
                                     "topology", param_hint="--from")
        join_directory(from_dir, connect(server, token, ca_file, insecure), pull=pull, labels=labels,
                       capabilities=capability, minter=(data_dir, store), server=server, output=output)
        return
    if not name or kubeconfig is None:
        raise typer.BadParameter("give NAME and --kubeconfig (or --from DIR)", param_hint="NAME")
    doc = load_kubeconfig(kubeconfig)
    summary = asyncio.run(inspect_member(name, doc, context))
    body = member_body(name, doc, context, summary, pull=pull, labels=labels, capabilities=capability,
                       given={"region": region, "zone": zone, "provider": provider, "city": city})
    flat = connect(server, token, ca_file, insecure).request("POST", "/api/v1/clusters", json=body).json()
    if output != "table":
        dump(flat, output)
        return
    where = ", ".join(f"{k} {body[k]}" for k in ("region", "zone", "provider", "city") if body.get(k))
    stdout().print(f"cluster/{name} joined ({where}; {summary.ready_nodes}/{summary.node_count} nodes ready, "
                   f"{summary.kubernetes_version})", markup=False)


def _set_unschedulable(api: ApiClient, name: str, value: bool) -> None:
    api.request("PATCH", f"/api/v1/clusters/{name}", json={"unschedulable": value}, headers=MERGE)


@cluster_app.command("cordon")
@handles_errors
def cluster_cordon(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Mark a cluster unschedulable: no new placements there; what runs there stays."""
    _set_unschedulable(connect(server, token, ca_file, insecure), name, True)
    stdout().print(f"cluster/{name} cordoned", markup=False)


@cluster_app.command("uncordon")
@handles_errors
def cluster_uncordon(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Make a cordoned cluster schedulable again."""
    _set_unschedulable(connect(server, token, ca_file, insecure), name, False)
    stdout().print(f"cluster/{name} uncordoned", markup=False)


def bindings_on(api: ApiClient, cluster: str) -> tuple[list[str], list[str], dict[str, str]]:
    """(bindings placing replicas on ``cluster``, bindings with any copy there still, and of those the
    ones the scheduler found no other place for since it was asked to move them — none, or not for all
    their replicas — with why)."""
    placed, present, stuck = [], [], {}
    for b in api.get_json(BINDINGS).get("items") or []:
        st = b.get("status") or {}
        name = b["metadata"]["name"]
        if any(t.get("cluster") == cluster and int(t.get("replicas") or 0) > 0 for t in st.get("placement") or []):
            placed.append(name)
        if any(e.get("cluster") == cluster for e in st.get("clusters") or []) or name in placed:
            present.append(name)
            if not _decided_since_asked(b):
                continue
            asked = int((b.get("spec") or {}).get("replicas") or 0)
            elsewhere = sum(int(t.get("replicas") or 0) for t in st.get("placement") or []
                            if t.get("cluster") != cluster)
            if st.get("phase") == "Unschedulable":
                stuck[name] = f"cannot be placed elsewhere: {st.get('message') or 'no feasible cluster'}"
            elif name not in placed and 0 < elsewhere < asked:
                # a partial placement: the copy here stays until the rest is ready elsewhere
                stuck[name] = f"{elsewhere} of {asked} replicas placed elsewhere, the copy there stays until " \
                              f"the rest are (or the graceful timeout passes)"
    return placed, present, stuck


def _decided_since_asked(binding: dict[str, Any]) -> bool:
    """The binding's status is a decision made after its last reschedule request (the drain's): an
    Unschedulable phase from before says nothing about where it can go now."""
    asked = parse_rfc3339((binding.get("spec") or {}).get("rescheduleTriggeredAt"))
    decided = parse_rfc3339((binding.get("status") or {}).get("scheduledTime"))
    return asked is None or (decided is not None and decided >= asked)


@cluster_app.command("drain")
@handles_errors
def cluster_drain(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    wait: Annotated[bool, typer.Option("--wait", help="Return when no binding has a copy there.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0, help="Seconds --wait waits.")] = 300.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Change nothing: say what the drain would move, "
                                          "where to, and how many replicas would wait for room.")] = False,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Cordon a cluster and reschedule every binding with replicas there (graceful: new copies first);
    a workload with PersistentVolumeClaims moves with its data (a MigrationPlan: its declared data
    step, else the VolumeCopy mover), or stays, said, when its data cannot move."""
    api = connect(server, token, ca_file, insecure)
    if dry_run:
        _print_drain_forecast(api.request("POST", f"/api/v1/clusters/{name}/drain", json={},
                                          params={"dryRun": "All"}).json())
        return
    done = api.request("POST", f"/api/v1/clusters/{name}/drain", json={}).json()
    placed, plans = list(done.get("rescheduled") or []), list(done.get("migrationPlans") or [])
    stdout().print(f"cluster/{name} cordoned; {len(placed)} binding(s) rescheduled"
                   + (f": {', '.join(placed)}" if placed else ""), markup=False)
    if plans:
        stdout().print(f"{len(plans)} migration plan(s) started: {', '.join(plans)}", markup=False)
    kept = {str(r).split(": ", 1)[0] for r in done.get("refused") or []}
    for refusal in done.get("refused") or []:
        stdout().print(f"left in place: {refusal}", markup=False)
    if not wait:
        return
    deadline = time.monotonic() + timeout
    while True:
        _, on, stuck = bindings_on(api, name)
        for b in sorted(stuck.keys() - kept):  # decided: it has nowhere else to go, waiting will not move it
            stdout().print(f"left in place: {b}: {stuck[b]}", markup=False)
            kept.add(b)
        present = [b for b in on if b not in kept]
        if not present:
            stdout().print(f"cluster/{name} drained" + (f" ({len(kept)} binding(s) left in place)" if kept else ""),
                           markup=False)
            return
        if time.monotonic() > deadline:
            raise CliError(f"{len(present)} binding(s) still on {name} after {timeout:g}s: {', '.join(present)}",
                           "TIMEOUT")
        time.sleep(1.0)


def _print_drain_forecast(answer: dict[str, Any]) -> None:
    """A drain's dry run: its plan, and where each re-placed binding would go (`drods.whatif.drain`)."""
    out = stdout()
    out.print(str(answer.get("message") or ""), markup=False)
    for plan in answer.get("migrationPlans") or []:
        out.print(f"would get a migration plan: {plan}", markup=False)
    for refusal in answer.get("refused") or []:
        out.print(f"would be left in place: {refusal}", markup=False)
    for f in (answer.get("forecast") or {}).get("bindings") or []:
        where = ", ".join(f"{p['cluster']} {p['replicas']}" for p in f.get("placement") or []) or "nowhere"
        pending = f"; {f['pending']} of {f['requested']} replica(s) would wait for room" if f.get("pending") else ""
        out.print(f"  {f['binding']}: {where}{pending}", markup=False)


def register(app: typer.Typer) -> None:
    """The commands are on the shared ``cluster_app``; importing this module adds them."""
