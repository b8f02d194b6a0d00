"""Kubernetes discovery documents kubectl needs before it can get/apply/delete anything."""

from __future__ import annotations

import platform
import re
from typing import Any

from fastapi import APIRouter, Depends, Request

from drods import __version__
from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.routes.access_review import REVIEW_RESOURCES
from drods.api.routes.component_status import COMPONENT_STATUS
from drods.errors import NotFound
from drods.model.kinds import Kind

router = APIRouter(include_in_schema=False)

KUBE_GIT_VERSION = "v1.30.0"  # the Kubernetes API level DRO-DS serves


def _groups(kinds: tuple[Kind, ...]) -> dict[str, list[str]]:
    """Each group's versions: the kinds' and the computed reviews' (`drods.api.routes.access_review`)."""
    out: dict[str, list[str]] = {}
    versions_of = [(k.group, k.version) for k in kinds if k.group]
    for group, version in [*versions_of, *(tuple(gv.split("/")) for gv in REVIEW_RESOURCES)]:
        versions = out.setdefault(group, [])
        if version not in versions:
            versions.append(version)
    return out


def _resources(kinds: list[Kind]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in kinds:
        out.append({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                    "verbs": list(k.verbs), "shortNames": list(k.short_names),
                    "categories": list(k.categories)})
        if k.has_status:
            out.append({"name": f"{k.plural}/status", "singularName": "", "namespaced": k.namespaced,
                        "kind": k.kind, "verbs": ["get", "patch", "update"]})
        if k.scale_paths is not None:
            out.append({"name": f"{k.plural}/scale", "singularName": "", "namespaced": k.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale",
                        "verbs": ["get", "patch", "update"]})
    return out


@router.get("/version")
async def version() -> JSONResponse:
    major, minor = KUBE_GIT_VERSION.lstrip("v").split(".")[:2]
    return JSONResponse({"major": major, "minor": minor, "gitVersion": f"{KUBE_GIT_VERSION}+drods.{__version__}",
                         "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                         "compiler": "cpython", "platform": f"{platform.system().lower()}/{platform.machine()}"})


@router.get("/api")
async def core_versions(_: Principal = Depends(authenticate)) -> JSONResponse:
    return JSONResponse({"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})


@router.get("/api/v1")
async def core_resources(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    kinds = [k for k in context(request).kinds if k.group == "" and k.version == "v1"]
    return JSONResponse({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                         "resources": _resources([*kinds, COMPONENT_STATUS]) + CORE_BINDINGS})


# kube-apiserver's create-only core Binding (`drods.api.routes.pod_binding`), never stored. Only as the
# Pod subresource: a top-level core ``bindings`` would win ``kubectl get bindings`` over DRO-DS's own
# bindings.multicluster.io (kubectl prefers the core group); ``POST .../namespaces/{ns}/bindings`` is served.
CORE_BINDINGS = [{"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                  "verbs": ["create"]}]


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version priority, highest first when sorted: GA, then beta, then alpha, each by its
    numbers, newest first; other names last, by name (a CRD serving v1 and v2 prefers v2)."""
    m = _KUBE_VERSION.fullmatch(version)
    if m is None:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), version)


def _group_doc(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in sorted(versions, key=_version_priority)]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


@router.get("/apis")
async def groups(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    return JSONResponse({"kind": "APIGroupList", "apiVersion": "v1",
                         "groups": [_group_doc(g, vs) for g, vs in _groups(context(request).kinds).items()]})


@router.get("/apis/{group}")
async def group(request: Request, group: str, _: Principal = Depends(authenticate)) -> JSONResponse:
    versions = _groups(context(request).kinds).get(group)
    if not versions:
        raise NotFound(f"API group {group!r} not found", {"group": group})
    return JSONResponse({"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)})


@router.get("/apis/{group}/{version}")
async def group_version(request: Request, group: str, version: str,
                        _: Principal = Depends(authenticate)) -> JSONResponse:
    kinds = [k for k in context(request).kinds if k.group == group and k.version == version]
    computed = REVIEW_RESOURCES.get(f"{group}/{version}", [])
    if not kinds and not computed:
        raise NotFound(f"API {group}/{version} not found", {"group": group})
    return JSONResponse({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
                         "resources": _resources(kinds) + computed})
