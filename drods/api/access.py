"""Who may call each route, and whether its writes honour ``?dryRun=All``: one table (SEC1, SEC3).

`RULES` names every route the API server serves; `enforce` (a dependency of every route,
installed by `drods.api.app.create_app`) answers from it before a handler runs:

* a route missing from the table is refused to everyone (403, deny by default);
* the caller's token is verified and its role must allow the route's action (`drods.api.auth`);
  a namespaced token passes only on the Kubernetes paths of its namespaces (the handler also checks
  the kind is namespaced); a cluster agent's own cluster is checked by the handler against the cluster it names;
* a write that cannot simulate itself refuses ``?dryRun=All`` (400 ``DRY_RUN_UNSUPPORTED``)
  before anything runs, so a client never believes a change was only simulated when it was made.

``docs/security.md`` is this table rendered (`drods.api.access_doc`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import Request

from drods.api.auth import Action
from drods.api.context import authenticate
from drods.api.dryrun import is_dry_run
from drods.errors import ApiError, Forbidden


class DryRun(enum.StrEnum):
    NOT_A_WRITE = "not a write"  # reads (and what-if simulations): nothing to simulate
    HONOURED = "honoured"  # validates and answers what it would do, changes nothing
    REFUSED = "refused"  # 400 DRY_RUN_UNSUPPORTED before anything runs


@dataclass(frozen=True, slots=True)
class Rule:
    """``action`` None with ``public`` False: any valid token (discovery, as Kubernetes'
    ``system:discovery``)."""

    action: Action | None
    dry_run: DryRun = DryRun.NOT_A_WRITE
    public: bool = False  # no token needed (health, the API's own documentation, the dashboard)
    namespaced: bool = False  # namespaced tokens may call it in their namespaces (`namespace_of` the path)
    query_namespace: bool = False  # … or in the namespace its ``?namespace=`` names (a flat read narrowed to one)
    own_cluster: bool = False  # a cluster agent only for the cluster it names (checked by the handler)


PUBLIC = Rule(None, public=True)
SIGNED_IN = Rule(None)
READ = Rule(Action.READ)
WRITE = Rule(Action.WRITE, DryRun.HONOURED)
WRITE_NO_DRY_RUN = Rule(Action.WRITE, DryRun.REFUSED)
REPORT = Rule(Action.REPORT, DryRun.REFUSED, own_cluster=True)
WORK_READ = Rule(Action.WORK, own_cluster=True)
WORK_REPORT = Rule(Action.WORK, DryRun.REFUSED, own_cluster=True)
K8S_READ = Rule(Action.READ, namespaced=True)
READ_BY_NAMESPACE = Rule(Action.READ, namespaced=True, query_namespace=True)
K8S_WRITE = Rule(Action.WRITE, DryRun.HONOURED, namespaced=True)


def _flat(path: str) -> dict[tuple[str, str], Rule]:
    """A flat view of one kind (`drods.api.routes.flat`): list, create, get, patch, delete."""
    return {("GET", path): READ, ("POST", path): WRITE, ("GET", f"{path}/{{name}}"): READ,
            ("PATCH", f"{path}/{{name}}"): WRITE, ("DELETE", f"{path}/{{name}}"): WRITE}


def _kubernetes(path: str, methods: str) -> dict[tuple[str, str], Rule]:
    return {(m, path): K8S_READ if m == "GET" else K8S_WRITE for m in methods.split()}


_K8S = "/apis/{group}/{version}"
_K8S_NS = f"{_K8S}/namespaces/{{ns}}/{{plural}}/{{name}}"
_CORE_NS = "/api/v1/namespaces/{ns}/{plural}"

OWN_NAMESPACE = "/api/v1/namespaces/{name}"  # a namespaced token may read the Namespace it is limited to
RULES: dict[tuple[str, str], Rule] = {
    # health, the API's documentation and the dashboard's static pages
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/livez"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/docs/assets"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/ui"): PUBLIC,
    ("GET", "/metrics"): READ,
    ("GET", "/api/v1/audit"): Rule(Action.ADMIN),
    # API1, API2
    **_flat("/api/v1/clusters"),
    ("POST", "/api/v1/clusters/{name}/drain"): WRITE,
    **_flat("/api/v1/propagationpolicies"),
    # monitoring (C1, C2)
    ("POST", "/api/v1/metrics/events"): REPORT,
    ("PUT", "/api/v1/metrics"): REPORT,
    ("GET", "/api/v1/monitor/realtime"): READ,
    ("GET", "/api/v1/monitor/forecast"): READ,
    ("GET", "/api/v1/monitor/surge"): READ,
    ("GET", "/api/v1/monitor/operations"): READ,
    ("GET", "/api/v1/monitor/subscriptions"): READ,
    ("GET", "/api/v1/monitor/subscriptions/{name}"): READ,
    ("PUT", "/api/v1/monitor/subscriptions/{name}"): WRITE_NO_DRY_RUN,
    ("PUT", "/api/v1/monitor/subscriptions"): WRITE_NO_DRY_RUN,
    ("DELETE", "/api/v1/monitor/subscriptions/{name}"): WRITE_NO_DRY_RUN,
    ("GET", "/api/v1/history/metrics"): READ,
    ("GET", "/api/v1/history/failures"): READ,
    # synchronisation, bindings, scheduling
    ("PUT", "/api/v1/sync/configs"): WRITE,
    ("GET", "/api/v1/sync/configs"): READ,
    ("POST", "/api/v1/sync/batch"): WRITE,
    ("POST", "/api/v1/bindings"): WRITE,
    ("GET", "/api/v1/bindings"): READ,
    ("GET", "/api/v1/bindings/{binding_id}"): READ,
    ("GET", "/api/v1/bindings/{binding_id}/status"): READ,
    ("PATCH", "/api/v1/bindings/{binding_id}"): WRITE,
    ("DELETE", "/api/v1/bindings/{binding_id}"): WRITE,
    ("GET", "/api/v1/history/schedules"): READ,
    ("GET", "/api/v1/scheduler"): READ,
    ("POST", "/api/v1/whatif"): READ,  # a simulation: it changes nothing
    # pull-mode agents (M2)
    ("GET", "/api/v1/agent/works"): WORK_READ,
    ("PUT", "/api/v1/agent/works/{name}/status"): WORK_REPORT,
    ("GET", "/api/v1/agent/autoscalers"): WORK_READ,
    ("POST", "/api/v1/agent/autonomy"): WORK_REPORT,
    ("GET", "/api/v1/agent/probe-targets"): WORK_READ,
    # feedback, steering, traffic, datasets
    ("PUT", "/api/v1/feedback"): REPORT,  # a cluster agent: its own cluster's feedback only
    ("GET", "/api/v1/autoscaling/history"): READ,
    ("GET", "/api/v1/decisions"): READ_BY_NAMESPACE,  # a tenant reads its namespace's decisions
    ("PUT", "/api/v1/network/status"): REPORT,
    ("GET", "/api/v1/network/intervals"): READ,
    ("GET", "/api/v1/network/status"): READ,
    ("GET", "/api/v1/steering/services"): READ,
    ("GET", "/api/v1/steering/services/{service_id}/routes"): READ,
    ("GET", "/api/v1/steering/services/{service_id}/resolve"): READ,
    ("GET", "/api/v1/steering/directory"): READ,
    ("PUT", "/api/v1/traffic"): WRITE_NO_DRY_RUN,
    ("GET", "/api/v1/traffic"): READ,
    ("PUT", "/api/v1/datasets/access"): WRITE_NO_DRY_RUN,
    ("GET", "/api/v1/datasets/access"): READ,
    # the Kubernetes paths: schemas and discovery for any token, objects by role and namespace
    ("GET", "/openapi/v3"): SIGNED_IN,
    ("GET", "/openapi/v3/{gv:path}"): SIGNED_IN,
    ("GET", "/openapi/v2"): SIGNED_IN,
    ("GET", "/version"): PUBLIC,  # as Kubernetes' system:public-info-viewer has it
    ("GET", "/api"): SIGNED_IN,
    ("GET", "/api/v1"): SIGNED_IN,
    ("GET", "/apis"): SIGNED_IN,
    ("GET", "/apis/{group}"): SIGNED_IN,
    ("GET", "/apis/{group}/{version}"): SIGNED_IN,
    # who a token is and what it may do (`kubectl auth whoami`, `kubectl auth can-i [--list]`): any token, of itself
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews"): SIGNED_IN,
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"): SIGNED_IN,
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"): SIGNED_IN,
    **_kubernetes(f"{_K8S}/{{plural}}", "GET POST"),
    **_kubernetes(f"{_K8S}/{{plural}}/{{name}}", "GET PUT PATCH DELETE"),
    **_kubernetes(f"{_K8S}/{{plural}}/{{name}}/{{sub}}", "GET PUT PATCH POST"),
    **_kubernetes(_K8S_NS, "GET PUT PATCH DELETE"),
    **_kubernetes(f"{_K8S_NS}/{{sub}}", "GET PUT PATCH"),
    # Namespaces are cluster-scoped: listed and made by cluster-wide tokens only (as Kubernetes' RBAC has it)
    ("GET", "/api/v1/namespaces"): READ, ("POST", "/api/v1/namespaces"): WRITE,
    # a Namespace is read by a token of that namespace, written only by a cluster-wide one
    ("GET", OWN_NAMESPACE): K8S_READ, **{(m, OWN_NAMESPACE): WRITE for m in ("PUT", "PATCH", "DELETE")},
    **{(m, f"{OWN_NAMESPACE}/{{sub}}"): WRITE for m in ("PUT", "PATCH")},  # its status and finalize
    **_kubernetes(_CORE_NS, "GET POST"),
    **_kubernetes(f"{_CORE_NS}/{{name}}", "GET PUT PATCH DELETE"),
    **_kubernetes(f"{_CORE_NS}/{{name}}/{{sub}}", "GET PUT PATCH"),
    **_kubernetes("/api/v1/{plural}", "GET"),
    # Karmada's search cache and its proxy (drods.api.routes.search): reads of the cached kind
    ("GET", "/apis/search.karmada.io/v1alpha1/search/cache/{path:path}"): K8S_READ,
    ("GET", "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy/{path:path}"): K8S_READ,
    ("GET", "/api/v1/componentstatuses"): READ,
    ("GET", "/api/v1/componentstatuses/{name}"): READ,
    ("POST", "/api/v1/namespaces/{ns}/bindings"): K8S_WRITE,
    ("POST", "/api/v1/namespaces/{ns}/pods/{name}/binding"): K8S_WRITE,
    # cluster-scoped core kinds (PersistentVolume): no namespace, so never for a namespaced token
    ("POST", "/api/v1/{plural}"): WRITE,
    **{(m, "/api/v1/{plural}/{name}"): READ if m == "GET" else WRITE for m in ("GET", "PUT", "PATCH", "DELETE")},
    **{(m, "/api/v1/{plural}/{name}/{sub}"): READ if m == "GET" else WRITE for m in ("GET", "PUT", "PATCH")},
}


def rule_for(method: str, path: str) -> Rule | None:
    return RULES.get(("GET" if method == "HEAD" else method, path))


def rule_namespace(rule: Rule, params: Mapping[str, str], query_namespace: str | None) -> str | None:
    """The namespace a request is judged in under ``rule``: none for a cluster-wide route, the path's, or —
    for a flat read narrowed by ``?namespace=`` — the query's (what the access check and `can-i` both use)."""
    if not rule.namespaced:
        return None
    return query_namespace if rule.query_namespace else namespace_of(params)


def namespace_of(params: Mapping[str, str]) -> str | None:
    """The namespace a Kubernetes path names: ``{ns}``, or ``{name}`` of the six-segment
    ``/apis/{group}/{version}/namespaces/{ns}/{plural}`` that the ``{plural}/{name}/{sub}`` route serves,
    or the one inside a search-cache ``{path}``."""
    if "ns" in params:
        return params["ns"]
    if "path" in params:  # the search cache: the namespace inside the resource path it carries
        parts = params["path"].split("/")
        return next((parts[i + 1] for i, p in enumerate(parts[:-2]) if p == "namespaces"), None)
    return params.get("name") if params.get("plural") == "namespaces" and "sub" in params else None


async def enforce(request: Request) -> None:
    """The table's answer for this request: nothing (go on) or the error that refuses it."""
    route = request.scope.get("route")
    template = str(getattr(route, "path", ""))
    rule = rule_for(request.method, template)
    if rule is None:
        raise ApiError(403, "FORBIDDEN", f"no access rule covers {request.method} {template}: refused to everyone",
                       {"method": request.method, "route": template})
    if rule.public:
        return
    principal = await authenticate(request)
    asked = sorted(h for h in request.headers if h.lower().startswith("impersonate-"))
    if asked:  # kubectl --as: answering as the caller instead would be a wrong answer about someone else
        raise Forbidden(f"impersonation ({', '.join(asked)}) is not served: no role may act as another; make the "
                        "request with that user's own token", {"headers": asked})
    if rule.action is not None:
        # a namespaced token: only in a namespace of its own (the handler also checks the kind is namespaced);
        # reading a Namespace is reading that namespace
        namespace = rule_namespace(rule, request.path_params, request.query_params.get("namespace"))
        if template == OWN_NAMESPACE and request.method in ("GET", "HEAD"):
            namespace = request.path_params.get("name")
        principal.require(rule.action, namespace=namespace)
    if rule.dry_run is DryRun.REFUSED and is_dry_run(request):
        raise ApiError(400, "DRY_RUN_UNSUPPORTED",
                       f"{request.method} {template} cannot simulate a change: nothing was done; "
                       "send it without dryRun to make the change", {"method": request.method, "route": template})
