"""``drods cluster join|cordon|uncordon|drain``: bring a member in, and take it out of service.

* ``join NAME --kubeconfig FILE [--context C]`` registers a push-mode member: it reads the member
  through the official Kubernetes client first (so a wrong kubeconfig fails here, not later), takes
  region / zone / provider / city from its nodes' labels (``topology.kubernetes.io/region|zone``,
  ``multicluster.io/provider|city``) unless given, and stores the kubeconfig — with referenced
  certificate files inlined — in ``spec.credentials`` (encrypted at rest by the server, SEC2).
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
import base64
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from drods.cli.client import _labels, cluster_app, handles_errors
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

MERGE = {"Content-Type": "application/merge-patch+json"}
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"
_FILE_KEYS = (("clusters", "cluster", "certificate-authority"), ("users", "user", "client-certificate"),
              ("users", "user", "client-key"))


def load_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig with referenced certificate/key files inlined as ``*-data`` (self-contained)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise CliError(f"cannot read kubeconfig {path}: {e}", "BAD_KUBECONFIG") from e
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise CliError(f"{path} is not a kubeconfig (no clusters)", "BAD_KUBECONFIG")
    for section, inner, key in _FILE_KEYS:
        for entry in doc.get(section) or []:
            body = (entry or {}).get(inner) or {}
            ref = body.get(key)
            if ref and not body.get(f"{key}-data"):
                file = Path(ref) if Path(ref).is_absolute() else path.parent / ref
                try:
                    body[f"{key}-data"] = base64.b64encode(file.read_bytes()).decode()
                except OSError as e:
                    raise CliError(f"kubeconfig {path} refers to {file}: {e}", "BAD_KUBECONFIG") from e
                del body[key]
    return doc


def server_of(doc: dict[str, Any], context: str | None) -> str:
    ctx_name = context or doc.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    if ctx_name not in contexts:
        raise CliError(f"kubeconfig has no context {ctx_name!r}", "BAD_KUBECONFIG")
    cluster_name = contexts[ctx_name].get("cluster")
    for c in doc.get("clusters") or []:
        if c.get("name") == cluster_name:
            return str((c.get("cluster") or {}).get("server") or "")
    raise CliError(f"kubeconfig context {ctx_name!r} names an unknown cluster {cluster_name!r}", "BAD_KUBECONFIG")


async def inspect_member(name: str, doc: dict[str, Any], context: str | None) -> Any:
    """The member's summary (nodes, topology, version) through the official client."""
    from drods.members.client import MemberClient, MemberError, MemberOptions, MemberUnavailable

    client = MemberClient.from_kubeconfig(name, doc, context, MemberOptions(connect_timeout=5, read_timeout=15,
                                                                             retries=1))
    try:
        return await client.summary()
    except (MemberUnavailable, MemberError) as e:
        raise CliError(f"cannot read the member cluster: {e}", "MEMBER_UNREACHABLE") from e
    finally:
        await client.close()


@cluster_app.command("join")
@handles_errors
def cluster_join(
    name: Annotated[str, typer.Argument(help="Cluster name (lowercase DNS name).")],
    kubeconfig: Annotated[Path, typer.Option("--kubeconfig", help="Kubeconfig of the member cluster.")],
    context: Annotated[str | None, typer.Option("--context", help="Context in that kubeconfig.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="Default: the nodes' region label.")] = None,
    zone: Annotated[str | None, typer.Option("--zone", help="Default: the nodes' (first) zone label.")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="Default: the nodes' provider.")] = None,
    city: Annotated[str | None, typer.Option("--city", help="City code; default: the nodes' city label.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="key=value; repeatable.")] = None,
    capability: Annotated[list[str] | None, typer.Option("--capability", help="e.g. gpu; repeatable.")] = None,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Join a member cluster in push mode: DRO-DS reaches it with the given kubeconfig."""
    check_output(output)
    doc = load_kubeconfig(kubeconfig)
    endpoint = server_of(doc, context)
    summary = asyncio.run(inspect_member(name, doc, context))
    caps = list(capability or [])
    if summary.gpu_allocatable > 0 and "gpu" not in caps:
        caps.append("gpu")
    body: dict[str, Any] = {"name": name, "syncMode": "Push", "endpoint": endpoint,
                            "credentials": {"kubeconfig": yaml.safe_dump(doc, sort_keys=False)}}
    if context:
        body["credentials"]["context"] = context
    for key, given, found in (("region", region, summary.region), ("zone", zone, (summary.zones or [None])[0]),
                              ("provider", provider, summary.provider), ("city", city, summary.city)):
        if given or found:
            body[key] = given or found
    if label:
        body["labels"] = _labels(label)
    if caps:
        body["capabilities"] = caps
    if summary.gpu_models:
        body["gpuModels"] = summary.gpu_models
    api = connect(server, token, ca_file, insecure)
    flat = api.request("POST", "/api/v1/clusters", json=body).json()
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


def bindings_on(api: ApiClient, cluster: str) -> tuple[list[str], list[str]]:
    """(bindings placing replicas on ``cluster``, bindings with any copy there still)."""
    placed, present = [], []
    for b in api.get_json(BINDINGS).get("items") or []:
        st = b.get("status") or {}
        name = b["metadata"]["name"]
        if any(t.get("cluster") == cluster and int(t.get("replicas") or 0) > 0 for t in st.get("placement") or []):
            placed.append(name)
        if any(e.get("cluster") == cluster for e in st.get("clusters") or []) or name in placed:
            present.append(name)
    return placed, present


@cluster_app.command("drain")
@handles_errors
def cluster_drain(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    wait: Annotated[bool, typer.Option("--wait", help="Return when no binding has a copy there.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 300.0,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Cordon a cluster and reschedule every binding with replicas there (graceful: new copies first);
    a StatefulSet that declares a migration hook moves with its data (a MigrationPlan)."""
    api = connect(server, token, ca_file, insecure)
    done = api.request("POST", f"/api/v1/clusters/{name}/drain", json={}).json()
    placed, plans = list(done.get("rescheduled") or []), list(done.get("migrationPlans") or [])
    stdout().print(f"cluster/{name} cordoned; {len(placed)} binding(s) rescheduled"
                   + (f": {', '.join(placed)}" if placed else ""), markup=False)
    if plans:
        stdout().print(f"{len(plans)} migration plan(s) started: {', '.join(plans)}", markup=False)
    if not wait:
        return
    deadline = time.monotonic() + timeout
    while True:
        _, present = bindings_on(api, name)
        if not present:
            stdout().print(f"cluster/{name} drained", markup=False)
            return
        if time.monotonic() > deadline:
            raise CliError(f"{len(present)} binding(s) still on {name} after {timeout:g}s: {', '.join(present)}",
                           "TIMEOUT")
        time.sleep(1.0)


def register(app: typer.Typer) -> None:
    """The commands are on the shared ``cluster_app``; importing this module adds them."""
