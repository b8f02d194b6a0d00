"""``kubectl auth whoami`` and ``kubectl auth can-i [--list]``: who a token is and what it may do, as
kube-apiserver answers them (``SelfSubjectReview``, ``SelfSubjectAccessReview``,
``SelfSubjectRulesReview``). Computed from the same rules every request is checked against — the route
table (`drods.api.access`) and the per-kind check (`drods.api.kind_access`) — and never stored."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drods.api.access import RULES, Rule, rule_namespace
from drods.api.auth import Action, Principal
from drods.api.body import read_body
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.kind_access import require_on_kind
from drods.errors import Forbidden, Invalid, field_errors_of
from drods.model.kinds import Kind
from drods.model.namespaces import NAMESPACE

router = APIRouter(include_in_schema=False)  # a Kubernetes path: in discovery, not the façade's schema

AUTHENTICATION = "authentication.k8s.io/v1"
AUTHORIZATION = "authorization.k8s.io/v1"
# the group-versions these reviews add to discovery (`drods.api.routes.discovery`): create-only, cluster-scoped
REVIEW_RESOURCES: dict[str, list[dict[str, Any]]] = {
    gv: [{"name": f"{kind.lower()}s", "singularName": kind.lower(), "namespaced": False, "kind": kind,
          "verbs": ["create"]} for kind in kinds]
    for gv, kinds in ((AUTHENTICATION, ("SelfSubjectReview",)),
                      (AUTHORIZATION, ("SelfSubjectAccessReview", "SelfSubjectRulesReview")))}

READ_VERBS = ("get", "list", "watch")
# deletecollection (a DELETE on a list's path) is not served: ``kubectl delete --all`` deletes each object
WRITE_VERBS = ("create", "update", "patch", "delete")
SUBRESOURCES = ("", "status", "scale")  # served for the kinds that have them; the rest are not served
_METHODS = {"get": ("GET",), "head": ("GET",), "post": ("POST",), "put": ("PUT",), "patch": ("PATCH",),
            "delete": ("DELETE",), "*": ("GET", "POST", "PUT", "PATCH", "DELETE")}


class _Review(BaseModel):
    model_config = ConfigDict(extra="allow")

    metadata: dict[str, Any] = Field(default_factory=dict)


class ResourceAttributes(BaseModel):
    model_config = ConfigDict(extra="ignore")  # newer clients add field and label selectors

    namespace: str = ""
    verb: str = Field(min_length=1)
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


class NonResourceAttributes(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str = Field(min_length=1)
    verb: str = Field(min_length=1)


class AccessReviewSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    resourceAttributes: ResourceAttributes | None = None
    nonResourceAttributes: NonResourceAttributes | None = None


class SelfSubjectReview(_Review):
    apiVersion: Literal["authentication.k8s.io/v1"] = "authentication.k8s.io/v1"
    kind: Literal["SelfSubjectReview"] = "SelfSubjectReview"


class SelfSubjectAccessReview(_Review):
    apiVersion: Literal["authorization.k8s.io/v1"] = "authorization.k8s.io/v1"
    kind: Literal["SelfSubjectAccessReview"] = "SelfSubjectAccessReview"
    spec: AccessReviewSpec


class RulesReviewSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: str = ""


class SelfSubjectRulesReview(_Review):
    apiVersion: Literal["authorization.k8s.io/v1"] = "authorization.k8s.io/v1"
    kind: Literal["SelfSubjectRulesReview"] = "SelfSubjectRulesReview"
    spec: RulesReviewSpec = Field(default_factory=RulesReviewSpec)


_Model = TypeVar("_Model", bound=BaseModel)


async def _body(request: Request, model: type[_Model]) -> _Model:
    raw = await read_body(request)
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise _invalid(model.__name__, field_errors_of(e.errors())) from e


def _invalid(kind: str, fields: list[dict[str, Any]]) -> Invalid:
    """422 with the fields at fault, as kube-apiserver refuses a review it cannot answer."""
    group = "authentication.k8s.io" if kind == "SelfSubjectReview" else "authorization.k8s.io"
    return Invalid(f"{kind}.{group} is invalid", {"kind": kind, "fields": fields})


def _answer(review: _Review, kind: str, api_version: str, **fields: dict[str, Any]) -> JSONResponse:
    """The review as created (201), with its answer: kube-apiserver stores none of them."""
    return JSONResponse({"kind": kind, "apiVersion": api_version,
                         "metadata": {**review.metadata, "creationTimestamp": None}, **fields}, status_code=201)


# ------------------------------------------------------------------ whoami


def user_info(principal: Principal) -> dict[str, Any]:
    """The token as Kubernetes' UserInfo: its subject, its ID, its role as a group, and what limits it."""
    extra: dict[str, list[str]] = {"drods.io/role": [principal.role.value]}
    if principal.namespaces is not None:
        extra["drods.io/namespaces"] = sorted(principal.namespaces)
    if principal.cluster is not None:
        extra["drods.io/cluster"] = [principal.cluster]
    info: dict[str, Any] = {"username": principal.subject,
                            "groups": [f"drods:{principal.role.value}", "system:authenticated"], "extra": extra}
    if principal.token_id:
        info["uid"] = principal.token_id
    return info


@router.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", status_code=201)
async def who_am_i(request: Request, principal: Principal = Depends(authenticate)) -> JSONResponse:
    review = await _body(request, SelfSubjectReview)
    return _answer(review, "SelfSubjectReview", AUTHENTICATION, status={"userInfo": user_info(principal)})


# ------------------------------------------------------------------ can-i


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


def _kinds_of(request: Request, group: str, version: str, resource: str) -> list[Kind]:
    return [k for k in context(request).kinds
            if k.plural == resource and k.group == group and (not version or k.version == version)]


def _actions(verb: str) -> list[bool] | None:
    """The writes a verb needs (False: a read); None: a verb no role grants."""
    if verb == "*":
        return [False, True]
    if verb in READ_VERBS:
        return [False]
    if verb in WRITE_VERBS:
        return [True]
    return None


def decide_resource(request: Request, principal: Principal, attrs: ResourceAttributes) -> Decision:
    writes = _actions(attrs.verb)
    if attrs.verb == "deletecollection":
        return Decision(False, "deletecollection is not served (a DELETE of a list is a 405): delete each object, "
                               "as `kubectl delete --all` does")
    if writes is None:
        return Decision(False, f"no role grants {attrs.verb!r}: DRO-DS's roles grant "
                               f"{', '.join(READ_VERBS + WRITE_VERBS)}")
    namespace = attrs.namespace or None
    if attrs.resource == "*":
        kinds: list[Kind | None] = [None]
        fixed = sorted(f"{k.plural}.{k.group}" if k.group else k.plural
                       for k in context(request).kinds if not k.tenant_writable)
        if True in writes and principal.namespaces is not None and fixed:  # every kind: these it may not write
            return Decision(False, f"{', '.join(fixed)} are written by cluster-wide tokens only")
    elif (attrs.group, attrs.resource) == ("", "componentstatuses"):  # computed, read-only, cluster-scoped
        if True in writes:
            return Decision(False, "componentstatuses are read-only")
        kinds = [None]
        namespace = None
    else:
        found = _kinds_of(request, attrs.group, attrs.version, attrs.resource)
        if not found:
            what = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
            return Decision(False, f"the server does not serve {what}")
        kinds = list(found[:1])
    if attrs.subresource not in SUBRESOURCES and not (attrs.subresource == "finalize" and kinds == [NAMESPACE]):
        return Decision(False, f"the server does not serve {attrs.resource}/{attrs.subresource}")
    try:
        for kind in kinds:
            for write in writes:
                if kind is None:
                    principal.require(Action.WRITE if write else Action.READ, namespace=namespace)
                elif kind is NAMESPACE and not write and attrs.name and principal.namespaces is not None:
                    principal.require(Action.READ, namespace=attrs.name)  # a token's own Namespace
                else:
                    require_on_kind(principal, kind, write, namespace)
    except Forbidden as e:
        return Decision(False, e.message)
    return Decision(True, f"role {principal.role.value!r} may {attrs.verb} {attrs.resource or '*'}")


@cache
def _template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = "".join(("(?P<%s>.+)" if p.endswith(":path}") else "(?P<%s>[^/]+)") % p[1:-1].split(":")[0]
                    if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}$")


def _rule_of_path(method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
    """The route's rule for a path as the server would match it: a literal route before one with
    parameters, the most literal characters first."""
    matches: list[tuple[int, Rule, dict[str, str]]] = []
    for (m, template), rule in RULES.items():
        if m != method:
            continue
        found = _template_pattern(template).match(path)
        if found is not None:
            matches.append((len(re.sub(r"\{[^}]+\}", "", template)), rule, found.groupdict()))
    if not matches:
        return None
    _, rule, params = max(matches, key=lambda t: t[0])
    return rule, params


def _refusal(principal: Principal, rule: Rule, params: dict[str, str], query: str = "") -> str | None:
    """Why the request is refused, as the access check answers it (``query``: the path's query string,
    whose ``namespace`` a flat read narrowed to one namespace is judged by)."""
    if rule.public or rule.action is None:
        return None
    namespace = rule_namespace(rule, params, next(iter(parse_qs(query).get("namespace", [])), None))
    try:
        principal.require(rule.action, namespace=namespace)
    except Forbidden as e:
        return e.message
    return None


def decide_path(principal: Principal, attrs: NonResourceAttributes) -> Decision:
    methods = _METHODS.get(attrs.verb.lower())
    if methods is None:
        return Decision(False, f"{attrs.verb!r} is not an HTTP verb the server serves")
    path, _, query = attrs.path.partition("?")
    ruled = [(m, _rule_of_path(m, path)) for m in methods]
    served = [(m, r) for m, r in ruled if r is not None]
    if not served:
        return Decision(False, f"no route serves {attrs.verb.upper()} {attrs.path}: refused to everyone")
    for method, (rule, params) in served:
        refusal = _refusal(principal, rule, params, query)
        if refusal is not None:
            return Decision(False, f"{method} {attrs.path}: {refusal}")
    return Decision(True, f"role {principal.role.value!r} may {attrs.verb} {attrs.path}")


@router.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", status_code=201)
async def can_i(request: Request, principal: Principal = Depends(authenticate)) -> JSONResponse:
    review = await _body(request, SelfSubjectAccessReview)
    spec = review.spec
    if (spec.resourceAttributes is None) == (spec.nonResourceAttributes is None):
        raise _invalid("SelfSubjectAccessReview", [{"field": "spec.resourceAttributes", "message":
                        "exactly one of spec.resourceAttributes and spec.nonResourceAttributes is required"}])
    if spec.resourceAttributes is not None:
        decision = decide_resource(request, principal, spec.resourceAttributes)
    else:
        assert spec.nonResourceAttributes is not None
        decision = decide_path(principal, spec.nonResourceAttributes)
    status: dict[str, Any] = {"allowed": decision.allowed, "reason": decision.reason}
    if not decision.allowed:
        status["denied"] = True
    return _answer(review, "SelfSubjectAccessReview", AUTHORIZATION, spec=spec.model_dump(exclude_none=True),
                   status=status)


# ------------------------------------------------------------------ can-i --list


def _resource_rules(request: Request, principal: Principal, namespace: str) -> list[dict[str, Any]]:
    cluster_wide = principal.namespaces is None
    if not cluster_wide and namespace not in principal.namespaces:  # type: ignore[operator]
        return []
    rules: list[dict[str, Any]] = []
    if cluster_wide and principal.may(Action.READ) and principal.may(Action.WRITE):
        return [{"verbs": list(READ_VERBS + WRITE_VERBS), "apiGroups": ["*"], "resources": ["*"]}]
    if principal.may(Action.READ):
        rules.append({"verbs": list(READ_VERBS), "apiGroups": ["*"], "resources": ["*"]})
        if not cluster_wide:
            rules.append({"verbs": ["get"], "apiGroups": [""], "resources": ["namespaces"],
                          "resourceNames": [namespace]})
    if principal.may(Action.WRITE):
        if cluster_wide:
            rules.append({"verbs": list(WRITE_VERBS), "apiGroups": ["*"], "resources": ["*"]})
        else:
            by_group: dict[str, list[str]] = {}
            for k in context(request).kinds:
                if k.namespaced and k.tenant_writable and k.plural not in by_group.setdefault(k.group, []):
                    by_group[k.group] += [k.plural, f"{k.plural}/*"]
            rules += [{"verbs": list(WRITE_VERBS), "apiGroups": [g], "resources": plurals}
                      for g, plurals in sorted(by_group.items()) if plurals]
    return rules


def _non_resource_paths() -> Iterator[tuple[str, str, Rule]]:
    """The routes that are not Kubernetes objects: health, discovery, the façade, as RBAC's
    ``nonResourceURLs`` (a path's parameters become a trailing ``*``)."""
    for (method, template), rule in RULES.items():
        if "{plural}" in template or rule.namespaced or template.startswith(("/api/v1/namespaces",
                                                                             "/api/v1/componentstatuses")):
            continue
        path = template.split("{", 1)[0] + "*" if "{" in template else template
        yield method.lower(), path, rule


def _non_resource_rules(principal: Principal) -> list[dict[str, Any]]:
    """The paths by their verbs (every path, every verb: ``*``, as a cluster-admin's rules read)."""
    verbs: dict[str, list[str]] = {}
    everything = True
    for verb, path, rule in _non_resource_paths():
        if _refusal(principal, rule, {}) is not None:
            everything = False
        elif verb not in verbs.setdefault(path, []):
            verbs[path].append(verb)
    if everything:
        return [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    return [{"verbs": sorted(vs), "nonResourceURLs": [path]} for path, vs in sorted(verbs.items()) if vs]


@router.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", status_code=201)
async def can_i_list(request: Request, principal: Principal = Depends(authenticate)) -> JSONResponse:
    review = await _body(request, SelfSubjectRulesReview)
    status = {"resourceRules": _resource_rules(request, principal, review.spec.namespace),
              "nonResourceRules": _non_resource_rules(principal), "incomplete": False}
    return _answer(review, "SelfSubjectRulesReview", AUTHORIZATION, spec=review.spec.model_dump(), status=status)
