"""The ``drods`` client verbs: get, apply, delete, cluster, audit, version.

They speak to a running server over HTTP(S) like kubectl does (the Kubernetes-shaped paths for
objects, the flat ``/api/v1`` façade for ``drods cluster``), and learn the resource types from the
server's discovery documents, so a kind added on the server works here without a client change.

``register(app)`` adds these commands to the root ``drods`` app. Other modules extend the CLI
without editing this file: a sibling module ``drods/cli/<name>.py`` that defines ``register(app)``
is registered too, and may add verbs to the shared sub-apps (``cluster_app`` for
``drods cluster join|cordon|drain``) or its own (``drods top``, ``drods dev``, ``drods sim``).
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Annotated, Any, TypeVar

import typer

from drods import __version__
from drods.cli.remote import (
    TABLE_ACCEPT,
    ApiClient,
    CaFileOpt,
    CliError,
    InsecureOpt,
    OutputOpt,
    Resource,
    ServerOpt,
    TokenOpt,
    WideOutputOpt,
    check_output,
    connect,
    dump,
    fail,
    non_finite_field,
    print_table,
    read_sources,
    stderr,
    stdout,
)
from drods.registry.patch import merge_patch

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # shared with kubectl apply
REDACTED = "(redacted)"

cluster_app = typer.Typer(help="Member clusters (flat /api/v1/clusters API).", no_args_is_help=True)

F = TypeVar("F", bound=Callable[..., Any])


def handles_errors(fn: F) -> F:
    """Print a CliError (server ``{code, message}``, connection failure) in red and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CliError as e:
            fail(e)

    return wrapper  # type: ignore[return-value]


NamespaceOpt = Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace of namespaced kinds "
                                                  "(default: the object's, else 'default').")]


# ---- get ---------------------------------------------------------------------------------------


@handles_errors
def get(
    resource: Annotated[str, typer.Argument(help="Kind, plural or short name: clusters, pp, deploy, …")],
    name: Annotated[str | None, typer.Argument(help="One object's name (default: list them).")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="List across namespaces.")] = False,
    selector: Annotated[str | None, typer.Option("--selector", "-l", help="Label selector, e.g. env=prod.")] = None,
    output: WideOutputOpt = "table",
    no_headers: Annotated[bool, typer.Option("--no-headers", help="The table's rows without its header "
                                                                 "(as kubectl).")] = False,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Show objects of one kind (columns as `kubectl get`, ``-o wide`` with its extra columns, or the
    full objects as JSON/YAML)."""
    wide = output == "wide"
    check_output("table" if wide else output)
    api = connect(server, token, ca_file, insecure)
    res = api.resolve(resource)
    ns = None if (all_namespaces and name is None) else (namespace or "default")
    params = {"labelSelector": selector} if selector and name is None else {}
    path = res.path(ns if res.namespaced else None, name)
    if output not in ("table", "wide"):
        dump(api.get_json(path, params=params), output)
        return
    table = api.get_json(path, params=params, headers={"Accept": TABLE_ACCEPT})
    rows = table.get("rows") or []
    if not rows:
        where = f" in namespace {ns}" if res.namespaced and ns else ""
        stderr().print(f"No {res.plural} found{where}.")
        return
    shown = [i for i, c in enumerate(table.get("columnDefinitions", [])) if wide or c.get("priority", 0) == 0]
    columns = [table["columnDefinitions"][i]["name"] for i in shown]
    cells = [[r["cells"][i] for i in shown] for r in rows]
    if res.namespaced and ns is None:
        columns = ["Namespace", *columns]
        cells = [[(r.get("object") or {}).get("metadata", {}).get("namespace", ""), *c] for r, c in zip(rows, cells,
                                                                                                     strict=True)]
    print_table(columns, cells, show_header=not no_headers)


# ---- apply -------------------------------------------------------------------------------------


def _redact(obj: dict[str, Any]) -> dict[str, Any]:
    """The last-applied copy is stored in plain metadata: keep secrets out of it."""
    out = json.loads(json.dumps(obj))
    spec = out.get("spec")
    if isinstance(spec, dict) and "credentials" in spec:
        spec["credentials"] = REDACTED
    if out.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if key in out:
                out[key] = {k: REDACTED for k in out[key] or {}}
    return out


def three_way_merge_patch(last: Any, desired: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that sets everything in ``desired`` and removes what the previous apply
    (``last``) set but ``desired`` no longer has; fields others set are left alone."""
    patch: dict[str, Any] = {}
    previous = last if isinstance(last, dict) else {}
    for key, value in desired.items():
        if isinstance(value, dict) and isinstance(previous.get(key), dict):
            patch[key] = three_way_merge_patch(previous[key], value)
        else:
            patch[key] = value
    for key in previous:
        if key not in desired:
            patch[key] = None
    return patch


def apply_one(api: ApiClient, obj: dict[str, Any], namespace: str | None) -> tuple[Resource, dict[str, Any], str]:
    """Create ``obj`` or update it in place; returns (resource, result, created|configured|unchanged)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version or not kind:
        raise CliError("every object needs apiVersion and kind", "VALIDATION_FAILED")
    res = api.resource_for(str(api_version), str(kind))
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict) or not meta.get("name"):
        raise CliError(f"{kind}: metadata.name is required", "VALIDATION_FAILED")
    ns = (meta.get("namespace") or namespace or "default") if res.namespaced else None
    if ns:
        meta["namespace"] = ns
    annotations = meta.setdefault("annotations", {}) or {}
    meta["annotations"] = annotations
    annotations.pop(LAST_APPLIED, None)
    annotations[LAST_APPLIED] = json.dumps(_redact(obj), separators=(",", ":"), sort_keys=True)
    name = str(meta["name"])
    current = api.request("GET", res.path(ns, name), ok=(404,))
    if current.status_code == 404:
        created = api.request("POST", res.path(ns), json=obj).json()
        return res, created, "created"
    before = current.json()
    try:
        last = json.loads((before.get("metadata", {}).get("annotations") or {}).get(LAST_APPLIED, "null"))
    except ValueError:
        last = None
    patch = three_way_merge_patch(last, obj)
    if merge_patch(before, patch) == before:
        # nothing to change (kubectl sends nothing either): whatever a controller writes meanwhile,
        # say a cluster's health, is not this apply configuring anything
        return res, before, "unchanged"
    after = api.request("PATCH", res.path(ns, name), content=json.dumps(patch),
                        headers={"Content-Type": "application/merge-patch+json"}).json()
    same = after.get("metadata", {}).get("resourceVersion") == before.get("metadata", {}).get("resourceVersion")
    return res, after, "unchanged" if same else "configured"


@handles_errors
def apply(
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="File, directory or - (stdin); "
                                                "multi-document YAML or JSON. Repeatable.")],
    namespace: NamespaceOpt = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text (default), json or yaml.")] = "text",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Create or update objects from files (like `kubectl apply`); every object is tried, any failure exits 1."""
    if output not in ("text", "json", "yaml", "table"):
        raise typer.BadParameter("must be text, json or yaml", param_hint="--output")
    api = connect(server, token, ca_file, insecure)
    results: list[dict[str, Any]] = []
    failed = False
    for source, obj in read_sources(filename):
        label = f"{str(obj.get('kind', '?')).lower()}/{(obj.get('metadata') or {}).get('name', '?')}"
        try:
            if (field := non_finite_field(obj)) is not None:
                raise CliError(f"{field}: .nan and .inf are not numbers the API takes (JSON has neither)",
                               "VALIDATION_FAILED")
            res, result, outcome = apply_one(api, obj, namespace)
        except CliError as e:
            failed = True
            e.message = f"{source}: {label}: {e.message}"
            for line in e.lines():
                stderr().print(line, style="red", markup=False)
            if e.code in ("CONNECTION_FAILED", "TIMEOUT"):
                break
            continue
        results.append(result)
        if output in ("text", "table"):
            stdout().print(f"{res.kind.lower()}/{result['metadata']['name']} {outcome}", markup=False)
    if output in ("json", "yaml") and results:
        dump(results[0] if len(results) == 1 else {"apiVersion": "v1", "kind": "List", "items": results}, output)
    if failed:
        raise typer.Exit(1)


# ---- delete ------------------------------------------------------------------------------------


@handles_errors
def delete(
    resource: Annotated[str | None, typer.Argument(help="Kind, plural or short name.")] = None,
    names: Annotated[list[str] | None, typer.Argument(help="Names of the objects to delete.")] = None,
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help="Delete the objects in these "
                                                       "files (as for apply).")] = None,
    namespace: NamespaceOpt = None,
    ignore_not_found: Annotated[bool, typer.Option("--ignore-not-found", help="A missing object is not an "
                                                   "error.")] = False,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Delete objects by kind and name, or those described in files."""
    api = connect(server, token, ca_file, insecure)
    targets: list[tuple[Resource, str | None, str]] = []
    if filename:
        if resource or names:
            raise typer.BadParameter("give either KIND NAME… or -f FILE, not both")
        for _, obj in read_sources(filename):
            res = api.resource_for(str(obj.get("apiVersion")), str(obj.get("kind")))
            meta = obj.get("metadata") or {}
            ns = (meta.get("namespace") or namespace or "default") if res.namespaced else None
            targets.append((res, ns, str(meta.get("name"))))
    else:
        if not resource or not names:
            raise typer.BadParameter("give KIND NAME… or -f FILE")
        res = api.resolve(resource)
        targets = [(res, (namespace or "default") if res.namespaced else None, n) for n in names]
    failed = False
    for res, ns, name in targets:
        try:
            resp = api.request("DELETE", res.path(ns, name))
        except CliError as e:
            if e.status == HTTPStatus.NOT_FOUND and ignore_not_found:
                continue
            failed = True
            for line in e.lines():
                stderr().print(line, style="red", markup=False)
            if e.code in ("CONNECTION_FAILED", "TIMEOUT"):
                break
            continue
        outcome = "deleted" if resp.status_code == 200 else "deletion requested (waiting for finalizers)"
        stdout().print(f"{res.kind.lower()}/{name} {outcome}", markup=False)
    if failed:
        raise typer.Exit(1)


# ---- cluster (flat API) ------------------------------------------------------------------------


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return ""
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return ""
    secs = max(int((datetime.now(UTC) - then).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _ready(flat: dict[str, Any]) -> str:
    for cond in (flat.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return "Unknown"


CLUSTER_COLUMNS = ("Name", "Mode", "Endpoint", "Region", "Zone", "Provider", "City", "Ready", "Capabilities", "Age")


def _cluster_row(c: dict[str, Any]) -> list[Any]:
    return [c.get("name"), c.get("syncMode") or "Push", c.get("endpoint"), c.get("region"), c.get("zone"),
            c.get("provider"), c.get("city"), _ready(c), ",".join(c.get("capabilities") or []),
            _age(c.get("creationTimestamp"))]


@cluster_app.command("list")
@handles_errors
def cluster_list(
    selector: Annotated[str | None, typer.Option("--selector", "-l", help="Label selector.")] = None,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """List member clusters."""
    check_output(output)
    api = connect(server, token, ca_file, insecure)
    body = api.get_json("/api/v1/clusters", params={"labelSelector": selector} if selector else {})
    if output != "table":
        dump(body, output)
        return
    items = body.get("items") or []
    if not items:
        stderr().print("No clusters registered.")
        return
    print_table(CLUSTER_COLUMNS, [_cluster_row(c) for c in items])


@cluster_app.command("show")
@handles_errors
def cluster_show(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Show one cluster: its registration, labels and live status."""
    check_output(output)
    api = connect(server, token, ca_file, insecure)
    flat = api.get_json(f"/api/v1/clusters/{name}")
    if output != "table":
        dump(flat, output)
        return
    rows = [[k, v if isinstance(v, str) else json.dumps(v)] for k, v in flat.items() if v not in (None, [], {})]
    print_table(("Field", "Value"), rows)


def _labels(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--label")
        out[key] = value
    return out


@cluster_app.command("register")
@handles_errors
def cluster_register(
    name: Annotated[str, typer.Argument(help="Cluster name (lowercase DNS name).")],
    endpoint: Annotated[str | None, typer.Option("--endpoint", help="Kubernetes API URL of the member.")] = None,
    region: Annotated[str | None, typer.Option("--region")] = None,
    zone: Annotated[str | None, typer.Option("--zone")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="aws, azure, gcp, onprem, …")] = None,
    city: Annotated[str | None, typer.Option("--city", help="City code, e.g. DFW, LHR.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="key=value; repeatable.")] = None,
    capability: Annotated[list[str] | None, typer.Option("--capability", help="e.g. gpu; repeatable.")] = None,
    pull: Annotated[bool, typer.Option("--pull", help="Pull mode: an agent in the member pulls its work.")] = False,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Register a member cluster (POST /api/v1/clusters)."""
    check_output(output)
    body: dict[str, Any] = {"name": name, "syncMode": "Pull" if pull else "Push"}
    for key, value in (("endpoint", endpoint), ("region", region), ("zone", zone), ("provider", provider),
                       ("city", city)):
        if value is not None:
            body[key] = value
    if label:
        body["labels"] = _labels(label)
    if capability:
        body["capabilities"] = list(capability)
    api = connect(server, token, ca_file, insecure)
    flat = api.request("POST", "/api/v1/clusters", json=body).json()
    if output != "table":
        dump(flat, output)
        return
    stdout().print(f"cluster/{flat.get('name', name)} registered", markup=False)


@cluster_app.command("remove")
@handles_errors
def cluster_remove(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Remove a member cluster (DELETE /api/v1/clusters/NAME)."""
    api = connect(server, token, ca_file, insecure)
    resp = api.request("DELETE", f"/api/v1/clusters/{name}")
    outcome = "removed" if resp.status_code == 200 else "removal requested (waiting for finalizers)"
    stdout().print(f"cluster/{name} {outcome}", markup=False)


# ---- audit, version ----------------------------------------------------------------------------


@handles_errors
def audit(
    since: Annotated[str | None, typer.Option("--since", help="Only entries at or after this RFC 3339 time, or "
                                              "this long ago (30s, 15m, 2h, 1d).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only entries at or before this time (or this long "
                                              "ago).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many (the newest).")] = 1000,
    subject: Annotated[str | None, typer.Option("--subject", help="Only requests by this subject.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Only requests that changed objects of this kind.")]
    = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n",
                                                  help="Only requests that changed objects in this namespace.")]
    = None,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Who changed what, when, and with what result (admin only): users' requests and, beside them,
    the changes components made (subject ``component:<name>``, with the replica that made them)."""
    check_output(output)
    params: dict[str, Any] = {"limit": limit}
    if since:
        params["startTime"] = _time_or_ago(since, "--since")
    if until:
        params["endTime"] = _time_or_ago(until, "--until")
    for name, value in (("subject", subject), ("kind", kind), ("namespace", namespace)):
        if value:
            params[name] = value
    body = connect(server, token, ca_file, insecure).get_json("/api/v1/audit", params=params)
    if output != "table":
        dump(body, output)
        return
    items = body.get("items") or []
    if not items:
        stderr().print("No audit entries.")
        return
    def changed(e: dict[str, Any]) -> str:
        return ",".join(f"{c.get('verb')} {c.get('kind')}/{c.get('namespace') + '/' if c.get('namespace') else ''}"
                        f"{c.get('name')}" for c in e.get("changes") or [])

    def result(e: dict[str, Any]) -> object:
        if e.get("role") in ("component", "cli"):
            return "done"  # recorded with the change it made (a component's, a token the CLI signed): no HTTP status
        return "unknown" if e.get("result") is None else e.get("result")

    # Who: a user's token subject, or a component (``component:<name>``) and the replica that ran it.
    # What: the changes made, or for a refusal its reason.
    print_table(("Time", "Subject", "Replica", "Role", "Verb", "Path", "Result", "Changes or reason"),
                [[e.get("time"), e.get("subject"), e.get("replica") or "", e.get("role"), e.get("verb"),
                  e.get("path"), result(e), changed(e) or e.get("message") or ""] for e in items])


_AGO = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _time_or_ago(value: str, flag: str) -> str:
    """An RFC 3339 time as given, or a duration (``30m``) as the time that long ago, as ``kubectl logs
    --since`` reads one; anything else is refused here, in the flag's name."""
    ago = _AGO.match(value.strip())
    if ago is not None:
        at = datetime.now(UTC) - timedelta(seconds=float(ago[1]) * _SECONDS[ago[2]])
        return at.isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither an RFC 3339 time (2026-01-01T00:00:00Z) nor a duration "
                                 "(30s, 15m, 2h, 1d)", param_hint=flag) from None
    return value


@handles_errors
def version(
    client_only: Annotated[bool, typer.Option("--client", help="Only the client version (no server call).")] = False,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Print the client version and the server's."""
    check_output(output)
    info: dict[str, Any] = {"client": {"version": __version__}}
    if not client_only:
        info["server"] = connect(server, token, ca_file, insecure).get_json("/version")
    if output != "table":
        dump(info, output)
        return
    stdout().print(f"Client Version: drods {__version__}", markup=False)
    if "server" in info:
        stdout().print(f"Server Version: {info['server'].get('gitVersion', '?')} ({server})", markup=False)


# ---- registration ------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    """Add the client verbs to the root app, then any sibling module's ``register(app)``."""
    app.command("get")(get)
    app.command("apply")(apply)
    app.command("delete")(delete)
    app.command("audit")(audit)
    app.command("version")(version)
    app.add_typer(cluster_app, name="cluster")
    import drods.cli as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name in ("main", "client", "remote") or info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"drods.cli.{info.name}")
        except ImportError as e:  # one broken extension must not take `drods serve` down with it
            stderr().print(f"warning: drods.cli.{info.name} not loaded: {e}", style="yellow", markup=False)
            continue
        hook = getattr(module, "register", None)
        if callable(hook):
            hook(app)
