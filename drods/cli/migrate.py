"""``drods migrate KIND/NAMESPACE/NAME --to CLUSTER``: start a MigrationPlan (SPEC F3), and what
``drods cluster drain`` uses to move StatefulSets that declare a migration hook.

The plan is an ordinary object (``POST …/namespaces/NS/migrationplans``, the same as ``kubectl
apply``); the controller does the rest. The source is ``--from``, else the one cluster the workload
runs on; the hook is ``--hook-file`` (YAML or JSON of a plan's ``spec.hook``), else the workload's
annotation ``multicluster.io/migration-hook``, else none — which the control plane refuses for a workload
with volumes (400 ``DATA_STEP_REQUIRED``) unless ``--no-data`` says so; ``--volume-copy-image`` copies
every volume with the built-in VolumeCopy mover instead, fencing the source for ``--freeze-seconds``
(default ``migration.freezeSeconds``' default, as a drain's plan) while the final sync runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
import yaml

from drods.cli.client import handles_errors
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

KINDS = {"statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
         "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment"}
PLURAL = {"StatefulSet": "statefulsets", "Deployment": "deployments"}
BINDINGS = "/apis/multicluster.io/v1alpha1/bindings"


def plans_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/multicluster.io/v1alpha1/namespaces/{namespace}/migrationplans"
    return f"{base}/{name}" if name else base


def workload_path(kind: str, namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/{PLURAL[kind]}/{name}"


def parse_ref(text: str) -> tuple[str, str, str]:
    parts = text.split("/")
    if len(parts) != 3 or not all(parts) or parts[0].lower() not in KINDS:
        raise CliError(f"expected KIND/NAMESPACE/NAME with KIND StatefulSet or Deployment, got {text!r}",
                       "INVALID_ARGUMENT")
    return KINDS[parts[0].lower()], parts[1], parts[2]


def workload_hook(workload: dict[str, Any]) -> dict[str, Any] | Literal["None"] | None:
    from drods.model.migration import declared_hook

    try:
        return declared_hook(workload)
    except ValueError as e:
        raise CliError(str(e), "INVALID_HOOK") from e


def placed_on(api: ApiClient, kind: str, namespace: str, name: str) -> dict[str, int] | None:
    """Where the workload runs, from its Binding ({}: it has none); None when this token may not read
    Bindings (cluster-scoped: a token limited to namespaces), so the source must be named."""
    from drods.model.detection import binding_is_for, binding_name

    try:
        binding = api.get_json(f"{BINDINGS}/{binding_name(kind, namespace, name)}")
        # one under the name that places another object (names collide across namespaces) is none
        return placement(binding) if binding_is_for(binding, kind, namespace, name) else {}
    except CliError as e:
        if e.status == 404:
            return {}
        if e.status == 403:
            return None
        raise


def placement(binding: dict[str, Any] | None) -> dict[str, int]:
    return {str(t["cluster"]): int(t.get("replicas") or 0) for t in ((binding or {}).get("status") or {})
            .get("placement") or [] if isinstance(t, dict) and int(t.get("replicas") or 0) > 0}


def running_plan(api: ApiClient, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """A plan of this workload that has not ended (mid-move it runs on both clusters: that, not which
    cluster to move from, is what the user must hear)."""
    from drods.model.migration import TERMINAL

    for p in api.get_json(plans_path(namespace)).get("items") or []:
        ref = (p.get("spec") or {}).get("workloadRef") or {}
        if ref.get("name") == name and str(ref.get("kind") or "StatefulSet") == kind and \
                str((p.get("status") or {}).get("phase") or "Pending") not in TERMINAL:
            return dict(p)
    return None


def create_plan(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    try:
        return dict(api.request("POST", plans_path(ns), json=body).json())
    except CliError as e:
        # the Kubernetes path answers a Status (reason BadRequest, a cause on spec.data) where /api/v1 says
        # DATA_STEP_REQUIRED: either way, say which flags set the field
        if e.code == "DATA_STEP_REQUIRED" or any(isinstance(c, dict) and c.get("field") == "spec.data"
                                                 for c in (e.details or {}).get("causes") or []):
            e.message += " (drods migrate: --volume-copy-image IMAGE, --hook-file FILE or --no-data)"
        raise


def check_target(api: ApiClient, cluster: str) -> None:
    """A target that is not registered is refused here rather than by a plan that fails later."""
    try:
        api.get_json(f"/api/v1/clusters/{cluster}")
    except CliError as e:
        if e.status == 404:
            raise CliError(f"cluster {cluster} is not registered (drods get clusters)", "NOT_FOUND", 404) from e
        if e.status != 403:  # a namespaced token reads no Cluster: the plan says UnknownTarget if it is not
            raise


@handles_errors
def migrate(
    ref: Annotated[str, typer.Argument(help="KIND/NAMESPACE/NAME, e.g. statefulset/shop/db.")],
    to: Annotated[str | None, typer.Option("--to", help="Target cluster (default: where the scheduler would "
                                                         "place it with the source cordoned).")] = None,
    source: Annotated[str | None, typer.Option("--from", help="Source cluster (default: where it runs).")] = None,
    hook_file: Annotated[Path | None, typer.Option("--hook-file", help="YAML/JSON of spec.hook (default: the "
                                                   "workload's multicluster.io/migration-hook annotation).")] = None,
    no_data: Annotated[bool, typer.Option("--no-data", help="Move without the data (spec.data: None), said "
                                          "explicitly; a workload with volumes is refused otherwise.")] = False,
    volume_copy_image: Annotated[str | None, typer.Option("--volume-copy-image", help="Copy every volume with the "
                                                          "VolumeCopy mover, using this transport image.")] = None,
    freeze_seconds: Annotated[float | None, typer.Option(
        "--freeze-seconds", min=0, help="Fence the source this long for the final sync (spec.switch.freezeSeconds; "
        "0: switch without one). Default with --volume-copy-image: the default of the configuration's "
        "migration.freezeSeconds, as a drain's plan; else none.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded on the plan).")] = "requested",
    wait: Annotated[bool, typer.Option("--wait", help="Return when the plan has ended.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 1800.0,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Move a workload and its data (VolumeCopy, a hook, or --no-data said explicitly) to another cluster with
    a MigrationPlan."""
    from drods.model.migration import TERMINAL, MigrationSettings, plan_object

    check_output(output)
    kind, ns, name = parse_ref(ref)
    api = connect(server, token, ca_file, insecure)
    workload = api.get_json(workload_path(kind, ns, name))
    if to is not None:
        check_target(api, to)
    running = running_plan(api, kind, ns, name)
    if running is not None:
        pname, phase = running["metadata"]["name"], (running.get("status") or {}).get("phase") or "Pending"
        raise CliError(f"{kind} {ns}/{name} is already being moved by MigrationPlan {pname!r} ({phase}); wait for "
                       f"it to finish (drods explain migrationplan/{pname} -n {ns}) or delete it",
                       "MIGRATION_IN_PROGRESS", 409)
    placed = placed_on(api, kind, ns, name)
    if placed is None:  # the plan's controller checks the source instead
        if source is None:
            raise CliError(f"this token may not read Bindings (cluster-scoped), so where {kind} {ns}/{name} runs is "
                           "not known here: name the source with --from", "INVALID_ARGUMENT")
        placed = {source: 1}
    if source is not None and source not in placed:
        where = ", ".join(sorted(placed)) or "no cluster"
        raise CliError(f"{kind} {ns}/{name} runs nothing on {source} (it runs on {where}): nothing to move from there",
                       "INVALID_ARGUMENT")
    if source is None:
        others = sorted(c for c in placed if c != to)
        if not others and to in placed:
            raise CliError(f"{kind} {ns}/{name} runs on {to} already: nothing to move", "INVALID_ARGUMENT")
        if len(others) != 1:
            raise CliError(f"{kind} {ns}/{name} runs on {', '.join(others) or 'no cluster'}: name the source with "
                           "--from", "INVALID_ARGUMENT")
        source = others[0]
    if sum((hook_file is not None, no_data, volume_copy_image is not None)) > 1:
        raise CliError("choose one of --hook-file, --no-data and --volume-copy-image", "INVALID_ARGUMENT")
    hook: Any
    if no_data:
        hook = None
    elif volume_copy_image is not None:
        hook = {"mover": "VolumeCopy", "image": volume_copy_image}
    elif hook_file is not None:
        try:
            hook = yaml.safe_load(hook_file.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise CliError(f"reading {hook_file}: {e}", "INVALID_HOOK") from e
    else:
        hook = workload_hook(workload)
    if freeze_seconds is None:  # the built-in mover freezes writes for the final sync, as a drain's plan does
        freeze_seconds = float(MigrationSettings.model_fields["freezeSeconds"].default) \
            if volume_copy_image is not None else 0.0
    body = plan_object(kind, ns, name, source, to, hook, "Operator", reason, freeze_seconds=freeze_seconds)
    if no_data:
        body["spec"]["data"] = "None"
    plan = create_plan(api, body)
    pname = plan["metadata"]["name"]
    if not wait:
        if output != "table":
            dump(plan, output)
        else:
            stdout().print(f"migrationplan/{pname} created ({kind} {ns}/{name}: {source} → {to or '(chosen)'})",
                           markup=False)
        return
    deadline = time.monotonic() + timeout
    while True:
        plan = api.get_json(plans_path(ns, pname))
        st = plan.get("status") or {}
        if st.get("phase") in TERMINAL:
            break
        if time.monotonic() > deadline:
            raise CliError(f"migrationplan/{pname} still {st.get('phase')} after {timeout:g}s", "TIMEOUT")
        time.sleep(1.0)
    if output != "table":
        dump(plan, output)
    else:
        stdout().print(f"migrationplan/{pname} {st.get('phase')}: {st.get('message')}", markup=False)
    if st.get("phase") != "Succeeded":
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)

